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
        uninstrument(instrumentor)


def uninstrument(instrumentor: Any) -> None:
    """``instrumentor.uninstrument()``, then remove what it is known to leave behind."""
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
    """opentelemetry-instrumentation-langchain (and OpenLIT 1.45's LangChain instrumentor, which
    copied the approach): ``_uninstrument`` calls
    ``unwrap("langchain_core.callbacks", "BaseCallbackManager.__init__")``, which looks the
    dotted name up on the module and silently finds nothing. The wrapper stays, and the next
    ``instrument()`` wraps it again; the old wrapper adds its handler first and the new one then
    sees a handler of its type and adds none, so spans go to the first test's provider."""
    from langchain_core.callbacks import BaseCallbackManager

    init = BaseCallbackManager.__dict__["__init__"]
    while hasattr(init, "__wrapped__"):
        init = init.__wrapped__
    BaseCallbackManager.__init__ = init  # type: ignore[method-assign]


def _unwrap_openai_resources(package: str) -> None:
    """OpenLLMetry's openai instrumentor 0.62.4 (``unwrap`` with dotted names again) and
    OpenLIT 1.45's (no ``_uninstrument`` for most methods) leave their ``wrapt`` wrappers on
    the ``openai.resources`` classes; the next test's spans then start inside a stale span of
    the first test's provider. Peel off every wrapper whose wrapper function is ``package``'s."""
    import importlib
    import pkgutil

    import openai.resources

    def ours(attr: Any) -> bool:
        wrapper = getattr(attr, "_self_wrapper", None)
        module = getattr(wrapper, "__module__", None) or type(wrapper).__module__
        return wrapper is not None and (module == package or module.startswith(package + "."))

    for info in pkgutil.walk_packages(openai.resources.__path__, "openai.resources."):
        module = importlib.import_module(info.name)
        for cls in [c for c in vars(module).values()
                    if isinstance(c, type) and c.__module__ == module.__name__]:
            for name, attr in list(vars(cls).items()):
                while ours(attr):
                    attr = attr.__wrapped__
                    setattr(cls, name, attr)


_LEFT_BEHIND = {
    "opentelemetry.instrumentation.llamaindex": _drop_openllmetry_llamaindex_handlers,
    "opentelemetry.instrumentation.langchain": _unwrap_openllmetry_langchain,
    "openlit.instrumentation.langchain": _unwrap_openllmetry_langchain,
    "opentelemetry.instrumentation.openai": lambda: _unwrap_openai_resources(
        "opentelemetry.instrumentation.openai"),
    "openlit.instrumentation.openai": lambda: _unwrap_openai_resources(
        "openlit.instrumentation.openai"),
}


def traces(rec: Recorder) -> dict[str, list[Span]]:
    """The finished spans as the scorer sees them: one OTLP ``ExportTraceServiceRequest`` made
    by the SDK's protobuf encoder, decoded by :class:`SpanDecoder`, grouped by trace."""
    return decode_traces(to_record(rec.finished()))


def root(spans: list[Span]) -> Span:
    return next(s for s in spans if s.parent_span_id is None)
