"""Extract (question, contexts, answer) and row metadata from the spans of one trace.

A pure function of the spans (:func:`extract`), reading the attribute names documented in
docs/instrumentation.md, across
OpenInference, OTel GenAI (new and pre-1.37, attributes and events), OpenLLMetry (new and
legacy), ``db.query.result`` span events, and a few cheap dialects (TruLens, Confident AI).

Precedence, first hit wins (each result records its ``sources`` so a row can say where its text
came from):

* **question**: the root span's ``input.value`` (plain text, or a JSON object with a
  ``question``/``query``/``input``... key), the root's ``traceloop.entity.input``
  (``{"args": [q], "kwargs": {...}}``), TruLens/Confident root input; else the first retriever's
  query (``input.value``, ``gen_ai.retrieval.query.text``, ``traceloop.entity.input.query``,
  ``reranker.query``); else the final LLM prompt (template variable ``question``/``query``, or
  the last user message, or its ``Question:`` section when the message also holds the context).
* **contexts**: every retrieval span ordered by start time (OpenInference RETRIEVER,
  ``gen_ai.operation.name`` ``retrieval``/``vector_db_retrieve``, spans with ``db.query.result``
  events, ``execute_tool`` on a ``datastore`` tool, TruLens/Confident retrieval); a RERANKER's
  ``output_documents`` replace the documents of the retrievers it reranked (what the LLM saw
  wins); identical texts are kept once. When no retrieval span carries text, the contexts are
  recovered from the final LLM prompt (see :func:`split_prompt`).
* **answer**: the root's ``output.value`` / ``traceloop.entity.output``; else the text of the
  last assistant output message of the LLM span that ended last.

Attribute values of unexpected types (an int where a string belongs, JSON that does not parse,
a kvlist where JSON text was expected) are skipped, never raised on.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ragpulse import common

from ..model import Sample
from .reasons import CONTENT_NOT_CAPTURED, NOT_RAG, content_advice
from .span import AttrValue, Span

__all__ = [
    "NEGATIVE_FEEDBACK_LABELS",
    "Extraction",
    "ExtractionSettings",
    "TraceFacts",
    "extract",
    "split_prompt",
]

NEGATIVE_FEEDBACK_LABELS = frozenset(
    {
        "negative",
        "thumbs_down",
        "thumbsdown",
        "thumbs-down",
        "down",
        "bad",
        "dislike",
        "incorrect",
        "unhelpful",
        "wrong",
        "-1",
        "👎",
    }
)
_NEGATIVE_FEEDBACK_BELOW = 0.5

_QUESTION_KEYS = (
    "question",
    "query",
    "query_str",
    "str_or_query_bundle",  # LlamaIndex query engines: a string or a serialized QueryBundle
    "input",
    "user_input",
    "user_question",
    "q",
    "prompt",
    "message",
    "text",
)
_ANSWER_KEYS = (
    "answer",
    "output",
    "output_text",
    "result",
    "response",
    "text",
    "content",
    "completion",
)
_CONTEXT_KEYS = (
    "context",
    "contexts",
    "context_str",
    "documents",
    "docs",
    "retrieved_context",
    "retrieved_contexts",
    "sources",
    "knowledge",
)
_DOC_TEXT_KEYS = (
    "content",
    "page_content",
    "text",
    "document",
    "document.content",
    "chunk",
    "pageContent",
)

_LLM_OPERATIONS = frozenset({"chat", "text_completion", "generate_content", "completion"})
_RETRIEVAL_OPERATIONS = frozenset({"retrieval", "vector_db_retrieve", "retrieve"})
_OI_KIND = "openinference.span.kind"


class ExtractionSettings(BaseModel):
    """What counts as a scorable trace."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    require_contexts: bool = Field(
        True, description="a trace without any context is not a RAG interaction: no sample"
    )
    prompt_fallback: bool = Field(
        True,
        description="recover contexts from the final LLM prompt when retrieval spans have none",
    )
    max_contexts: int = Field(64, ge=1, description="contexts kept per trace, in rank order")


@dataclass(frozen=True, slots=True)
class TraceFacts:
    """What the spans of one trace say about it: where it ran, what produced it, how it went
    (the store turns it into a :class:`ragpulse.scorer.store.ScoredTraceMeta`)."""

    trace_id: str
    service: str = ""
    environment: str = ""
    model: str = ""
    prompt_version: str | None = None
    retriever_version: str | None = None
    start_ns: int = 0
    end_ns: int = 0
    span_count: int = 0
    error: bool = False
    error_message: str = ""
    feedback_score: float | None = None
    feedback_label: str | None = None
    feedback_comment: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    session_id: str | None = None
    user_id: str | None = None
    conventions: tuple[str, ...] = ()
    sources: Mapping[str, str] = field(default_factory=dict)

    @property
    def negative_feedback(self) -> bool:
        """A score below 0.5 (scores are 0..1, 1 = good) or a negative label."""
        if self.feedback_score is not None and self.feedback_score < _NEGATIVE_FEEDBACK_BELOW:
            return True
        return bool(self.feedback_label) and self.feedback_label.lower() in NEGATIVE_FEEDBACK_LABELS

    def as_dict(self) -> dict[str, Any]:
        return {
            "trace_id": self.trace_id,
            "service": self.service,
            "environment": self.environment,
            "model": self.model,
            "prompt_version": self.prompt_version,
            "retriever_version": self.retriever_version,
            "start_ns": self.start_ns,
            "end_ns": self.end_ns,
            "span_count": self.span_count,
            "error": self.error,
            "error_message": self.error_message,
            "feedback_score": self.feedback_score,
            "feedback_label": self.feedback_label,
            "feedback_comment": self.feedback_comment,
            "negative_feedback": self.negative_feedback,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "session_id": self.session_id,
            "user_id": self.user_id,
            "conventions": list(self.conventions),
            "sources": dict(self.sources),
        }


@dataclass(frozen=True, slots=True)
class Extraction:
    """The outcome for one trace: a sample, or ``None`` with a ``reason``; metadata either way.

    ``reason`` is one of ``no_spans``, ``no_question``, ``no_answer``, ``no_contexts`` (the last
    three also are :class:`ragpulse.scorer.Reason` values), ``content_not_captured`` (LLM
    spans without any message text) or ``not_rag`` (no question, no answer, no LLM call: not a
    RAG query at all; see :mod:`.reasons`). ``detail`` says what to do about it, for
    the null rows' explanation (``None`` when there is nothing to add). ``question`` and
    ``answer`` are what was found (stripped), also when there is no sample.
    """

    trace_id: str
    sample: Sample | None
    reason: str | None
    meta: TraceFacts
    detail: str | None = None
    question: str | None = None
    answer: str | None = None

    @property
    def ok(self) -> bool:
        return self.sample is not None


# -- small tolerant readers -------------------------------------------------------------------


def _str(v: Any) -> str | None:
    """``v`` if it is a string: attribute values may be dicts (kvlists), which are unhashable and
    must never reach a set membership test."""
    return v if isinstance(v, str) else None


_REDACTED = "__REDACTED__"
"""What OpenInference writes in place of a hidden value (``REDACTED_VALUE`` in
openinference-instrumentation's ``config.py``; ``OPENINFERENCE_HIDE_*``)."""


def _text(v: AttrValue) -> str | None:
    """A non-blank string, else ``None`` (ints, tuples, blank strings and OpenInference's
    redaction placeholder are not text)."""
    if isinstance(v, str) and v.strip() and v != _REDACTED:
        return v
    return None


def _version(v: AttrValue) -> str | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return str(v)
    t = _text(v)
    return t.strip() if t else None


# How a cut string value ends: the span decoder's mark (``max_value_chars``) or the collector's
# (a record over the Kafka limit, ``ragpulse.collector.shrink``).
_CUT_VALUE = re.compile(r"(?: …\[truncated by ragpulse: \d+ bytes\]|…)\Z")
_JSON = json.JSONDecoder()


