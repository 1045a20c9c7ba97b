"""Tolerant readers shared by every convention: attribute values of unexpected types (an int where
a string belongs, JSON that does not parse, a kvlist where JSON text was expected) read as
"nothing here", never raise.

Also the per-span attribute families (:func:`_key_info`, memoized by key set), which let the
source tables look a convention up by family instead of scanning every key of every span.
All pure and thread-safe.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ..span import AttrValue, Span

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
_OI_KIND = "openinference.span.kind"


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


# What instrumentations write for a model without a name (LlamaIndex's LLMMetadata default,
# OpenLLMetry's LangChain handler): no name, so the fallbacks below apply.
_NO_MODEL = frozenset({"unknown", "none", "null", "n/a", "default"})


def _model_name(v: AttrValue) -> str | None:
    t = _text(v)
    if t is None:
        return None
    t = t.strip()
    return None if t.lower() in _NO_MODEL else t


def _token_count(v: AttrValue) -> int | None:
    """A token count: a number (not a bool), truncated to an int."""
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


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


def _unique(spans: list[Span]) -> list[Span]:
    """Spans in order without repeats (by identity: spans hold dicts and are not hashable)."""
    seen: set[int] = set()
    return [s for s in spans if not (id(s) in seen or seen.add(id(s)))]  # type: ignore[func-returns-value]


Reader = Callable[[Mapping[str, AttrValue]], str | None]


def question_at(key: str) -> Reader:
    """A reader of the question in attribute ``key``: plain text, or JSON with a question-like
    key (one level of nesting allowed)."""

    def read(a: Mapping[str, AttrValue]) -> str | None:
        return _json_or_text(a.get(key), _QUESTION_KEYS)

    return read


def answer_at(key: str) -> Reader:
    """A reader of the answer in attribute ``key``: plain text, JSON with an answer-like key, or
    a ``{"messages": [...]}`` conversation (its last assistant message)."""

    def read(a: Mapping[str, AttrValue]) -> str | None:
        v = a.get(key)
        return _json_or_text(v, _ANSWER_KEYS) or _last_message(v, "assistant")

    return read


def entity_input_question(key: str) -> Reader:
    """A reader of the question in a function-call record ``{"args": [...], "kwargs": {...}}``
    (OpenLLMetry's ``traceloop.entity.input``, GenAI's ``gen_ai.task.input``): a question-like
    keyword, else a question-like key of the record, else its single positional argument."""

    def read(a: Mapping[str, AttrValue]) -> str | None:
        parsed = _structured(a.get(key))
        if not isinstance(parsed, dict):
            return None
        question = _pick(parsed.get("kwargs"), _QUESTION_KEYS) or _pick(parsed, _QUESTION_KEYS)
        args = parsed.get("args")
        if question is None and isinstance(args, list) and len(args) == 1:
            question = _pick(args[0], _QUESTION_KEYS)
        return question

    return read


def entity_input_query(key: str) -> Reader:
    """A reader of a retriever's query in a function-call record: a question-like key of the
    record, else of its ``kwargs``."""

    def read(a: Mapping[str, AttrValue]) -> str | None:
        parsed = _structured(a.get(key))
        if isinstance(parsed, dict):
            return _pick(parsed, _QUESTION_KEYS) or _pick(parsed.get("kwargs"), _QUESTION_KEYS)
        return None

    return read


SpanReader = Callable[[Span, dict[str, list[str]]], list[str]]


def documents_at(key: str) -> SpanReader:
    """A reader of the documents in attribute ``key``: a JSON (or structured) list of strings,
    of dicts with a content-like key, or of LlamaIndex ``NodeWithScore`` objects."""

    def read(span: Span, fams: dict[str, list[str]]) -> list[str]:
        a = span.attributes
        return _doc_texts(_structured(a[key])) if key in a else []

    return read


def context_list_at(key: str) -> SpanReader:
    """Like :func:`documents_at`, but a plain string that is not a JSON list is one document."""

    def read(span: Span, fams: dict[str, list[str]]) -> list[str]:
        v = span.attributes.get(key)
        if v is None:
            return []
        return _doc_texts(_structured(v) if not isinstance(v, str) or v[:1] == "[" else v)

    return read
