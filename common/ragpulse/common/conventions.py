"""The instrumentation conventions ragpulse reads, each declared once (:data:`CONVENTIONS`).

A declaration says how a convention's spans look: the attribute-key and event-name prefixes
that show it (:attr:`Convention.markers`), which spans are LLM calls, retrievals and rerankers,
where its simple readers find the question, answer, query and documents, the setting that makes
its instrumentations record text, and the whole keys otelcol's filter tests. Everything else is
derived from here:

* the collector's RAG filter (``ragpulse.collector.split.RAG_MARKERS`` is :data:`RAG_MARKERS`);
* the extractor's convention detection, LLM/retrieval/reranker checks and the rows of its source
  tables that read a declared key (``ragpulse.scorer.traces.extract``); conventions whose values
  need code name their reader module (:attr:`Convention.readers`);
* the content advice of null rows (:mod:`ragpulse.common.schema`);
* docs/instrumentation.md's convention table (:func:`convention_matrix`); and
  ``deploy/otelcol/config.yaml``'s filter is checked against :attr:`Convention.otelcol`
  (``tests/test_conventions_declared.py``).

Adding a convention is one entry here, plus a reader module in the extractor when its values
need more than the declared keys. Pure data; imports nothing else from ragpulse.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

__all__ = ["CONVENTIONS", "RAG_MARKERS", "Convention", "Read", "SpanKind", "convention_matrix",
           "conventions_in"]


@dataclass(frozen=True, slots=True)
class SpanKind:
    """Spans whose attribute ``key`` holds one of ``values`` (any value when ``values`` is
    empty): how a convention marks an LLM call, a retrieval or a reranking."""

    key: str
    values: tuple[str, ...] = ()

    def matches(self, attributes: Mapping[str, object]) -> bool:
        """Whether a span with these attributes is of this kind (non-string values never match a
        value list: they may be unhashable kvlists)."""
        v = attributes.get(self.key)
        if not self.values:
            return v is not None
        return isinstance(v, str) and v in self.values

    def __str__(self) -> str:
        return self.key + (f" = {', '.join(self.values)}" if self.values else "")


@dataclass(frozen=True, slots=True)
class Read:
    """An attribute the extractor's simple readers take a value from, and its ``form``: ``text``
    (plain text, or JSON with a question- or answer-like key, or on the root a
    ``{"messages": [...]}`` conversation), ``call`` (a function-call record
    ``{"args": [...], "kwargs": {...}}``), ``documents`` (a JSON or structured list of strings,
    of dicts with a content-like key, or of LlamaIndex nodes), ``contexts`` (the same, or a
    plain string as one document)."""

    key: str
    form: Literal["text", "call", "documents", "contexts"] = "text"


@dataclass(frozen=True, slots=True)
class Convention:
    """One instrumentation convention.

    ``id`` is what a trace's ``conventions`` metadata records when a span shows the convention:
    an attribute key or event name starting with one of ``markers``. The collector keeps a span
    with a marker, or with a ``keeps`` prefix (key prefixes that do not tell this convention from
    another). ``llm``/``retriever``/``reranker``: the span kinds. ``messages``: the attribute
    families (first two dotted components) that may hold an LLM call's messages, read only on
    spans with one of them, an LLM kind, or span events. ``root_input``/``root_output``/``query``/
    ``documents``: the fields read by the extractor's simple readers (the root's question and
    answer, a retrieval's query and documents), in precedence order. ``readers``: the extractor
    module holding this convention's other readers (``None``: the fields above are all).
    ``content``: the setting that makes its instrumentations record text; ``also_writes``: other
    conventions its spans carry too (their content switch is then not the one to name).
    ``otelcol``: whole attribute keys otelcol's ``filter/rag`` keeps a span for (OTTL tests whole
    keys, not prefixes); none for a convention marked by span events only. ``emitters``: who
    writes it, for the docs."""

    id: str
    name: str
    markers: tuple[str, ...]
    emitters: str
    keeps: tuple[str, ...] = ()
    llm: tuple[SpanKind, ...] = ()
    retriever: tuple[SpanKind, ...] = ()
    reranker: tuple[SpanKind, ...] = ()
    messages: tuple[str, ...] = ()
    root_input: tuple[Read, ...] = ()
    root_output: tuple[Read, ...] = ()
    query: tuple[Read, ...] = ()
    documents: tuple[Read, ...] = ()
    readers: str | None = None
    content: str | None = None
    also_writes: tuple[str, ...] = ()
    otelcol: tuple[str, ...] = ()


_OI_KIND = "openinference.span.kind"

CONVENTIONS: tuple[Convention, ...] = (
    Convention(
        "openinference", "OpenInference", (_OI_KIND,),
        "Arize's openinference-instrumentation-* (LangChain, LlamaIndex, Haystack, openai, ...)",
        keeps=("llm.", "retrieval."),
        llm=(SpanKind(_OI_KIND, ("LLM",)),),
        retriever=(SpanKind(_OI_KIND, ("RETRIEVER",)),),
        reranker=(SpanKind(_OI_KIND, ("RERANKER",)),),
        messages=("llm.input_messages", "llm.output_messages", "llm.prompts", "llm.choices"),
        root_input=(Read("input.value"),),
        root_output=(Read("output.value"),),
        query=(Read("input.value"), Read("reranker.query")),
        readers="openinference",
        content="unset OPENINFERENCE_HIDE_INPUTS, OPENINFERENCE_HIDE_OUTPUTS and the other "
        "OPENINFERENCE_HIDE_* variables",
        also_writes=("gen_ai",),
        otelcol=(_OI_KIND, "llm.model_name", "retrieval.documents.0.document.content"),
    ),
    Convention(
        "openllmetry", "OpenLLMetry", ("traceloop.",),
        "Traceloop's opentelemetry-instrumentation-* (LangChain, LlamaIndex, openai, cohere, ...)",
        keeps=("llm.",),
        llm=(SpanKind("llm.request.type", ("chat", "completion")),),
        root_input=(Read("traceloop.entity.input", "call"),),
        root_output=(Read("traceloop.entity.output"),),
        query=(Read("traceloop.entity.input", "call"),),
        documents=(Read("traceloop.entity.output", "documents"),),
        readers="openllmetry",
        content="set TRACELOOP_TRACE_CONTENT=true",
        also_writes=("gen_ai",),
        otelcol=("traceloop.span.kind", "llm.request.type"),
    ),
    Convention(
        "gen_ai", "OTel GenAI", ("gen_ai.",),
        "opentelemetry-instrumentation-openai-v2 and the others on opentelemetry-util-genai, "
        "OpenLIT, OpenLLMetry's LLM spans",
        llm=(SpanKind("gen_ai.operation.name",
                      ("chat", "text_completion", "generate_content", "completion")),),
        retriever=(SpanKind("gen_ai.operation.name", ("retrieval", "vector_db_retrieve", "retrieve")),
                   SpanKind("gen_ai.retrieval.documents")),
        messages=("gen_ai.input", "gen_ai.output", "gen_ai.prompt", "gen_ai.completion",
                  "gen_ai.system_instructions"),
        root_input=(Read("gen_ai.task.input", "call"),),
        root_output=(Read("gen_ai.task.output"),),
        query=(Read("gen_ai.retrieval.query.text"), Read("gen_ai.task.input", "call")),
        documents=(Read("gen_ai.retrieval.documents", "documents"),
                   Read("gen_ai.task.output", "documents")),
        readers="genai",
        content="set OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY",
        otelcol=("gen_ai.operation.name", "gen_ai.system", "gen_ai.provider.name",
                 "gen_ai.request.model", "gen_ai.retrieval.documents"),
    ),
    Convention(
        "trulens", "TruLens", ("ai.observability.",),
        "trulens-core's OpenTelemetry tracing",
        retriever=(SpanKind("ai.observability.span_type", ("retrieval",)),),
        root_input=(Read("ai.observability.record_root.input"),),
        root_output=(Read("ai.observability.record_root.output"),),
        query=(Read("ai.observability.retrieval.query_text"),),
        documents=(Read("ai.observability.retrieval.retrieved_contexts", "contexts"),),
        also_writes=("gen_ai",),
        otelcol=("ai.observability.span_type",),
    ),
    Convention(
        "confident", "Confident AI", ("confident.",),
        "deepeval's tracing (Confident AI)",
        retriever=(SpanKind("confident.span.retrieval_context"),),
        root_input=(Read("confident.trace.input"),),
        root_output=(Read("confident.trace.output"),),
        documents=(Read("confident.span.retrieval_context", "contexts"),),
        otelcol=("confident.span.type", "confident.span.retrieval_context",
                 "confident.trace.input"),
    ),
    Convention(
        "db.query.result", "vector-DB events", ("db.query.result", "db.search.result"),
        "OpenLLMetry's chromadb, milvus and marqo instrumentors: retrieved documents as span "
        "events",
        readers="events",
    ),
)
"""Every convention the extractor reads, in the precedence order of the source rows derived
from them (docs/instrumentation.md §5)."""

RAG_MARKERS: tuple[str, ...] = tuple(dict.fromkeys(
    [m for c in CONVENTIONS for m in c.markers] + [k for c in CONVENTIONS for k in c.keeps]
))
"""The prefixes of attribute keys and event names that make a span a RAG span for the
collector: every convention's markers (most common first), then the shared ``keeps``."""

