"""The walk over one trace: which spans are LLM calls and retrievals, then the question, contexts
and answer from the source tables (:mod:`.sources`) in precedence order, the prompt fallback for
what is still missing, and the trace's facts. Pure and thread-safe; never raises for malformed
attribute values.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ragpulse.common import SpanKind
from ragpulse.common.schema import CONTENT_NOT_CAPTURED, NOT_RAG, content_advice

from ...model import Sample
from ..span import Span
from . import openinference, openllmetry
from .facts import feedback, first_attr, model_of, token_sum, trace_conventions
from .families import Families, families, key_info
from .messages import Message
from .openinference import SPAN_KIND
from .prompt import contexts_from_variables, split_prompt
from .readers import QUESTION_KEYS, pick
from .results import Extraction, ExtractionSettings, TraceFacts
from .sources import (
    COMPLETION_TOKENS,
    LLM_EVENTS,
    LLM_INPUT,
    LLM_KINDS,
    LLM_OUTPUT,
    LLM_SYSTEM,
    MESSAGE_FAMILIES,
    PROMPT_TOKENS,
    PROMPT_VERSION,
    RERANKER_KINDS,
    RETRIEVAL_DOCUMENTS,
    RETRIEVAL_QUERY,
    RETRIEVAL_SPAN,
    RETRIEVER_VERSION,
    ROOT_ANSWER,
    ROOT_QUESTION,
    SESSION,
    USER,
    Source,
    keys,
)
from .values import REDACTED


@dataclass(slots=True)
class _LLMCall:
    span: Span
    inputs: list[Message]
    outputs: list[Message]
    source_in: str
    source_out: str


def _is_kind(kinds: Sequence[SpanKind], a: Any) -> bool:
    """Whether attributes ``a`` make a span one of ``kinds`` (a loop, not ``any()``: this runs
    for every span of every trace)."""
    for k in kinds:  # SpanKind.matches, inlined
        v = a.get(k.key)
        if v is not None and (not k.values or v.__class__ is str and v in k.values):
            return True
    return False


def _first_messages(
    table: Sequence[Source], a: Any, fams: dict[str, list[str]]
) -> tuple[list[Message], str]:
    """The first row of ``table`` that yields messages, and its name; ``([], "")`` if none."""
    for row in table:
        if m := row.read(a, fams):
            return m, row.name
    return [], ""


def _event_messages(
    span: Span, system: list[Message]
) -> tuple[list[Message], str, list[Message], str, list[Message]]:
    """Input and output messages (with their sources) and system instructions from the span's
    events (:data:`.sources.LLM_EVENTS`), in event order; ``system`` is kept when not empty."""
    ev: dict[str, list[Message]] = {"input": [], "output": [], "system": system}
    src = {"input": "", "output": "", "system": ""}
    for e in span.events:
        for row in LLM_EVENTS:
            if row.event != e.name:
                continue
            if row.side == "system" and ev["system"]:
                continue
            m = row.read(e.attributes)
            if m is None:
                continue
            if row.append:
                ev[row.side].extend(m)
            else:
                ev[row.side] = m or ev[row.side]
            src[row.side] = row.name
    return ev["input"], src["input"], ev["output"], src["output"], ev["system"]


def _llm_call(span: Span, fams: Families | None = None) -> _LLMCall | None:
    """The messages of one span if it is an LLM call, else ``None``. ``fams``: the span's
    :func:`families`, when the caller computed them already. Each side comes from the first
    row of :data:`.sources.LLM_INPUT` / :data:`.sources.LLM_OUTPUT` that yields messages; span
    events fill a side the attributes left empty."""
    a = span.attributes
    if fams is None:
        fams = families(a)
    is_llm = _is_kind(LLM_KINDS, a)
    if not (is_llm or span.events) and fams.keys().isdisjoint(MESSAGE_FAMILIES):
        return None
    inputs, src_in = _first_messages(LLM_INPUT, a, fams)
    outputs, src_out = _first_messages(LLM_OUTPUT, a, fams)
    system, _ = _first_messages(LLM_SYSTEM, a, fams)
    if span.events and (not inputs or not outputs):
        ev_in, ev_src_in, ev_out, ev_src_out, system = _event_messages(span, system)
        if not inputs and ev_in:
            inputs, src_in = ev_in, ev_src_in
        if not outputs and ev_out:
            outputs, src_out = ev_out, ev_src_out
    if system and not any(r == "system" for r, _ in inputs):
        inputs = system + inputs
    if not (inputs or outputs or is_llm):
        return None
    return _LLMCall(span, inputs, outputs, src_in, src_out)


def _is_retrieval(span: Span) -> bool:
    """Whether any row of :data:`.sources.RETRIEVAL_SPAN` says so (a loop, not ``any()`` over a
    generator: this runs for every span of every trace)."""
    for row in RETRIEVAL_SPAN:
        if row.read(span):
            return True
    return False


def _retrieved(
    span: Span, fams: Families | None = None
) -> tuple[list[str], str]:
    """The documents of one retrieval span in rank order, and which source held them (the first
    row of :data:`.sources.RETRIEVAL_DOCUMENTS` that yields any). ``fams``: the span's
    :func:`families`, when the caller computed them already."""
    if fams is None:
        fams = families(span.attributes)
    for row in RETRIEVAL_DOCUMENTS:
        if docs := row.read(span, fams):
            return docs, row.name
    return [], ""


def _first_text(table: Sequence[Source], span: Span) -> tuple[str | None, str]:
    """The first row of ``table`` whose reader finds text on ``span``, and its name."""
    attrs = span.attributes
    for row in table:
        if (t := row.read(attrs)) is not None:
            return t, row.name
    return None, ""


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


def _root(spans: Sequence[Span]) -> Span:
    ids = {s.span_id for s in spans}
    roots = [s for s in spans if s.parent_span_id is None]
    if not roots:  # the real root has not arrived: the top-most orphans stand in for it
        roots = [s for s in spans if s.parent_span_id not in ids]
    return min(roots or spans, key=lambda s: (s.start_ns, -s.end_ns))


# Attributes that carry a trace's question or answer outside the LLM messages.
_IO_KEYS = (
    *(row.name.removeprefix("root:") for row in ROOT_QUESTION),
    *(row.name.removeprefix("root:") for row in ROOT_ANSWER),
    "gen_ai.retrieval.query.text",
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
    return all(s.attributes.get(k, REDACTED) == REDACTED for s in spans for k in _IO_KEYS)


_DEFAULT_SETTINGS = ExtractionSettings()
_PROMPT_VERSION_KEYS = keys(PROMPT_VERSION)
_RETRIEVER_VERSION_KEYS = keys(RETRIEVER_VERSION)
_SESSION_KEYS = keys(SESSION)
_USER_KEYS = keys(USER)


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
    infos = [key_info(s.attributes) for s in ordered]
    calls = [c for s, i in zip(ordered, infos) if (c := _llm_call(s, i[0])) is not None]
    with_output = [c for c in calls if c.outputs]
    final = (
        max(with_output, key=lambda c: (c.span.end_ns, c.span.start_ns))
        if with_output
        else (max(calls, key=lambda c: (c.span.end_ns, c.span.start_ns)) if calls else None)
    )
    root_is_io = root.attributes.get(SPAN_KIND) not in (
        "LLM",
        "RETRIEVER",
        "RERANKER",
        "EMBEDDING",
    ) and (final is None or final.span is not root)
    return _TraceView(ordered, root, infos, calls, final, root_is_io)


def _root_question(view: _TraceView) -> str | None:
    """The question the root span records as its input (:data:`.sources.ROOT_QUESTION`);
    ``None`` when the root is itself an LLM/retrieval span or records none."""
    if not view.root_is_io:
        return None
    question, source = _first_text(ROOT_QUESTION, view.root)
    if question is not None:
        view.sources["question"] = source
    return question


def _retrieved_contexts(view: _TraceView, settings: ExtractionSettings) -> list[str]:
    """The documents the retrievers returned, in time order, with a reranker's output replacing
    the retrieval it reranked; else the nodes a synthesizer was given. Fills ``view.retrievals``
    and ``view.rerankers``."""
    retrievals, rerankers = view.retrievals, view.rerankers
    for s, info in zip(view.ordered, view.infos):
        f = info[0]
        if _is_kind(RERANKER_KINDS, s.attributes):
            outs = openinference.flattened_documents(s.attributes, "reranker.output_documents.", f)
            if outs:
                rerankers.append(
                    (s, openinference.flattened_documents(s.attributes, "reranker.input_documents.", f), outs)
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
        if docs := openllmetry.synthesis_contexts(s):
            view.sources["contexts"] = "synthesis:traceloop.entity.input"
            return _dedupe(docs, settings.max_contexts)
    return contexts


def _retrieval_question(view: _TraceView) -> str | None:
    """The query a retriever (else a reranker) was asked (:data:`.sources.RETRIEVAL_QUERY`)."""
    for spans, source in (
        ([s for s, _, _ in view.retrievals], "retrieval:query"),
        ([r for r, _, _ in view.rerankers], "reranker:query"),
    ):
        for s in spans:
            if (question := _first_text(RETRIEVAL_QUERY, s)[0]) is not None:
                view.sources["question"] = source
                return question
    return None


def _from_final_prompt(view: _TraceView, final: _LLMCall, question: str | None,
                       contexts: list[str], settings: ExtractionSettings,
                       ) -> tuple[str | None, list[str]]:
    """What is still missing, from the final LLM call: its template variables first, then its
    messages (contexts only with ``settings.prompt_fallback``)."""
    sources = view.sources
    variables = openinference.template_variables(final.span)
    if variables is not None:
        if not contexts and settings.prompt_fallback:
            contexts = _dedupe(contexts_from_variables(variables), settings.max_contexts)
            if contexts:
                sources["contexts"] = "prompt:llm.prompt_template.variables"
        if question is None and (question := pick(variables, QUESTION_KEYS)) is not None:
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


def _answer(view: _TraceView) -> str | None:
    """The root span's output (:data:`.sources.ROOT_ANSWER`), else the final LLM call's last
    (assistant) output."""
    if view.root_is_io:
        answer, source = _first_text(ROOT_ANSWER, view.root)
        if answer is not None:
            view.sources["answer"] = source
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
    score, label, comment = feedback(ordered)
    svc_span = root if root.service_name else next((s for s in ordered if s.service_name), root)
    return TraceFacts(
        trace_id=trace_id,
        service=svc_span.service_name or "",
        environment=svc_span.environment or "",
        model=model_of(llm_spans, ordered),
        prompt_version=None
        if present.isdisjoint(_PROMPT_VERSION_KEYS)
        else first_attr(_unique(llm_spans + [root] + ordered), PROMPT_VERSION),
        retriever_version=None
        if present.isdisjoint(_RETRIEVER_VERSION_KEYS)
        else first_attr(
            _unique(
                [s for s, _, _ in view.retrievals] + [r for r, _, _ in view.rerankers]
                + [root] + ordered
            ),
            RETRIEVER_VERSION,
        ),
        start_ns=min(s.start_ns for s in ordered),
        end_ns=max(s.end_ns for s in ordered),
        span_count=len(ordered),
        error=err is not None,
        error_message=err.status_message if err is not None else "",
        feedback_score=score,
        feedback_label=label,
        feedback_comment=comment,
        prompt_tokens=token_sum(calls, PROMPT_TOKENS),
        completion_tokens=token_sum(calls, COMPLETION_TOKENS),
        session_id=None
        if present.isdisjoint(_SESSION_KEYS)
        else first_attr(ordered, SESSION),
        user_id=None if present.isdisjoint(_USER_KEYS) else first_attr(ordered, USER),
        conventions=trace_conventions(ordered, [i[1] for i in view.infos]),
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