def _structured(v: Any) -> Any:
    """A JSON-ish Python value from a JSON string or a structured OTLP value (tuples → lists).

    A JSON array cut short by a size limit (it ends in a truncation mark) gives its complete
    leading items: ten thousand small documents in one JSON string keep the first ones that
    fit, as one huge document keeps its first characters."""
    if isinstance(v, str):
        s = v.lstrip()
        if not s or s[0] not in '[{"':
            return None
        try:
            return json.loads(s)
        except (ValueError, RecursionError):  # RecursionError: hostile nesting ("[[[[...")
            if s[0] == "[" and _CUT_VALUE.search(s):
                return _json_array_prefix(s)
            return None
    if isinstance(v, tuple):
        return [_structured_item(x) for x in v]
    if isinstance(v, dict):
        return {k: _structured_item(x) for k, x in v.items()}
    return None


def _json_array_prefix(s: str) -> list[Any] | None:
    """The items of the JSON array ``s`` that a size limit cut short (it ends in a truncation
    mark): the complete leading items, then the cut one closed where it was cut (its string
    ends in "…"), if that makes valid JSON. ``None`` if nothing could be read. Linear in the
    length of ``s``."""
    out: list[Any] = []
    i, n = 1, len(s)
    try:
        while True:
            while i < n and s[i] in " \t\r\n":
                i += 1
            if i >= n or s[i] == "]":
                break
            item, i = _JSON.raw_decode(s, i)
            out.append(item)
            while i < n and s[i] in " \t\r\n":
                i += 1
            if i >= n or s[i] != ",":
                break
            i += 1
    except (ValueError, RecursionError):
        last = _close_cut_json(s[i:])
        if last is not None:
            out.append(last)
    return out or None


# Scanning a cut JSON text: a complete string, the quote opening the string that was cut, or
# a bracket outside strings.
_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|"|[\[\]{}]')


def _close_cut_json(t: str) -> Any:
    """The JSON value ``t`` that a limit cut (``t`` ends in a truncation mark), closed where it
    was cut: an open string gets "…" and its quote, open arrays and objects their brackets.
    ``None`` when the cut left no valid value (e.g. it fell between a key and its value)."""
    t = _CUT_VALUE.sub("", t)
    closers: list[str] = []
    end = 0
    in_string = False
    for m in _JSON_TOKEN.finditer(t):
        tok = m.group()
        if tok == '"':  # a string that never closes: the cut is inside it
            in_string = True
            end = m.start()
            break
        if tok == "[" or tok == "{":
            closers.append("]" if tok == "[" else "}")
        elif tok == "]" or tok == "}":
            if not closers:
                return None
            closers.pop()
        end = m.end()
    close = "".join(reversed(closers))
    if in_string:
        # Drop a cut escape sequence ("\\" or "\\u00") so the string stays valid JSON.
        body = re.sub(r"\\(?:u[0-9a-fA-F]{0,3})?\Z", "", t[end:])
        candidates = [t[:end] + body + '…"' + close]
    else:  # cut between values, or inside a number or literal: keep it if it is whole
        candidates = [t.rstrip().rstrip(",") + close, t[:end].rstrip().rstrip(",") + close]
    for text in candidates:
        try:
            return json.loads(text)
        except (ValueError, RecursionError):
            continue
    return None


def _structured_item(v: Any) -> Any:
    if isinstance(v, tuple):
        return [_structured_item(x) for x in v]
    if isinstance(v, dict):
        return {k: _structured_item(x) for k, x in v.items()}
    return v


def _pick(obj: Any, keys: Sequence[str], _nested: bool = True) -> str | None:
    """Text from a parsed JSON value: itself if a string, else the first known key holding text
    (or holding an object that has such a key, one level down: ``{"query": {"query_str": q}}``)."""
    if isinstance(obj, str):
        return obj if obj.strip() else None
    if isinstance(obj, dict):
        for k in keys:
            t = obj.get(k)
            if isinstance(t, str) and t.strip():
                return t
        if _nested:
            for k in keys:
                inner = obj.get(k)
                if isinstance(inner, dict) and (t := _pick(inner, keys, False)) is not None:
                    return t
    return None


def _json_or_text(v: AttrValue, keys: Sequence[str]) -> str | None:
    """A plain-text value as is; a JSON value through :func:`_pick` (raw JSON is never text)."""
    t = _text(v)
    if t is None:
        return _pick(_structured(v), keys) if isinstance(v, dict) else None
    s = t.lstrip()
    if s[:1] in ("{", "[", '"'):
        parsed = _structured(t)
        if parsed is not None:
            return _pick(parsed, keys)
    return t


_FAMILIES_CACHE: dict[tuple[str, ...], tuple[dict[str, list[str]], frozenset[str]]] = {}
_FAMILIES_CACHE_MAX = 256
_FAMILIES_CACHE_KEY_CHARS = 4096  # larger key sets are not memoized: the cache stays < ~2 MB
_CONVENTION_PREFIXES = ("traceloop.", "gen_ai.", "ai.observability.")


def _families(attrs: Mapping[str, AttrValue]) -> dict[str, list[str]]:
    """The keys grouped by their first two dotted components (``llm.input_messages``,
    ``gen_ai.prompt``), in attribute order: computed once per span, so an absent flattened list
    costs a dict lookup and a present one a walk over its own keys, not a scan of all keys.

    Spans of one instrumentation repeat the same key sets, so results are memoized by the key
    tuple (bounded in entries and key characters; cleared when full, so hostile key sets cost a
    recomputation, never memory). The returned dict is shared: callers must not mutate it.
    Thread-safe (a race at worst computes a result twice)."""
    return _key_info(attrs)[0]


def _key_info(
    attrs: Mapping[str, AttrValue],
) -> tuple[dict[str, list[str]], frozenset[str]]:
    """:func:`_families` and the conventions the attribute keys show (see :func:`_conventions`),
    memoized together by the key tuple."""
    sig = tuple(attrs)
    info = _FAMILIES_CACHE.get(sig)
    if info is not None:
        return info
    fams: dict[str, list[str]] = {}
    convs: set[str] = set()
    for k in sig:
        j = k.find(".", k.find(".") + 1)
        fam = k if j < 0 else k[:j]
        keys = fams.get(fam)
        if keys is None:
            fams[fam] = [k]
        else:
            keys.append(k)
        if k.startswith(_CONVENTION_PREFIXES):
            convs.add(
                "openllmetry" if k.startswith("traceloop.")
                else "gen_ai" if k.startswith("gen_ai.") else "trulens"
            )
    if _OI_KIND in attrs:
        convs.add("openinference")
    info = (fams, frozenset(convs))
    if sum(map(len, sig)) <= _FAMILIES_CACHE_KEY_CHARS:
        if len(_FAMILIES_CACHE) >= _FAMILIES_CACHE_MAX:
            _FAMILIES_CACHE.clear()
        _FAMILIES_CACHE[sig] = info
    return info


def _indexed(
    attrs: Mapping[str, AttrValue], prefix: str, fams: dict[str, list[str]] | None = None
) -> list[dict[str, AttrValue]]:
    """Flattened list attributes ``<prefix><i>.<sub>`` as a list of ``{sub: value}`` in index order.
    ``prefix`` ends with a dot and has two components; ``fams`` (from :func:`_families`) limits
    the walk to that family's keys."""
    if fams is not None:
        keys: Iterable[str] = fams.get(prefix[:-1], ())
        if not keys:  # the usual case: most conventions are absent from most spans
            return []
    else:
        keys = attrs
    found: dict[int, dict[str, AttrValue]] = {}
    plen = len(prefix)
    for k in keys:
        if k.startswith(prefix):
            i, dot, sub = k[plen:].partition(".")
            if dot and i.isdigit():
                found.setdefault(int(i), {})[sub] = attrs[k]
    return [found[i] for i in sorted(found)]