_BY_PREFIX: tuple[tuple[str, str], ...] = tuple((m, c.id) for c in CONVENTIONS for m in c.markers)
_PREFIXES = tuple(m for m, _ in _BY_PREFIX)


def conventions_in(names: Iterable[str]) -> set[str]:
    """The ids of the conventions that attribute keys or event names ``names`` show. Pure."""
    found: set[str] = set()
    for name in names:
        if name.startswith(_PREFIXES):
            found.update(cid for prefix, cid in _BY_PREFIX if name.startswith(prefix))
    return found


def convention_matrix() -> str:
    """The declarations as one markdown table (docs/instrumentation.md holds this text)."""
    lines = ["| convention | written by | marked by | LLM span | retrieval span | records text when "
             "| otelcol filter keys |", "|---|---|---|---|---|---|---|"]
    for c in CONVENTIONS:
        marked = ", ".join(f"`{m}*`" for m in c.markers)
        lines.append(
            f"| {c.name} (`{c.id}`) | {c.emitters} | {marked} "
            f"| {'; '.join(f'`{k}`' for k in c.llm) or '-'} "
            f"| {'; '.join(f'`{k}`' for k in c.retriever) or 'see §5'} "
            f"| {c.content or 'no switch known'} "
            f"| {', '.join(f'`{k}`' for k in c.otelcol) or 'none: span events (see deploy.md)'} |"
        )
    return "\n".join(lines) + "\n"
