"""The implementation of :mod:`ragpulse.instrument` (its docstring is the user's guide): the
span handles and :class:`RagTracer`. The OpenTelemetry API and the standard library only."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import (
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    TracerProvider,
)

from .attributes import (
    FEEDBACK_COMMENT,
    FEEDBACK_EVENT,
    FEEDBACK_LABEL,
    FEEDBACK_SCORE,
    PROMPT_VERSION,
    RETRIEVER_VERSION,
)

__all__ = ["Document", "LLMSpan", "QuerySpan", "RagTracer", "RerankSpan", "RetrievalSpan"]

_SCOPE = "ragpulse.instrument"
_SCOPE_VERSION = "0.1.0"


@dataclass(frozen=True)
class Document:
    """One retrieved chunk; ``metadata`` becomes JSON (OpenInference ``document.metadata``)."""

    content: str
    id: str | None = None
    score: float | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)


DocumentLike = Document | str | Mapping[str, Any]
MessageLike = Mapping[str, Any] | tuple[str, str]


def _document(d: DocumentLike) -> Document:
    if isinstance(d, Document):
        return d
    if isinstance(d, str):
        return Document(d)
    if isinstance(d, Mapping):
        content = d.get("content", d.get("page_content", d.get("text")))
        if not isinstance(content, str):
            raise TypeError(f"document mapping without a text 'content': {sorted(d)}")
        score = d.get("score")
        return Document(
            content,
            id=None if d.get("id") is None else str(d["id"]),
            score=None if score is None else float(score),
            metadata=d.get("metadata") or {},
        )
    raise TypeError(f"not a document: {type(d).__name__}")


def _message(m: MessageLike) -> tuple[str, str]:
    if isinstance(m, tuple) and len(m) == 2:
        return str(m[0]), str(m[1])
    if isinstance(m, Mapping) and isinstance(m.get("content"), str):
        return str(m.get("role", "user")), m["content"]
    raise TypeError("a message is (role, content) or {'role': ..., 'content': str}")


def _genai_messages(msgs: Sequence[tuple[str, str]], finish_reason: str | None = None) -> str:
    out = []
    for role, content in msgs:
        m: dict[str, Any] = {"role": role, "parts": [{"type": "text", "content": content}]}
        if finish_reason is not None:
            m["finish_reason"] = finish_reason
        out.append(m)
    return json.dumps(out, ensure_ascii=False)


class _Handle:
    def __init__(self, span: trace.Span, tracer: RagTracer) -> None:
        self.span = span
        self._rt = tracer

    @property
    def span_context(self) -> SpanContext:
        return self.span.get_span_context()

    @property
    def trace_id(self) -> str:
        """The trace id as 32 lowercase hex characters (the Kafka key, the row's trace_id)."""
        return format(self.span_context.trace_id, "032x")

    @property
    def span_id(self) -> str:
        return format(self.span_context.span_id, "016x")

    def set_attribute(self, key: str, value: Any) -> None:
        self.span.set_attribute(key, value)


class QuerySpan(_Handle):
    """The root of one RAG interaction (OpenInference CHAIN)."""

    def set_answer(self, answer: str) -> None:
        if self._rt.capture_content:
            self.span.set_attribute("output.value", answer)
            self.span.set_attribute("output.mime_type", "text/plain")

    def feedback(
        self, score: float | None = None, label: str | None = None, comment: str | None = None
    ) -> None:
        """Feedback known while the query is still open, as a ``ragpulse.feedback`` event."""
        self.span.add_event(
            FEEDBACK_EVENT, _feedback_attrs(score, label, comment, self._rt.capture_content)
        )


class RetrievalSpan(_Handle):
    """A retriever call (OpenInference RETRIEVER; GenAI ``retrieval`` when enabled)."""

    def set_documents(self, documents: Sequence[DocumentLike]) -> list[Document]:
        docs = [_document(d) for d in documents]
        rt = self._rt
        for i, d in enumerate(docs):
            p = f"retrieval.documents.{i}.document."
            if d.id is not None:
                self.span.set_attribute(p + "id", d.id)
            if rt.capture_content:
                self.span.set_attribute(p + "content", d.content)
            if d.score is not None:
                self.span.set_attribute(p + "score", d.score)
            if d.metadata:
                self.span.set_attribute(
                    p + "metadata", json.dumps(dict(d.metadata), ensure_ascii=False, default=str)
                )
        if rt.genai:
            payload = []
            for i, d in enumerate(docs):
                item: dict[str, Any] = {"id": d.id if d.id is not None else str(i)}
                if d.score is not None:
                    item["score"] = d.score
                if rt.capture_content:
                    item["content"] = d.content
                payload.append(item)
            self.span.set_attribute(
                "gen_ai.retrieval.documents", json.dumps(payload, ensure_ascii=False)
            )
        return docs


class RerankSpan(_Handle):
    """A reranker call (OpenInference RERANKER): its output documents are what the LLM saw."""

    def set_output_documents(self, documents: Sequence[DocumentLike]) -> list[Document]:
        docs = [_document(d) for d in documents]
        _set_oi_documents(self.span, "reranker.output_documents", docs, self._rt.capture_content)
        return docs


class LLMSpan(_Handle):
    """A model call (OpenInference LLM; GenAI ``chat`` when enabled)."""

    def set_input_messages(self, messages: Sequence[MessageLike]) -> None:
        msgs = [_message(m) for m in messages]
        rt = self._rt
        if not rt.capture_content:
            return
        for i, (role, content) in enumerate(msgs):
            self.span.set_attribute(f"llm.input_messages.{i}.message.role", role)
            self.span.set_attribute(f"llm.input_messages.{i}.message.content", content)
        self.span.set_attribute(
            "input.value",
            json.dumps(
                {"messages": [{"role": r, "content": c} for r, c in msgs]}, ensure_ascii=False
            ),
        )
        self.span.set_attribute("input.mime_type", "application/json")
        if rt.genai:
            self.span.set_attribute("gen_ai.input.messages", _genai_messages(msgs))

    def set_output(
        self,
        text: str,
        *,
        prompt_tokens: int | None = None,
        completion_tokens: int | None = None,
        response_model: str | None = None,
        finish_reason: str | None = "stop",
    ) -> None:
        rt = self._rt
        if rt.capture_content:
            self.span.set_attribute("llm.output_messages.0.message.role", "assistant")
            self.span.set_attribute("llm.output_messages.0.message.content", text)
            self.span.set_attribute("output.value", text)
            self.span.set_attribute("output.mime_type", "text/plain")
            if rt.genai:
                self.span.set_attribute(
                    "gen_ai.output.messages", _genai_messages([("assistant", text)], finish_reason)
                )
        if rt.genai:
            if finish_reason is not None:
                self.span.set_attribute("gen_ai.response.finish_reasons", [finish_reason])
            if response_model is not None:
                self.span.set_attribute("gen_ai.response.model", response_model)
        self.set_usage(prompt_tokens, completion_tokens)

    def set_usage(self, prompt_tokens: int | None, completion_tokens: int | None) -> None:
        if prompt_tokens is not None:
            self.span.set_attribute("llm.token_count.prompt", int(prompt_tokens))
        if completion_tokens is not None:
            self.span.set_attribute("llm.token_count.completion", int(completion_tokens))
        if prompt_tokens is not None and completion_tokens is not None:
            self.span.set_attribute(
                "llm.token_count.total", int(prompt_tokens) + int(completion_tokens)
            )
        if self._rt.genai:
            if prompt_tokens is not None:
                self.span.set_attribute("gen_ai.usage.input_tokens", int(prompt_tokens))
            if completion_tokens is not None:
                self.span.set_attribute("gen_ai.usage.output_tokens", int(completion_tokens))


def _set_oi_documents(
    span: trace.Span, prefix: str, docs: Sequence[Document], content: bool
) -> None:
    for i, d in enumerate(docs):
        p = f"{prefix}.{i}.document."
        if d.id is not None:
            span.set_attribute(p + "id", d.id)
        if content:
            span.set_attribute(p + "content", d.content)
        if d.score is not None:
            span.set_attribute(p + "score", d.score)


def _feedback_attrs(
    score: float | None, label: str | None, comment: str | None, content: bool
) -> dict[str, Any]:
    if score is None and label is None:
        raise ValueError("feedback needs a score (0..1, 1 = good) or a label")
    if score is not None and not 0.0 <= float(score) <= 1.0:
        raise ValueError(f"feedback score {score} outside [0, 1] (0 = bad, 1 = good)")
    attrs: dict[str, Any] = {}
    if score is not None:
        attrs[FEEDBACK_SCORE] = float(score)
    if label is not None:
        attrs[FEEDBACK_LABEL] = label
    if comment is not None and content:
        attrs[FEEDBACK_COMMENT] = comment
    return attrs


class RagTracer:
    """Context managers that open correctly shaped RAG spans (see the module docstring).

    ``tracer_provider``: defaults to the global provider. ``genai``: also write OTel GenAI
    attributes. ``capture_content``: record question, documents, prompts and answers.
    """

    def __init__(
        self,
        tracer_provider: TracerProvider | None = None,
        *,
        genai: bool = False,
        capture_content: bool = True,
    ) -> None:
        self.genai = genai
        self.capture_content = capture_content
        self._tracer = trace.get_tracer(_SCOPE, _SCOPE_VERSION, tracer_provider=tracer_provider)

    @contextmanager
    def _span(
        self, name: str, kind: SpanKind, attrs: dict[str, Any], handle: type[_Handle]
    ) -> Iterator[Any]:
        attrs = {k: v for k, v in attrs.items() if v is not None}
        with self._tracer.start_as_current_span(name, kind=kind, attributes=attrs) as span:
            yield handle(span, self)
            span.set_status(Status(StatusCode.OK))

    def query(
        self,
        question: str,
        *,
        name: str = "rag.query",
        session_id: str | None = None,
        user_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        prompt_version: str | None = None,
        retriever_version: str | None = None,
    ) -> Any:
        """Open the root span of one interaction; yields a :class:`QuerySpan`."""
        attrs: dict[str, Any] = {
            "openinference.span.kind": "CHAIN",
            "session.id": session_id,
            "user.id": user_id,
            PROMPT_VERSION: prompt_version,
            RETRIEVER_VERSION: retriever_version,
            "metadata": json.dumps(dict(metadata), ensure_ascii=False, default=str)
            if metadata
            else None,
        }
        if self.capture_content:
            attrs["input.value"] = question
            attrs["input.mime_type"] = "text/plain"
        return self._span(name, SpanKind.INTERNAL, attrs, QuerySpan)

    def retrieve(
        self,
        query: str,
        *,
        data_source: str | None = None,
        top_k: int | None = None,
        retriever_version: str | None = None,
        name: str | None = None,
    ) -> Any:
        """Open a retriever span; yields a :class:`RetrievalSpan` (call ``set_documents``)."""
        attrs: dict[str, Any] = {
            "openinference.span.kind": "RETRIEVER",
            RETRIEVER_VERSION: retriever_version,
        }
        if self.capture_content:
            attrs["input.value"] = query
        if self.genai:
            attrs.update(
                {
                    "gen_ai.operation.name": "retrieval",
                    "gen_ai.data_source.id": data_source,
                    "gen_ai.request.top_k": top_k,
                }
            )
            if self.capture_content:
                attrs["gen_ai.retrieval.query.text"] = query
        if name is None:
            name = f"retrieval {data_source}" if self.genai and data_source else "retrieve"
        return self._span(
            name, SpanKind.CLIENT if self.genai else SpanKind.INTERNAL, attrs, RetrievalSpan
        )

    def rerank(
        self,
        query: str,
        input_documents: Sequence[DocumentLike],
        *,
        model: str | None = None,
        top_k: int | None = None,
        name: str = "rerank",
    ) -> Any:
        """Open a reranker span; yields a :class:`RerankSpan` (call ``set_output_documents``)."""
        attrs: dict[str, Any] = {
            "openinference.span.kind": "RERANKER",
            "reranker.model_name": model,
            "reranker.top_k": top_k,
        }
        if self.capture_content:
            attrs["reranker.query"] = query
        cm = self._span(name, SpanKind.INTERNAL, attrs, RerankSpan)
        docs = [_document(d) for d in input_documents]

        @contextmanager
        def _with_inputs() -> Iterator[RerankSpan]:
            with cm as h:
                _set_oi_documents(h.span, "reranker.input_documents", docs, self.capture_content)
                yield h

        return _with_inputs()

    def llm(
        self,
        model: str,
        *,
        provider: str | None = None,
        messages: Sequence[MessageLike] | None = None,
        prompt_template: str | None = None,
        template_variables: Mapping[str, Any] | None = None,
        prompt_version: str | None = None,
        invocation_parameters: Mapping[str, Any] | None = None,
        name: str | None = None,
    ) -> Any:
        """Open an LLM span; yields an :class:`LLMSpan` (call ``set_output``)."""
        attrs: dict[str, Any] = {
            "openinference.span.kind": "LLM",
            "llm.model_name": model,
            "llm.provider": provider,
            "llm.prompt_template.version": prompt_version,
            "llm.invocation_parameters": json.dumps(dict(invocation_parameters))
            if invocation_parameters
            else None,
        }
        if self.capture_content:
            attrs["llm.prompt_template.template"] = prompt_template
            if template_variables:
                attrs["llm.prompt_template.variables"] = json.dumps(
                    dict(template_variables), ensure_ascii=False, default=str
                )
        if self.genai:
            attrs.update(
                {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.request.model": model,
                    "gen_ai.provider.name": provider,
                }
            )
        if name is None:
            name = f"chat {model}" if self.genai else "llm"
        cm = self._span(name, SpanKind.CLIENT if self.genai else SpanKind.INTERNAL, attrs, LLMSpan)
        if messages is None:
            return cm

        @contextmanager
        def _with_messages() -> Iterator[LLMSpan]:
            with cm as h:
                h.set_input_messages(messages)
                yield h

        return _with_messages()

    def feedback(
        self,
        target: QuerySpan | SpanContext | tuple[str, str],
        *,
        score: float | None = None,
        label: str | None = None,
        comment: str | None = None,
    ) -> None:
        """Attach user feedback to a trace, also after it ended.

        Emits a short ``ragpulse.feedback`` span inside the target's trace (a child of the target
        span; ``target`` may be a :class:`QuerySpan`, a ``SpanContext``, or ``(trace_id_hex,
        span_id_hex)`` kept from the request). The scorer's trace assembly picks it up as a late
        span. Raises ``ValueError`` for a missing or out-of-range score.
        """
        attrs = _feedback_attrs(score, label, comment, self.capture_content)
        if isinstance(target, _Handle):
            ctx = target.span_context
        elif isinstance(target, SpanContext):
            ctx = target
        else:
            tid, sid = target
            ctx = SpanContext(
                int(tid, 16),
                int(sid, 16),
                is_remote=True,
                trace_flags=TraceFlags(TraceFlags.SAMPLED),
            )
        parent = trace.set_span_in_context(NonRecordingSpan(ctx))
        # The span kind also marks the span as RAG traffic: a collector that keeps only traces
        # with RAG spans (ragpulse's does) would otherwise drop a feedback span that arrives
        # alone, minutes after its trace.
        span_attrs = {"openinference.span.kind": "EVALUATOR", **attrs}
        with self._tracer.start_as_current_span(
            FEEDBACK_EVENT, context=parent, attributes=span_attrs
        ) as span:
            span.add_event(FEEDBACK_EVENT, attrs)
