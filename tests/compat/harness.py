"""Instrumenting a framework for one test, and reading what it emitted the way the scorer does."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ragpulse.scorer.traces import Span
from tests.scorer.traces.sdk import Recorder, decode_traces, to_record


@contextmanager
def instrumented(instrumentor: Any, rec: Recorder) -> Iterator[None]:
    """``instrumentor`` active for ``rec``'s provider inside the block, removed after it.

    Instrumentors are process-wide singletons (``BaseInstrumentor``): uninstrumenting in
    ``finally`` keeps one test's instrumentation out of the next. OpenLLMetry's LlamaIndex
    instrumentor (0.62.4) cannot uninstrument (its ``_uninstrument`` is empty): its handlers
    stay on LlamaIndex's root dispatcher, and a second ``instrument()`` adds another pair whose
    stale span contexts leak into the thread, so every later span joins one trace. They are
    taken off the dispatcher here, which leaves LlamaIndex as it was before the block."""
    instrumentor.instrument(tracer_provider=rec.provider)
    try:
        yield
    finally:
        instrumentor.uninstrument()
        if type(instrumentor).__module__.startswith("opentelemetry.instrumentation.llamaindex"):
            _drop_openllmetry_llamaindex_handlers()


def _drop_openllmetry_llamaindex_handlers() -> None:
    from llama_index.core.instrumentation import get_dispatcher

    dispatcher = get_dispatcher()
    ours = "opentelemetry.instrumentation.llamaindex"
    dispatcher.span_handlers = [
        h for h in dispatcher.span_handlers if not type(h).__module__.startswith(ours)
    ]
    dispatcher.event_handlers = [
        h for h in dispatcher.event_handlers if not type(h).__module__.startswith(ours)
    ]


def traces(rec: Recorder) -> dict[str, list[Span]]:
    """The finished spans as the scorer sees them: one OTLP ``ExportTraceServiceRequest`` made
    by the SDK's protobuf encoder, decoded by :class:`SpanDecoder`, grouped by trace."""
    return decode_traces(to_record(rec.finished()))


def root(spans: list[Span]) -> Span:
    return next(s for s in spans if s.parent_span_id is None)
