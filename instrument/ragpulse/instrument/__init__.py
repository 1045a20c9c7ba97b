"""ragpulse.instrument: emit correct RAG spans from an app that uses no framework instrumentor.

This runs in the app, not in ragpulse's services: it imports the OpenTelemetry API and the
standard library only (no pydantic, no other ragpulse package; ``tests/test_instrument.py`` checks
it). It owns the span attribute names ragpulse defines (:mod:`.attributes`); ``ragpulse.common``
re-exports them for the services.

Everything goes through the real OpenTelemetry API, so the app's own ``TracerProvider`` (and its
OTLP exporter pointed at the ragpulse collector) carries the spans::

    from ragpulse.instrument import RagTracer

    rag = RagTracer()                                # global provider; or RagTracer(provider)
    with rag.query(question) as q:                   # CHAIN root: input.value / output.value
        with rag.retrieve(question) as r:            # RETRIEVER: retrieval.documents.<i>.document.*
            r.set_documents(store.search(question))  # strings, dicts or Document
        with rag.llm("gpt-4o-mini", provider="openai", messages=msgs) as call:   # LLM
            reply = client.chat(...)
            call.set_output(reply.text, prompt_tokens=..., completion_tokens=...)
        q.set_answer(reply.text)
    rag.feedback(q, score=0.0, label="thumbs_down")  # later, even after the trace ended

Spans follow OpenInference (``openinference.span.kind`` on every span); ``genai=True`` adds the
OTel GenAI attributes (``gen_ai.operation.name`` ``retrieval``/``chat``, ``gen_ai.retrieval.*``,
``gen_ai.input.messages``/``gen_ai.output.messages`` JSON, ``gen_ai.usage.*``) to the same spans.
``capture_content=False`` records ids, scores, models and token counts but no text (then the
scorer cannot judge those traces: it needs the question, contexts and answer).

An exception raised inside a ``with`` block is recorded on the span and sets ERROR status (the
scorer always judges such traces by default); a block that completes sets OK.

Thread-safety: a :class:`RagTracer` is stateless beyond its tracer and safe to share; the span
handles it yields belong to the thread (or task) that opened them.
"""

from __future__ import annotations

from .attributes import (
    FEEDBACK_COMMENT,
    FEEDBACK_EVENT,
    FEEDBACK_LABEL,
    FEEDBACK_SCORE,
    PROMPT_VERSION,
    RETRIEVER_VERSION,
)
from .tracer import Document, LLMSpan, QuerySpan, RagTracer, RerankSpan, RetrievalSpan

__all__ = [
    "FEEDBACK_COMMENT",
    "FEEDBACK_EVENT",
    "FEEDBACK_LABEL",
    "FEEDBACK_SCORE",
    "PROMPT_VERSION",
    "RETRIEVER_VERSION",
    "Document",
    "LLMSpan",
    "QuerySpan",
    "RagTracer",
    "RerankSpan",
    "RetrievalSpan",
]