def _content_text(c: Any, depth: int = 0) -> str | None:
    """Text of a message content: a string, a list of parts
    (``{"type": "text", "content"|"text"}``),
    or a JSON string of such a list (OpenLLMetry serializes multimodal content that way)."""
    if isinstance(c, str):
        s = c.lstrip()
        if s[:1] == "[":
            parsed = _structured(c)
            if isinstance(parsed, list):
                t = _content_text(parsed, depth + 1)
                if t is not None:
                    return t
        return c if c.strip() else None
    if isinstance(c, list):
        texts = []
        for p in c:
            if isinstance(p, str):
                texts.append(p)
            elif isinstance(p, dict) and p.get("type", "text") in (
                "text",
                "input_text",
                "output_text",
            ):
                t = p.get("content", p.get("text"))
                if isinstance(t, str):
                    texts.append(t)
        joined = "\n".join(t for t in texts if t)
        return joined if joined.strip() else None
    if isinstance(c, dict) and depth < 8:  # {"content": {"content": ...}} nests without bound
        return _content_text(c.get("content", c.get("text")), depth + 1)
    return None


Message = tuple[str, str]  # (role, text)

# LangChain's genai util writes its own message types ("Human", "AI"); Gemini says "model".
_ROLE_ALIASES = {"human": "user", "ai": "assistant", "model": "assistant", "bot": "assistant"}


_LANGCHAIN_TYPES = frozenset({"human", "ai", "system", "tool", "function", "chat"})


def _role(v: Any, default: str) -> str:
    if not isinstance(v, str) or not v:
        return default
    r = v.lower()
    return _ROLE_ALIASES.get(r, r)


def _messages(obj: Any, default_role: str) -> list[Message]:
    """GenAI JSON messages (``[{role, parts:[...]}]``), older ``[{role, content}]``, bare text."""
    if isinstance(obj, dict) and isinstance(obj.get("messages"), list):
        obj = obj["messages"]
    if isinstance(obj, dict):
        obj = [obj]
    if isinstance(obj, str):
        return [(default_role, obj)] if obj.strip() else []
    out: list[Message] = []
    if not isinstance(obj, list):
        return out
    for m in obj:
        if isinstance(m, str):
            if m.strip():
                out.append((default_role, m))
            continue
        if not isinstance(m, dict):
            continue
        if isinstance(m.get("message"), dict):  # {"index", "message": {...}} choice shape
            m = m["message"]
        if "content" not in m and isinstance(m.get("kwargs"), dict):  # LangChain serialized message
            m = m["kwargs"]
        # LangChain message dicts carry the role as "type" (human/ai/system/tool); a GenAI part's
        # "type" ("text") is not a role
        lc_type = _str(m.get("type"))
        lc_type = lc_type if lc_type in _LANGCHAIN_TYPES else None
        role = _role(m.get("role") or lc_type, default_role)
        t = _content_text(m.get("parts")) if "parts" in m else None
        if t is None:
            t = _content_text(m.get("content", m.get("text")))
        if t is not None:
            out.append((role, t))
    return out


def _last_message(v: AttrValue, role: str) -> str | None:
    """The last ``role`` message of a JSON ``{"messages": [...]}`` value (LangGraph state, chat
    endpoints): the question or answer of a root span whose I/O is a conversation."""
    parsed = _structured(v)
    if not (isinstance(parsed, dict) and isinstance(parsed.get("messages"), list)):
        return None
    texts = [t for r, t in _messages(parsed["messages"], "") if r == role]
    return texts[-1] if texts else None


def _attr_messages(v: AttrValue, default_role: str) -> list[Message]:
    if isinstance(v, str):
        parsed = _structured(v)
        return _messages(parsed if parsed is not None else v, default_role)
    return _messages(_structured(v), default_role)


def _oi_messages(
    attrs: Mapping[str, AttrValue], prefix: str, default_role: str, fams: dict[str, list[str]] | None = None
) -> list[Message]:
    out: list[Message] = []
    for m in _indexed(attrs, prefix, fams):
        role = _role(m.get("message.role"), default_role)
        t = _text(m.get("message.content"))
        if t is None:
            parts = [
                _text(v)
                for k, v in sorted(m.items())
                if k.startswith("message.contents.") and k.endswith(".message_content.text")
            ]
            joined = "\n".join(p for p in parts if p)
            t = joined or None
        if t is not None:
            out.append((role, t))
    return out


def _flat_messages(
    attrs: Mapping[str, AttrValue], prefix: str, default_role: str, fams: dict[str, list[str]] | None = None
) -> list[Message]:
    """OpenLLMetry legacy ``gen_ai.prompt.<i>.role|content``."""
    out: list[Message] = []
    for m in _indexed(attrs, prefix, fams):
        t = _content_text(m.get("content")) if isinstance(m.get("content"), str) else None
        if t is not None:
            out.append((_role(m.get("role"), default_role), t))
    return out


_LEGACY_INPUT_EVENTS = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}


def _event_content(attrs: Mapping[str, AttrValue]) -> str | None:
    for key in ("content", "gen_ai.event.content", "message", "body"):
        if key in attrs:
            v = attrs[key]
            msgs = _attr_messages(v, "")
            if msgs:
                return msgs[-1][1]
    return None


@dataclass(slots=True)
class _LLMCall:
    span: Span
    inputs: list[Message]
    outputs: list[Message]
    source_in: str
    source_out: str


_LLM_FAMILIES = frozenset(
    {
        "llm.input_messages",
        "llm.output_messages",
        "llm.prompts",
        "llm.choices",
        "llm.request",
        "llm.model_name",
        "gen_ai.input",
        "gen_ai.output",
        "gen_ai.prompt",
        "gen_ai.completion",
        "gen_ai.system_instructions",
        "gen_ai.operation",
    }
)
"""Attribute families (:func:`_families`) that can make a span an LLM call. The OpenInference
span kind is not one: every OpenInference span has it, and it matters only when it says "LLM"
(checked separately), so CHAIN and RETRIEVER spans skip the message conventions entirely."""


