"""Record traces with the real OpenTelemetry SDK and turn them into the bytes a Kafka record holds.

Timestamps come from a deterministic clock (1 ms steps) so span order never depends on the host.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, Status, StatusCode

from ragpulse.scorer.traces import Span, SpanDecoder, group_by_trace

T0 = 1_763_000_000_000_000_000


class Recorder:
    """One service's TracerProvider exporting into memory, with a deterministic clock."""

    def __init__(
        self, service: str = "rag-app", env: str = "prod", clock: Iterator[int] | None = None
    ) -> None:
        self.exporter = InMemorySpanExporter()
        attrs = {"service.name": service, "deployment.environment.name": env}
        self.provider = TracerProvider(resource=Resource.create(attrs))
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = self.provider.get_tracer("tests.writer", "1.0")
        self.clock = clock or itertools.count(T0, 1_000_000)

    def now(self) -> int:
        return next(self.clock)

    @contextmanager
    def span(
        self,
        name: str,
        attrs: dict[str, Any] | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
        error: str | None = None,
        **kw: Any,
    ) -> Iterator[Any]:
        with self.tracer.start_as_current_span(
            name, kind=kind, attributes=attrs, start_time=self.now(), end_on_exit=False, **kw
        ) as s:
            yield s
            if error is not None:
                s.set_status(Status(StatusCode.ERROR, error))
        s.end(end_time=self.now())

    def event(self, span: Any, name: str, attrs: dict[str, Any]) -> None:
        span.add_event(name, attrs, timestamp=self.now())

    def finished(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())


def to_record(spans: Sequence[ReadableSpan]) -> bytes:
    """What otelcol's kafka exporter (encoding otlp_proto) and rotel put in a record value."""
    return encode_spans(spans).SerializeToString()


def decode_traces(record: bytes, decoder: SpanDecoder | None = None) -> dict[str, list[Span]]:
    return group_by_trace((decoder or SpanDecoder()).decode(record))


def one_trace(record: bytes) -> list[Span]:
    traces = decode_traces(record)
    assert len(traces) == 1, f"expected one trace, got {len(traces)}"
    return next(iter(traces.values()))
