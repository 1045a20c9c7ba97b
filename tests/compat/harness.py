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
    ``finally`` keeps one test's instrumentation out of the next. Two OpenLLMetry 0.62.4
    instrumentors do not fully uninstrument, and what they leave behind is removed here
    (:data:`_LEFT_BEHIND`), so LlamaIndex and LangChain are as they were before the block."""
    instrumentor.instrument(tracer_provider=rec.provider)
    try:
        yield
    finally:
        instrumentor.uninstrument()
        module = type(instrumentor).__module__
        for package, cleanup in _LEFT_BEHIND.items():
            if module == package or module.startswith(package + "."):
                cleanup()


def _drop_openllmetry_llamaindex_handlers() -> None:
    """opentelemetry-instrumentation-llamaindex: ``_uninstrument`` is empty, so its handlers
    stay on LlamaIndex's root dispatcher; a second ``instrument()`` adds another pair whose
    stale span contexts leak into the thread, and every later span joins one trace."""
    from llama_index.core.instrumentation import get_dispatcher

    dispatcher = get_dispatcher()
    ours = "opentelemetry.instrumentation.llamaindex"
    dispatcher.span_handlers = [
        h for h in dispatcher.span_handlers if not type(h).__module__.startswith(ours)
    ]
    dispatcher.event_handlers = [
        h for h in dispatcher.event_handlers if not type(h).__module__.startswith(ours)
    ]


def _unwrap_openllmetry_langchain() -> None:
    """opentelemetry-instrumentation-langchain: ``_uninstrument`` calls
    ``unwrap("langchain_core.callbacks", "BaseCallbackManager.__init__")``, which looks the
    dotted name up on the module and silently finds nothing. The wrapper stays, and the next
    ``instrument()`` wraps it again; the old wrapper adds its handler first and the new one then
    sees a handler of its type and adds none, so spans go to the first test's provider."""
    from langchain_core.callbacks import BaseCallbackManager

    init = BaseCallbackManager.__dict__["__init__"]
    while hasattr(init, "__wrapped__"):
        init = init.__wrapped__
    BaseCallbackManager.__init__ = init  # type: ignore[method-assign]


_LEFT_BEHIND = {
    "opentelemetry.instrumentation.llamaindex": _drop_openllmetry_llamaindex_handlers,
    "opentelemetry.instrumentation.langchain": _unwrap_openllmetry_langchain,
}


def traces(rec: Recorder) -> dict[str, list[Span]]:
    """The finished spans as the scorer sees them: one OTLP ``ExportTraceServiceRequest`` made
    by the SDK's protobuf encoder, decoded by :class:`SpanDecoder`, grouped by trace."""
    return decode_traces(to_record(rec.finished()))


def root(spans: list[Span]) -> Span:
    return next(s for s in spans if s.parent_span_id is None)