def _llm_call(span: Span, fams: dict[str, list[str]] | None = None) -> _LLMCall | None:
    """The messages of one span if it is an LLM call, else ``None``. ``fams``: the span's
    :func:`_families`, when the caller computed them already."""
    a = span.attributes
    if fams is None:
        fams = _families(a)
    if not span.events and fams.keys().isdisjoint(_LLM_FAMILIES) and a.get(_OI_KIND) != "LLM":
        return None
    inputs: list[Message] = []
    outputs: list[Message] = []
    src_in = src_out = ""
    system: list[Message] = []
    # Ordered by how current the convention is; the first that yields messages wins per side.
    if m := _oi_messages(a, "llm.input_messages.", "user", fams):
        inputs, src_in = m, "llm.input_messages"
    elif "gen_ai.input.messages" in a and (m := _attr_messages(a["gen_ai.input.messages"], "user")):
        inputs, src_in = m, "gen_ai.input.messages"
    elif m := _flat_messages(a, "gen_ai.prompt.", "user", fams):
        inputs, src_in = m, "gen_ai.prompt.<i>"
    elif "gen_ai.prompt" in a and (m := _attr_messages(a["gen_ai.prompt"], "user")):
        inputs, src_in = m, "gen_ai.prompt"
    elif m := [
        ("user", t) for d in _indexed(a, "llm.prompts.", fams) if (t := _text(d.get("prompt.text")))
    ]:
        inputs, src_in = m, "llm.prompts"
    elif isinstance(a.get("llm.prompts"), tuple):
        inputs = [("user", t) for t in a["llm.prompts"] if _text(t)]  # type: ignore[misc]
        src_in = "llm.prompts" if inputs else ""
    if "gen_ai.system_instructions" in a:
        system = _attr_messages(a["gen_ai.system_instructions"], "system")

    if m := _oi_messages(a, "llm.output_messages.", "assistant", fams):
        outputs, src_out = m, "llm.output_messages"
    elif "gen_ai.output.messages" in a and (
        m := _attr_messages(a["gen_ai.output.messages"], "assistant")
    ):
        outputs, src_out = m, "gen_ai.output.messages"
    elif m := _flat_messages(a, "gen_ai.completion.", "assistant", fams):
        outputs, src_out = m, "gen_ai.completion.<i>"
    elif "gen_ai.completion" in a and (m := _attr_messages(a["gen_ai.completion"], "assistant")):
        outputs, src_out = m, "gen_ai.completion"
    elif m := [
        ("assistant", t)
        for d in _indexed(a, "llm.choices.", fams)
        if (t := _text(d.get("completion.text")))
    ]:
        outputs, src_out = m, "llm.choices"

    if span.events and (not inputs or not outputs):
        ev_in: list[Message] = []
        ev_out: list[Message] = []
        ev_src_in = ev_src_out = ""
        for ev in span.events:
            ea = ev.attributes
            if ev.name == "gen_ai.client.inference.operation.details":
                if "gen_ai.input.messages" in ea:
                    ev_in = _attr_messages(ea["gen_ai.input.messages"], "user") or ev_in
                    ev_src_in = "event:gen_ai.client.inference.operation.details"
                if "gen_ai.output.messages" in ea:
                    ev_out = _attr_messages(ea["gen_ai.output.messages"], "assistant") or ev_out
                    ev_src_out = "event:gen_ai.client.inference.operation.details"
                if "gen_ai.system_instructions" in ea and not system:
                    system = _attr_messages(ea["gen_ai.system_instructions"], "system")
            elif ev.name in _LEGACY_INPUT_EVENTS:
                t = _event_content(ea)
                if t is not None:
                    ev_in.append((_role(ea.get("role"), _LEGACY_INPUT_EVENTS[ev.name]), t))
                    ev_src_in = "event:gen_ai.<role>.message"
            elif ev.name == "gen_ai.choice":
                t = _event_content(ea)
                if t is not None:
                    ev_out.append(("assistant", t))
                    ev_src_out = "event:gen_ai.choice"
            elif ev.name == "gen_ai.content.prompt" and "gen_ai.prompt" in ea:
                ev_in = _attr_messages(ea["gen_ai.prompt"], "user") or ev_in
                ev_src_in = "event:gen_ai.content.prompt"
            elif ev.name == "gen_ai.content.completion" and "gen_ai.completion" in ea:
                ev_out = _attr_messages(ea["gen_ai.completion"], "assistant") or ev_out
                ev_src_out = "event:gen_ai.content.completion"
        if not inputs and ev_in:
            inputs, src_in = ev_in, ev_src_in
        if not outputs and ev_out:
            outputs, src_out = ev_out, ev_src_out

    if system and not any(r == "system" for r, _ in inputs):
        inputs = system + inputs
    kind = a.get(_OI_KIND)
    is_llm = (
        kind == "LLM"
        or _str(a.get("gen_ai.operation.name")) in _LLM_OPERATIONS
        or a.get("llm.request.type") in ("chat", "completion")
    )
    if not (inputs or outputs or is_llm):
        return None
    return _LLMCall(span, inputs, outputs, src_in, src_out)


# -- retrieval ---------------------------------------------------------------------------------


def _is_node_json(s: str) -> bool:
    """Whether a string is a JSON-encoded LlamaIndex ``NodeWithScore`` (``{"node": {...}}``),
    as OpenLLMetry's LlamaIndex instrumentation writes each retrieved node (0.62.4:
    ``traceloop.entity.output = '["{\\"node\\": ...}", ...]'``)."""
    return s[:1] == "{" and '"node"' in s[:12]


def _doc_texts(items: Any) -> list[str]:
    """Texts of a document list: strings, or dicts with a content-like key (metadata ignored),
    or LlamaIndex ``NodeWithScore`` objects, as dicts or JSON-encoded one per string."""
    if isinstance(items, dict):
        items = items.get("documents", items.get("docs", items.get("results")))
    if isinstance(items, str):
        return [items] if items.strip() else []
    if not isinstance(items, list):
        return []
    out = []
    for d in items:
        if isinstance(d, str) and _is_node_json(d):
            parsed = _structured(d)
            if isinstance(parsed, dict) and isinstance(parsed.get("node"), dict):
                d = parsed
        if isinstance(d, str):
            if d.strip():
                out.append(d)
        elif isinstance(d, dict):
            t = _pick(d, _DOC_TEXT_KEYS)
            if t is None and isinstance(d.get("node"), dict):  # LlamaIndex NodeWithScore
                t = _pick(d["node"], _DOC_TEXT_KEYS)
            if t is not None:
                out.append(t)
    return out


def _oi_documents(
    attrs: Mapping[str, AttrValue], prefix: str, fams: dict[str, list[str]] | None = None
) -> list[str]:
    docs = [t for d in _indexed(attrs, prefix, fams) if (t := _text(d.get("document.content")))]
    if not docs:
        whole = attrs.get(prefix[:-1])  # a structured array under the un-flattened name
        if isinstance(whole, tuple):
            docs = _doc_texts(_structured(whole))
    return docs


def _is_retrieval(span: Span) -> bool:
    a = span.attributes
    if (
        a.get(_OI_KIND) == "RETRIEVER"
        or _str(a.get("gen_ai.operation.name")) in _RETRIEVAL_OPERATIONS
    ):
        return True
    if (
        span.name.startswith("vector_db_retrieve")
        or a.get("ai.observability.span_type") == "retrieval"
    ):
        return True
    if (
        a.get("gen_ai.operation.name") == "execute_tool"
        and a.get("gen_ai.tool.type") == "datastore"
    ):
        return True
    if "confident.span.retrieval_context" in a or "gen_ai.retrieval.documents" in a:
        return True
    if a.get("traceloop.span.kind") == "task" and _is_node_list(a.get("traceloop.entity.output")):
        return True  # OpenLLMetry's LlamaIndex retrievers: a task span, no operation name
    return any(e.name in ("db.query.result", "db.search.result") for e in span.events)


def _is_node_list(v: AttrValue) -> bool:
    """Whether a JSON text is a list of LlamaIndex ``NodeWithScore`` objects (as dicts or as
    JSON-encoded strings). A cheap look at its head: any task's output passes through here."""
    if not isinstance(v, str):
        return False
    head = v[:32].lstrip()
    return head[:1] == "[" and '"node' in head


_SYNTHESIS_MARKERS = ('"nodes"', '"text_chunks"', '"context_str"')


def _synthesis_contexts(span: Span) -> list[str]:
    """The retrieved texts a LlamaIndex response synthesizer was given, from its OpenLLMetry
    task span's ``traceloop.entity.input``: ``nodes`` (``CompactAndRefine.synthesize``),
    ``text_chunks`` (``get_response``) or ``{"kwds": {"context_str": ...}}``
    (``DefaultRefineProgram``). ``[]`` when the span is none of these."""
    v = span.attributes.get("traceloop.entity.input")
    if not isinstance(v, str) or not any(m in v for m in _SYNTHESIS_MARKERS):
        return []
    parsed = _structured(v)
    if not isinstance(parsed, dict):
        return []
    for scope in (parsed, parsed.get("kwargs"), parsed.get("kwds")):
        if not isinstance(scope, dict):
            continue
        nodes = scope.get("nodes")
        if isinstance(nodes, list) and all(  # NodeWithScore only: a splitter's nodes are not
            isinstance(n, dict) and "node" in n or isinstance(n, str) and _is_node_json(n)
            for n in nodes
        ) and (docs := _doc_texts(nodes)):
            return docs
        chunks = scope.get("text_chunks")
        if isinstance(chunks, list) and (docs := [c for c in chunks if _text(c)]):
            return docs
        if docs := _contexts_from_variables({"context_str": scope.get("context_str")}):
            return docs
    return []


