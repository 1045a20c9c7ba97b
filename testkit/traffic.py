"""Realistic RAG traces as OTLP protobuf records, in the shapes producers put on the topic.

OpenInference spans (CHAIN root with input/output, RETRIEVER with ranked documents, LLM with
messages and model name), built directly as protobuf so tests and the benchmark are fast and
exercise the real decoder. ``otelcol_records`` makes one keyed record per trace (otelcol-contrib
``partition_traces_by_id: true``, the ragpulse collector); ``rotel_records`` packs many traces in
one unkeyed record (rotel, otelcol without partitioning).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

__all__ = ["BASE_NS", "RagTrace", "anyvalue", "encode", "make_traces", "otelcol_records",
           "rotel_records"]

# Midnight UTC yesterday, fixed for the process (rows must be replay-stable): spans must pass
# the receiver's time check (2000-01-01 to a day ahead) and rows the 90-day TTL of rag.scores (a
# fixed date stopped doing so 90 days after it; issue 17).
BASE_NS = (time.time_ns() // 86_400_000_000_000 - 1) * 86_400_000_000_000


def anyvalue(value: object) -> common_pb2.AnyValue:
    """An OTLP attribute value of any Python value (lists, dicts and bytes too)."""
    if isinstance(value, common_pb2.AnyValue):
        return value
    if isinstance(value, bool):
        return common_pb2.AnyValue(bool_value=value)
    if isinstance(value, int):
        return common_pb2.AnyValue(int_value=value)
    if isinstance(value, float):
        return common_pb2.AnyValue(double_value=value)
    if isinstance(value, bytes):
        return common_pb2.AnyValue(bytes_value=value)
    if isinstance(value, (list, tuple)):
        return common_pb2.AnyValue(
            array_value=common_pb2.ArrayValue(values=[anyvalue(x) for x in value]))
    if isinstance(value, dict):
        return common_pb2.AnyValue(kvlist_value=common_pb2.KeyValueList(
            values=[common_pb2.KeyValue(key=k, value=anyvalue(x)) for k, x in value.items()]))
    return common_pb2.AnyValue(string_value=str(value))


@dataclass(frozen=True)
class RagTrace:
    trace_id: str  # 32 hex
    service: str
    question: str
    contexts: tuple[str, ...]
    answer: str
    start_ns: int
    with_root: bool = True

    def spans(self) -> list[trace_pb2.Span]:
        tid = bytes.fromhex(self.trace_id)
        root_id, ret_id, llm_id = (_span_id(self.trace_id, n) for n in ("root", "retrieve", "llm"))
        t = self.start_ns
        root = _span(
            tid,
            root_id,
            b"",
            "rag.query",
            t,
            t + 900_000_000,
            {
                "openinference.span.kind": "CHAIN",
                "input.value": self.question,
                "output.value": self.answer,
            },
        )
        ret_attrs: dict[str, object] = {
            "openinference.span.kind": "RETRIEVER",
            "input.value": self.question,
        }
        for i, c in enumerate(self.contexts):
            ret_attrs[f"retrieval.documents.{i}.document.content"] = c
            ret_attrs[f"retrieval.documents.{i}.document.score"] = 1.0 - i / 10
        ret = _span(tid, ret_id, root_id, "retrieve", t + 10_000_000, t + 200_000_000, ret_attrs)
        llm = _span(
            tid,
            llm_id,
            root_id,
            "llm",
            t + 210_000_000,
            t + 890_000_000,
            {
                "openinference.span.kind": "LLM",
                "llm.model_name": "gpt-4o-mini",
                "llm.input_messages.0.message.role": "user",
                "llm.input_messages.0.message.content": self.question,
                "llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.content": self.answer,
                "llm.token_count.prompt": 420,
                "llm.token_count.completion": 42,
            },
        )
        return [ret, llm, root] if self.with_root else [ret, llm]


def _span_id(trace_id: str, name: str) -> bytes:
    return hashlib.blake2b(f"{trace_id}/{name}".encode(), digest_size=8).digest()


def _span(
    tid: bytes, sid: bytes, parent: bytes, name: str, start: int, end: int, attrs: dict[str, object]
) -> trace_pb2.Span:
    return trace_pb2.Span(
        trace_id=tid,
        span_id=sid,
        parent_span_id=parent,
        name=name,
        kind=trace_pb2.Span.SPAN_KIND_INTERNAL,
        start_time_unix_nano=start,
        end_time_unix_nano=end,
        attributes=[common_pb2.KeyValue(key=k, value=anyvalue(v)) for k, v in attrs.items()],
    )


def make_traces(
    count: int,
    *,
    seed: int = 0,
    services: Sequence[str] = ("support-bot", "docs-qa"),
    unscorable_every: int = 0,
) -> list[RagTrace]:
    """``count`` distinct traces; every ``unscorable_every``-th has no contexts (0: none)."""
    out = []
    for i in range(count):
        tid = f"{seed:08x}{i + 1:024x}"
        contexts: tuple[str, ...] = (
            f"Document {i}: the warranty covers parts for {i % 5 + 1} years.",
            f"Document {i}b: returns are accepted within 30 days of delivery.",
        )
        if unscorable_every and i % unscorable_every == unscorable_every - 1:
            contexts = ()
        out.append(
            RagTrace(
                tid,
                services[i % len(services)],
                f"How long is warranty #{i}?",
                contexts,
                f"The warranty covers parts for {i % 5 + 1} years.",
                BASE_NS + i * 1_000_000,
            )
        )
    return out


def encode(groups: Iterable[tuple[str, Sequence[trace_pb2.Span]]]) -> bytes:
    """One ExportTraceServiceRequest: a ResourceSpans per (service, spans) group."""
    req = ExportTraceServiceRequest()
    for service, spans in groups:
        rs = req.resource_spans.add()
        rs.resource.attributes.append(common_pb2.KeyValue(key="service.name", value=anyvalue(service)))
        rs.resource.attributes.append(
            common_pb2.KeyValue(key="deployment.environment.name", value=anyvalue("prod"))
        )
        ss = rs.scope_spans.add()
        ss.scope.name = "openinference.instrumentation.test"
        ss.spans.extend(spans)
    return req.SerializeToString()


def otelcol_records(traces: Sequence[RagTrace]) -> list[tuple[bytes, bytes]]:
    """(key, value) per trace, key = trace id as 32 lowercase hex characters."""
    return [(t.trace_id.encode(), encode([(t.service, t.spans())])) for t in traces]


def rotel_records(traces: Sequence[RagTrace], per_record: int = 10) -> list[tuple[None, bytes]]:
    """Unkeyed records, each holding the spans of ``per_record`` traces."""
    out: list[tuple[None, bytes]] = []
    for i in range(0, len(traces), per_record):
        chunk = traces[i : i + per_record]
        out.append((None, encode([(t.service, t.spans()) for t in chunk])))
    return out