def _retrieved(
    span: Span, fams: dict[str, list[str]] | None = None
) -> tuple[list[str], str]:
    """The documents of one retrieval span in rank order, and which attribute held them.
    ``fams``: the span's :func:`_families`, when the caller computed them already."""
    a = span.attributes
    if docs := _oi_documents(a, "retrieval.documents.", fams if fams is not None else _families(a)):
        return docs, "retrieval.documents"
    if "gen_ai.retrieval.documents" in a and (
        docs := _doc_texts(_structured(a["gen_ai.retrieval.documents"]))
    ):
        return docs, "gen_ai.retrieval.documents"
    for key in ("traceloop.entity.output", "gen_ai.task.output"):
        if key in a and (docs := _doc_texts(_structured(a[key]))):
            return docs, key
    docs = []
    for e in span.events:
        if e.name == "db.query.result":
            t = _text(e.attributes.get("db.query.result.document"))
            if t is not None:
                docs.append(t)
        elif e.name == "db.search.result":
            ent = _structured(e.attributes.get("db.search.result.entity"))
            t = _pick(ent, _DOC_TEXT_KEYS) if isinstance(ent, dict) else None
            if t is not None:
                docs.append(t)
    if docs:
        return docs, "event:db.query.result"
    for key in (
        "ai.observability.retrieval.retrieved_contexts",
        "confident.span.retrieval_context",
    ):
        v = a.get(key)
        if v is not None and (
            docs := _doc_texts(_structured(v) if not isinstance(v, str) or v[:1] == "[" else v)
        ):
            return docs, key
    if a.get("gen_ai.operation.name") == "execute_tool":
        v = a.get("gen_ai.tool.call.result")
        parsed = _structured(v)
        if docs := _doc_texts(parsed if parsed is not None else _text(v)):
            return docs, "gen_ai.tool.call.result"
    return [], ""


def _retrieval_query(span: Span) -> str | None:
    a = span.attributes
    for key in (
        "input.value",
        "gen_ai.retrieval.query.text",
        "reranker.query",
        "ai.observability.retrieval.query_text",
    ):
        if (t := _json_or_text(a.get(key), _QUESTION_KEYS)) is not None:
            return t
    for key in ("traceloop.entity.input", "gen_ai.task.input"):
        parsed = _structured(a.get(key))
        if isinstance(parsed, dict):
            t = _pick(parsed, _QUESTION_KEYS) or _pick(parsed.get("kwargs"), _QUESTION_KEYS)
            if t is not None:
                return t
    return None


# -- prompt fallback ---------------------------------------------------------------------------

# Prompt text is partly user-controlled, so nothing here may backtrack super-linearly: tags are
# found by an opening-tag pattern plus str.find for the closing tag, separators line by line.
_BLOCK_OPEN = re.compile(
    r"<(context|contexts|documents|sources|retrieved_context)\b[^>\n]*>", re.IGNORECASE
)
_DOC_OPEN = re.compile(r"<(document|doc|source|passage|chunk)\b[^>\n]*>", re.IGNORECASE)


def _tagged(text: str, opening: re.Pattern[str], first_only: bool) -> list[str]:
    """Inner texts of ``<tag ...>...</tag>`` pairs, scanning left to right in linear time; an
    unclosed last tag runs to the end of the text."""
    out: list[str] = []
    lower = None
    pos = 0
    while (m := opening.search(text, pos)) is not None:
        if lower is None:
            lower = text.lower()
        close = lower.find(f"</{m.group(1).lower()}", m.end())
        if close < 0:  # unclosed: most often a prompt cut by an attribute length limit
            out.append(text[m.end() :])
            break
        out.append(text[m.end() : close])
        if first_only:
            break
        end = text.find(">", close)
        pos = end + 1 if end >= 0 else len(text)
    return out


def _tag_block(text: str) -> str | None:
    found = _tagged(text, _BLOCK_OPEN, first_only=True)
    return found[0] if found else None


_CONTEXT_LABEL = re.compile(
    r"^[ \t]*(?:#+[ \t]*)?(?:\*\*)?(?:retrieved[ \t]+)?"
    r"(?:context(?:s|[ \t]+information)?|documents|sources|passages)(?:\*\*)?"
    r"(?:[ \t]*:(?:\*\*)?"
    r"|[ \t]+(?:is|are)[ \t]+(?:below|as[ \t]+follows)[ \t]*[.:]?[ \t]*$"
    r"|[ \t]*$)",
    re.IGNORECASE | re.MULTILINE,
)
_QUESTION_LABEL = re.compile(
    r"^[ \t]*(?:(?:#+[ \t]*)?(?:\*\*)?(?:user[ \t]+)?(?:question|query)(?:\*\*)?[ \t]*:(?:\*\*)?"
    r"|#+[ \t]*(?:user[ \t]+)?(?:question|query)[ \t]*$)",
    re.IGNORECASE | re.MULTILINE,
)
_SECTION_END = re.compile(
    r"^[ \t]*(?:(?:#+[ \t]*)?(?:\*\*)?"
    r"(?:(?:user[ \t]+)?(?:question|query)|answer|response|instructions?|"
    r"context(?:s|[ \t]+information)?|documents|sources)(?:\*\*)?[ \t]*:"
    r"|given[ \t]+the[ \t]+context\b|#+[ \t]+\S)",
    re.IGNORECASE | re.MULTILINE,
)
_SEPARATOR_LINE = re.compile(r"^[ \t]*(?:-{3,}|={3,}|\*{3,}|_{3,})[ \t]*$", re.MULTILINE)
_NUMBERED_DOC = re.compile(
    r"^[ \t]*(?:\[\d+\]"
    r"|(?:document|doc|source|passage|context|chunk)[ \t]*#?\d+[ \t]*[:.)\]-])[ \t]*",
    re.IGNORECASE | re.MULTILINE,
)
_BLANK_LINES = re.compile(r"\n[ \t]*\n")


def _is_separator(line: str) -> bool:
    t = line.strip()
    return len(t) >= 3 and t[0] in "-=*_" and t == t[0] * len(t)


def _split_block(block: str) -> list[str]:
    """One context block → documents: explicit tags, then numbered markers, then separator lines,
    then blank lines (``"\\n\\n".join(docs)`` is how LangChain and LlamaIndex fill
    ``{context}``)."""
    tagged = [t.strip() for t in _tagged(block, _DOC_OPEN, first_only=False)]
    if tagged:
        return [t for t in tagged if t]
    starts = [m for m in _NUMBERED_DOC.finditer(block)]
    if len(starts) >= 1 and not block[: starts[0].start()].strip():
        out = []
        for i, m in enumerate(starts):
            end = starts[i + 1].start() if i + 1 < len(starts) else len(block)
            out.append(block[m.end() : end].strip())
        return [t for t in out if t]
    parts = _SEPARATOR_LINE.split(block)
    if len(parts) > 1:
        return [t.strip() for t in parts if t.strip()]
    return [t.strip() for t in _BLANK_LINES.split(block) if t.strip()]


def _labeled_section(text: str, label: re.Pattern[str]) -> str | None:
    """The body after a label (same-line text after ``:`` included) up to the next label line.

    ``^`` in a pattern searched from a mid-line position does not match there, so a body that
    starts on the label's own line is never cut by its own label."""
    m = label.search(text)
    if m is None:
        return None
    nxt = _SECTION_END.search(text, m.end())
    return text[m.end() : nxt.start() if nxt is not None else len(text)]


def split_prompt(text: str) -> tuple[list[str], str | None]:
    """Find the context block and the question inside one prompt message.

    Heuristics, in order: a ``<context>``/``<documents>`` tag block; else a labeled section
    (a line starting ``Context:``, ``Context information is below.``, ``Documents:``,
    ``Sources:``, optionally markdown ``#``/``**``) running to the next label line
    (``Question:``, ``Query:``, ``Answer:``, ``Given the context...``) or the end, with separator
    lines (``-----``) trimmed. The block is split into documents by :func:`_split_block`.
    The question is a ``Question:``/``Query:`` section. Returns ``([], None)`` when nothing matches.
    """
    contexts: list[str] = []
    block = _tag_block(text)
    if block is not None:
        contexts = _split_block(block.strip())
    else:
        sec = _labeled_section(text, _CONTEXT_LABEL)
        if sec is not None:
            # trim the frame LlamaIndex puts around {context_str}
            lines = sec.strip().split("\n")
            lo, hi = 0, len(lines)  # indices, not list.pop(0): a prompt of separators is linear
            while lo < hi and _is_separator(lines[lo]):
                lo += 1
            while hi > lo and _is_separator(lines[hi - 1]):
                hi -= 1
            body = "\n".join(lines[lo:hi]).strip()
            if body:
                contexts = _split_block(body)
    question = None
    q = _labeled_section(text, _QUESTION_LABEL)
    if q is not None:
        question = q.strip() or None
    return contexts, question


def _template_variables(span: Span) -> dict[str, Any] | None:
    v = span.attributes.get("llm.prompt_template.variables")
    parsed = _structured(v)
    return parsed if isinstance(parsed, dict) else None


def _contexts_from_variables(variables: Mapping[str, Any]) -> list[str]:
    for key in _CONTEXT_KEYS:
        v = variables.get(key)
        if isinstance(v, str) and v.strip():
            inner = _tag_block(v)
            return _split_block(inner.strip() if inner is not None else v.strip())
        if isinstance(v, list) and (docs := _doc_texts(v)):
            return docs
    return []


# -- the extraction ----------------------------------------------------------------------------


def _root(spans: Sequence[Span]) -> Span:
    ids = {s.span_id for s in spans}
    roots = [s for s in spans if s.parent_span_id is None]
    if not roots:  # the real root has not arrived: the top-most orphans stand in for it
        roots = [s for s in spans if s.parent_span_id not in ids]
    return min(roots or spans, key=lambda s: (s.start_ns, -s.end_ns))


def _unique(spans: list[Span]) -> list[Span]:
    """Spans in order without repeats (by identity: spans hold dicts and are not hashable)."""
    seen: set[int] = set()
    return [s for s in spans if not (id(s) in seen or seen.add(id(s)))]  # type: ignore[func-returns-value]


def _first_attr(
    spans: Sequence[Span],
    keys: Sequence[str],
    conv: Callable[[AttrValue], str | None] = _version,
) -> str | None:
    """The first key (in priority order) found on any span (in order) or its resource."""
    for key in keys:
        for s in spans:
            # Span.attr inlined, and absent keys (the usual case) never reach ``conv``: every
            # converter maps None to None. Called for several keys x every span of every trace.
            v = s.attributes.get(key)
            if v is None:
                v = s.resource.get(key)
                if v is None:
                    continue
            v = conv(v)
            if v is not None:
                return v
    return None


def _number(v: AttrValue) -> float | None:
    if isinstance(v, bool):
        return 1.0 if v else 0.0
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        try:
            return float(v)
        except ValueError:
            return None
    return None


_SCORE_KEYS = (common.FEEDBACK_SCORE, "user.feedback.score", "feedback.score")
_LABEL_KEYS = (common.FEEDBACK_LABEL, "user.feedback.label", "feedback.label")
_COMMENT_KEYS = (common.FEEDBACK_COMMENT, "user.feedback.comment", "feedback.comment")
_FEEDBACK_SPAN_KEYS = frozenset(_SCORE_KEYS + _LABEL_KEYS + _COMMENT_KEYS)
_FEEDBACK_EVENT_KEYS = _FEEDBACK_SPAN_KEYS | {"score", "value", "label", "comment"}
_FEEDBACK_EVENTS = frozenset((common.FEEDBACK_EVENT, "user.feedback", "feedback"))


def _read_feedback(
    attrs: Mapping[str, AttrValue], bare: bool
) -> tuple[float | None, str | None, str | None]:
    """Score, label and comment from span attributes, or (``bare``) a feedback event's."""
    sk = _SCORE_KEYS + (("score", "value") if bare else ())
    lk = _LABEL_KEYS + (("label",) if bare else ())
    ck = _COMMENT_KEYS + (("comment",) if bare else ())
    score = next((n for k in sk if (n := _number(attrs.get(k))) is not None), None)
    label = next((t for k in lk if (t := _text(attrs.get(k))) is not None), None)
    comment = next((t for k in ck if (t := _text(attrs.get(k))) is not None), None)
    return score, label, comment


def _feedback(spans: Sequence[Span]) -> tuple[float | None, str | None, str | None]:
    """The latest user feedback in the trace, from attributes or ``ragpulse.feedback`` events."""
    best: tuple[int, float | None, str | None, str | None] | None = None
    for s in spans:
        # Most spans carry no feedback at all: one C-level disjointness test skips the lookups.
        if not s.attributes.keys().isdisjoint(_FEEDBACK_SPAN_KEYS):
            score, label, comment = _read_feedback(s.attributes, False)
            if (score is not None or label is not None) and (best is None or s.end_ns >= best[0]):
                best = (s.end_ns, score, label, comment)
        for e in s.events:
            if e.name in _FEEDBACK_EVENTS and not e.attributes.keys().isdisjoint(
                _FEEDBACK_EVENT_KEYS
            ):
                score, label, comment = _read_feedback(e.attributes, True)
                if (score is not None or label is not None) and (
                    best is None or e.time_ns >= best[0]
                ):
                    best = (e.time_ns, score, label, comment)
    return (best[1], best[2], best[3]) if best else (None, None, None)


def _tokens(calls: Sequence[_LLMCall], keys: Sequence[str]) -> int | None:
    total = None
    for c in calls:
        for k in keys:
            v = c.span.attributes.get(k)
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                total = (total or 0) + int(v)
                break
    return total


def _conventions(
    spans: Sequence[Span], attr_conventions: Sequence[frozenset[str]] | None = None
) -> tuple[str, ...]:
    """The instrumentation conventions seen in the trace. ``attr_conventions``: each span's
    conventions from its attribute keys (:func:`_key_info`), in order, when already known."""
    found: set[str] = set()
    for i, s in enumerate(spans):
        found |= (
            attr_conventions[i] if attr_conventions is not None else _key_info(s.attributes)[1]
        )
        if s.events:
            if any(e.name.startswith("gen_ai.") for e in s.events):
                found.add("gen_ai")
            if any(e.name == "db.query.result" for e in s.events):
                found.add("db.query.result")
    return tuple(sorted(found))


def _dedupe(texts: Iterable[str], limit: int) -> list[str]:
    seen: set[str] = set()
    out = []
    for t in texts:
        key = t.strip()
        if key and key not in seen:
            seen.add(key)
            out.append(key)
            if len(out) >= limit:
                break
    return out


_MODEL_KEYS = (
    "llm.model_name",
    "gen_ai.request.model",
    "gen_ai.response.model",
    "llm.request.model_name",
    "llm.response.model_name",
)
_PROVIDER_KEYS = (
    "llm.provider",
    "traceloop.association.properties.ls_provider",  # LangChain's own name for the provider
    "gen_ai.provider.name",
    "gen_ai.system",
    "llm.system",
)
# What instrumentations write for a model without a name (LlamaIndex's LLMMetadata default,
# OpenLLMetry's LangChain handler): no name, so the fallbacks below apply.
_NO_MODEL = frozenset({"unknown", "none", "null", "n/a", "default"})


# The LLM class a span is named after: "MockLLM.predict", "FakeListChatModel.chat".
_CLASS_NAME = re.compile(r"[A-Z][A-Za-z0-9_]*(?=[.\s]|$)")


def _model_name(v: AttrValue) -> str | None:
    t = _text(v)
    if t is None:
        return None
    t = t.strip()
    return None if t.lower() in _NO_MODEL else t


def _model(llm_spans: Sequence[Span], ordered: Sequence[Span]) -> str:
    """The row's model: a model attribute of the final LLM span, then of the other LLM spans
    (or, without any, of any span); else the LLM spans' provider; else the final LLM span's
    class, as instrumentations name spans after it (``MockLLM.predict``, ``MockLLM.task``).
    ``""`` when none of these exists."""
    found = _first_attr(llm_spans or ordered, _MODEL_KEYS, _model_name)
    if found is None and llm_spans:
        found = _first_attr(llm_spans, _PROVIDER_KEYS, _model_name)
        if found is None:
            name = _text(llm_spans[0].attributes.get("traceloop.entity.name")) or llm_spans[0].name
            m = _CLASS_NAME.match(name)
            found = m.group(0) if m else None
    return found or ""


# Attributes that carry a trace's question or answer outside the LLM messages.
_IO_KEYS = (
    "input.value",
    "output.value",
    "traceloop.entity.input",
    "traceloop.entity.output",
    "gen_ai.task.input",
    "gen_ai.task.output",
    "gen_ai.retrieval.query.text",
    "ai.observability.record_root.input",
    "ai.observability.record_root.output",
    "confident.trace.input",
    "confident.trace.output",
)


def _content_not_captured(
    spans: Sequence[Span], calls: Sequence[_LLMCall], present: set[str]
) -> bool:
    """Whether the trace has LLM calls but its instrumentation recorded no text at all: no call
    has a message and no I/O attribute exists (or each holds OpenInference's redaction
    placeholder). A value of the wrong type or a blank string is text that was captured and is
    unusable: that stays ``no_question``/``no_answer``."""
    if not calls or any(c.inputs or c.outputs for c in calls):
        return False
    if present.isdisjoint(_IO_KEYS):
        return True
    return all(s.attributes.get(k, _REDACTED) == _REDACTED for s in spans for k in _IO_KEYS)


_DEFAULT_SETTINGS = ExtractionSettings()
_PROMPT_VERSION_KEYS = (
    common.PROMPT_VERSION,
    "llm.prompt_template.version",
    "traceloop.prompt.version",
    "traceloop.entity.version",
)
_RETRIEVER_VERSION_KEYS = (common.RETRIEVER_VERSION, "retriever.version")
_SESSION_KEYS = ("session.id", "gen_ai.conversation.id")
_USER_KEYS = ("user.id", "enduser.id")


@dataclass(slots=True)
class _TraceView:
    """One trace's spans read once: time-ordered, the root, each span's attribute families, the
    LLM calls and the final one; ``sources`` records where each extracted text came from."""

    ordered: list[Span]
    root: Span
    infos: list[Any]
    calls: list[_LLMCall]
    final: _LLMCall | None
    root_is_io: bool
    sources: dict[str, str] = field(default_factory=dict)
    retrievals: list[tuple[Span, list[str], str]] = field(default_factory=list)
    rerankers: list[tuple[Span, list[str], list[str]]] = field(default_factory=list)


def extract(spans: Sequence[Span], settings: ExtractionSettings | None = None) -> Extraction:
    """The sample and metadata of one trace's spans (any order, all of one trace id).

    Pure and thread-safe; never raises for malformed attribute values. The sample's ``id`` is the
    trace id and its ``metadata`` is :meth:`TraceFacts.as_dict`. The stages, in order: the
    question the root span records, the retrieved contexts, the question a retriever was asked,
    the final LLM prompt (variables, then messages) for what is still missing, the answer, then
    the trace's facts (service, model, versions, tokens, feedback).
    """
    settings = settings or _DEFAULT_SETTINGS
    if not spans:
        return Extraction("", None, "no_spans", TraceFacts(trace_id=""))
    view = _view(spans)
    question = _root_question(view)
    contexts = _retrieved_contexts(view, settings)
    if question is None:
        question = _retrieval_question(view)
    if view.final is not None and (question is None or (not contexts and settings.prompt_fallback)):
        question, contexts = _from_final_prompt(view, view.final, question, contexts, settings)
    answer = _answer(view)
    present = _present_keys(view.ordered)
    meta = _facts(view, spans[0].trace_id, present)
    return _outcome(view, meta, present, question, contexts, answer, settings)


def _view(spans: Sequence[Span]) -> _TraceView:
    ordered = sorted(spans, key=lambda s: (s.start_ns, s.end_ns))
    root = _root(ordered)
    # Each span's attribute families and conventions, computed once (and memoized per key set):
    # the LLM, retrieval and convention scans all look attributes up by family.
    infos = [_key_info(s.attributes) for s in ordered]
    calls = [c for s, i in zip(ordered, infos) if (c := _llm_call(s, i[0])) is not None]
    with_output = [c for c in calls if c.outputs]
    final = (
        max(with_output, key=lambda c: (c.span.end_ns, c.span.start_ns))
        if with_output
        else (max(calls, key=lambda c: (c.span.end_ns, c.span.start_ns)) if calls else None)
    )
    root_is_io = root.attributes.get(_OI_KIND) not in (
        "LLM",
        "RETRIEVER",
        "RERANKER",
        "EMBEDDING",
    ) and (final is None or final.span is not root)
    return _TraceView(ordered, root, infos, calls, final, root_is_io)


def _root_question(view: _TraceView) -> str | None:
    """The question the root span records as its input, in any convention; ``None`` when the
    root is itself an LLM/retrieval span or records none."""
    if not view.root_is_io:
        return None
    attrs, sources = view.root.attributes, view.sources
    question = _json_or_text(attrs.get("input.value"), _QUESTION_KEYS)
    if question is None:
        question = _last_message(attrs.get("input.value"), "user")
    if question is not None:
        sources["question"] = "root:input.value"
        return question
    for key in ("traceloop.entity.input", "gen_ai.task.input"):
        parsed = _structured(attrs.get(key))
        if isinstance(parsed, dict):
            question = _pick(parsed.get("kwargs"), _QUESTION_KEYS) or _pick(parsed, _QUESTION_KEYS)
            args = parsed.get("args")
            if question is None and isinstance(args, list) and len(args) == 1:
                question = _pick(args[0], _QUESTION_KEYS)
        if question is not None:
            sources["question"] = f"root:{key}"
            return question
    for key in ("ai.observability.record_root.input", "confident.trace.input"):
        if (question := _json_or_text(attrs.get(key), _QUESTION_KEYS)) is not None:
            sources["question"] = f"root:{key}"
            return question
    return None


def _retrieved_contexts(view: _TraceView, settings: ExtractionSettings) -> list[str]:
    """The documents the retrievers returned, in time order, with a reranker's output replacing
    the retrieval it reranked; else the nodes a synthesizer was given. Fills ``view.retrievals``
    and ``view.rerankers``."""
    retrievals, rerankers = view.retrievals, view.rerankers
    for s, info in zip(view.ordered, view.infos):
        f = info[0]
        if s.attributes.get(_OI_KIND) == "RERANKER":
            outs = _oi_documents(s.attributes, "reranker.output_documents.", f)
            if outs:
                rerankers.append(
                    (s, _oi_documents(s.attributes, "reranker.input_documents.", f), outs)
                )
        elif _is_retrieval(s):
            docs, src = _retrieved(s, f)
            retrievals.append((s, docs, src))

    ranked: list[tuple[int, list[str], str]] = []
    for s, docs, src in retrievals:
        if not docs:
            continue
        superseded = any(
            (set(docs) <= set(inputs)) if inputs else r.start_ns >= s.start_ns
            for r, inputs, _ in rerankers
        )
        if not superseded:
            ranked.append((s.start_ns, docs, src))
    for r, _, outs in rerankers:
        ranked.append((r.start_ns, outs, "reranker.output_documents"))
    ranked.sort(key=lambda t: t[0])
    contexts = _dedupe((d for _, docs, _ in ranked for d in docs), settings.max_contexts)
    if contexts:
        view.sources["contexts"] = "+".join(dict.fromkeys(src for _, _, src in ranked))
        return contexts
    # No retrieval span with text (retrieval outside LlamaIndex, or a retriever the
    # instrumentation does not wrap): the nodes the synthesizer was given, first span first.
    for s in view.ordered:
        if docs := _synthesis_contexts(s):
            view.sources["contexts"] = "synthesis:traceloop.entity.input"
            return _dedupe(docs, settings.max_contexts)
    return contexts


def _retrieval_question(view: _TraceView) -> str | None:
    """The query a retriever (else a reranker) was asked."""
    for s, _, _ in view.retrievals:
        if (question := _retrieval_query(s)) is not None:
            view.sources["question"] = "retrieval:query"
            return question
    for r, _, _ in view.rerankers:
        if (question := _retrieval_query(r)) is not None:
            view.sources["question"] = "reranker:query"
            return question
    return None


def _from_final_prompt(view: _TraceView, final: _LLMCall, question: str | None,
                       contexts: list[str], settings: ExtractionSettings,
                       ) -> tuple[str | None, list[str]]:
    """What is still missing, from the final LLM call: its template variables first, then its
    messages (contexts only with ``settings.prompt_fallback``)."""
    sources = view.sources
    variables = _template_variables(final.span)
    if variables is not None:
        if not contexts and settings.prompt_fallback:
            contexts = _dedupe(_contexts_from_variables(variables), settings.max_contexts)
            if contexts:
                sources["contexts"] = "prompt:llm.prompt_template.variables"
        if question is None and (question := _pick(variables, _QUESTION_KEYS)) is not None:
            sources["question"] = "prompt:llm.prompt_template.variables"
    users = [t for r, t in final.inputs if r == "user"]
    others = [t for r, t in final.inputs if r in ("system", "developer")]
    if not contexts and settings.prompt_fallback:
        for t in reversed(users + others):  # last user message first, then system prompts
            found, q = split_prompt(t)
            if found:
                contexts = _dedupe(found, settings.max_contexts)
                sources["contexts"] = f"prompt:{final.source_in}"
                if question is None and q is not None:
                    question, sources["question"] = q, f"prompt:{final.source_in}"
                break
    if question is None and users:
        last = users[-1]
        found, q = split_prompt(last)
        if q is not None:
            question = q
        elif not found:
            question = last
        if question is not None:
            sources["question"] = f"llm:{final.source_in}"
    return question, contexts


_ROOT_ANSWER_KEYS = (
    "output.value",
    "traceloop.entity.output",
    "gen_ai.task.output",
    "ai.observability.record_root.output",
    "confident.trace.output",
)


def _answer(view: _TraceView) -> str | None:
    """The root span's output, else the final LLM call's last (assistant) output."""
    if view.root_is_io:
        for key in _ROOT_ANSWER_KEYS:
            v = view.root.attributes.get(key)
            if (answer := _json_or_text(v, _ANSWER_KEYS) or _last_message(v, "assistant")) is not None:
                view.sources["answer"] = f"root:{key}"
                return answer
    final = view.final
    if final is not None:
        texts = [t for r, t in final.outputs if r == "assistant"] or [t for _, t in final.outputs]
        if texts:
            view.sources["answer"] = f"llm:{final.source_out}"
            return texts[-1]
    return None


def _present_keys(ordered: list[Span]) -> set[str]:
    """Every attribute key of the trace's spans and resources: the optional attributes looked
    up for the facts are absent from most traces, which one C-level disjointness test tells."""
    present: set[str] = set()
    last_resource = None
    for s in ordered:
        present.update(s.attributes)
        if s.resource is not last_resource:
            present.update(s.resource)
            last_resource = s.resource
    return present


def _facts(view: _TraceView, trace_id: str, present: set[str]) -> TraceFacts:
    ordered, root, calls, final = view.ordered, view.root, view.calls, view.final
    llm_spans = [final.span] + [c.span for c in calls if c is not final] if final else []
    errors = [s for s in ordered if s.is_error]
    err = root if root.is_error else (errors[0] if errors else None)
    score, label, comment = _feedback(ordered)
    svc_span = root if root.service_name else next((s for s in ordered if s.service_name), root)
    return TraceFacts(
        trace_id=trace_id,
        service=svc_span.service_name or "",
        environment=svc_span.environment or "",
        model=_model(llm_spans, ordered),
        prompt_version=None
        if present.isdisjoint(_PROMPT_VERSION_KEYS)
        else _first_attr(_unique(llm_spans + [root] + ordered), _PROMPT_VERSION_KEYS),
        retriever_version=None
        if present.isdisjoint(_RETRIEVER_VERSION_KEYS)
        else _first_attr(
            _unique(
                [s for s, _, _ in view.retrievals] + [r for r, _, _ in view.rerankers]
                + [root] + ordered
            ),
            _RETRIEVER_VERSION_KEYS,
        ),
        start_ns=min(s.start_ns for s in ordered),
        end_ns=max(s.end_ns for s in ordered),
        span_count=len(ordered),
        error=err is not None,
        error_message=err.status_message if err is not None else "",
        feedback_score=score,
        feedback_label=label,
        feedback_comment=comment,
        prompt_tokens=_tokens(
            calls,
            ("llm.token_count.prompt", "gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens"),
        ),
        completion_tokens=_tokens(
            calls,
            (
                "llm.token_count.completion",
                "gen_ai.usage.output_tokens",
                "gen_ai.usage.completion_tokens",
            ),
        ),
        session_id=None
        if present.isdisjoint(_SESSION_KEYS)
        else _first_attr(ordered, _SESSION_KEYS, _text),
        user_id=None if present.isdisjoint(_USER_KEYS) else _first_attr(ordered, _USER_KEYS, _text),
        conventions=_conventions(ordered, [i[1] for i in view.infos]),
        sources=view.sources,
    )


def _outcome(view: _TraceView, meta: TraceFacts, present: set[str], question: str | None,
             contexts: list[str], answer: str | None, settings: ExtractionSettings) -> Extraction:
    """The sample, or why there is none (not a RAG query, content not captured, a part
    missing); what was found is kept either way."""
    trace_id = meta.trace_id
    if question is None and answer is None and not view.calls:
        return Extraction(trace_id, None, NOT_RAG, meta)
    q = question.strip() if question is not None else None
    a = answer.strip() if answer is not None else None
    if question is None or answer is None:
        if _content_not_captured(view.ordered, view.calls, present):
            return Extraction(
                trace_id, None, CONTENT_NOT_CAPTURED, meta, content_advice(meta.conventions), q, a
            )
        reason = "no_question" if question is None else "no_answer"
        return Extraction(trace_id, None, reason, meta, None, q, a)
    if not contexts and settings.require_contexts:
        return Extraction(trace_id, None, "no_contexts", meta, None, q, a)
    # Sample._fast: Sample(...)'s result without re-validating values built here as exact types.
    sample = Sample._fast(
        id=trace_id,
        question=q,
        contexts=tuple(contexts),
        answer=a,
        metadata=meta.as_dict(),
    )
    return Extraction(trace_id, sample, None, meta, None, q, a)
