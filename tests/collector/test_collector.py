"""The collector end to end on real parts: OpenTelemetry SDK exporters and plain HTTP clients →
collector → tansu → a kafka-python consumer."""

from __future__ import annotations

import base64
import gzip
import http.client
import json
import os
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import grpc
import pytest
from google.protobuf import json_format
from google.rpc import code_pb2, error_details_pb2, status_pb2
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
    OTLPSpanExporter as GrpcSpanExporter,
)
from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
    OTLPSpanExporter as HttpSpanExporter,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from ragpulse.collector.service import Collector, build_collector
from ragpulse.common import partition_for_key
from testkit.payloads import T0, rag_request
from tests.collector.conftest import collector_settings, read_records

Post = Callable[..., tuple[int, dict[str, str], bytes]]


def post(collector: Collector, body: bytes, content_type: str = "application/x-protobuf",
         headers: dict[str, str] | None = None, path: str = "/v1/traces") -> tuple[int, dict[str, str], bytes]:
    url = urlsplit(collector.http_endpoint or "")
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    try:
        conn.request("POST", path, body=body, headers={"Content-Type": content_type, **(headers or {})})
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def traces_of(request: ExportTraceServiceRequest) -> dict[str, dict[bytes, tuple[Any, Any, Any]]]:
    """trace hex → span id → (resource, scope, span) messages."""
    out: dict[str, dict[bytes, tuple[Any, Any, Any]]] = {}
    for rs in request.resource_spans:
        for ss in rs.scope_spans:
            for span in ss.spans:
                out.setdefault(span.trace_id.hex(), {})[span.span_id] = (rs.resource, ss.scope, span)
    return out


def check_records(records: list[Any], sent: ExportTraceServiceRequest) -> None:
    """One record per trace, keyed by its 32-hex trace id, holding exactly the sent spans."""
    expected = traces_of(sent)
    got: dict[str, dict[bytes, tuple[Any, Any, Any]]] = {}
    for record in records:
        key = record.key.decode()
        assert len(key) == 32 and key == key.lower()
        value = traces_of(ExportTraceServiceRequest.FromString(record.value))
        assert list(value) == [key], "one trace per record, matching the key"
        assert key not in got, "a trace sent in one request becomes one record"
        got[key] = value[key]
    assert got == expected


def _rag_app(provider: TracerProvider, n: int) -> None:
    """n RAG requests (HTTP root + OpenInference retriever and LLM) and one health check."""
    tracer = provider.get_tracer("openinference.instrumentation.langchain", "0.1.28")
    web = provider.get_tracer("opentelemetry.instrumentation.fastapi", "0.48b0")
    for i in range(n):
        with web.start_as_current_span("POST /ask", kind=SpanKind.SERVER, attributes={"http.request.method": "POST"}):
            with tracer.start_as_current_span("retrieve", attributes={
                "openinference.span.kind": "RETRIEVER", "input.value": f"question {i}?",
                "retrieval.documents.0.document.content": "東京の配送は翌日です。",
            }):
                pass
            with tracer.start_as_current_span("ChatOpenAI", attributes={
                "openinference.span.kind": "LLM", "llm.model_name": "gpt-4o-mini",
                "llm.output_messages.0.message.content": f"answer {i}",
            }):
                pass
    with web.start_as_current_span("GET /health", kind=SpanKind.SERVER):
        pass


@pytest.mark.parametrize(
    ("protocol", "batch", "gzip_"),
    [("http", False, False), ("grpc", False, False), ("http", True, True), ("grpc", True, True)],
)
def test_sdk_exporter_to_kafka(make_collector: Callable[..., Collector], protocol: str, batch: bool, gzip_: bool) -> None:
    from opentelemetry.exporter.otlp.proto.grpc.exporter import Compression as GrpcCompression
    from opentelemetry.exporter.otlp.proto.http import Compression as HttpCompression
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    collector = make_collector()
    if protocol == "http":
        exporter: Any = HttpSpanExporter(
            endpoint=collector.http_endpoint, timeout=10,
            compression=HttpCompression.Gzip if gzip_ else HttpCompression.NoCompression,
        )
    else:
        exporter = GrpcSpanExporter(
            endpoint=collector.grpc_endpoint, insecure=True, timeout=10,
            compression=GrpcCompression.Gzip if gzip_ else GrpcCompression.NoCompression,
        )
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "rag-api", "deployment.environment.name": "test"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    # SimpleSpanProcessor: one export per finished span, so each trace's root span arrives in a
    # later request than its RAG spans and is kept through the recent-trace LRU.
    # BatchSpanProcessor: every span in one request, split into one record per trace.
    provider.add_span_processor(
        BatchSpanProcessor(exporter, schedule_delay_millis=60_000) if batch else SimpleSpanProcessor(exporter)
    )
    _rag_app(provider, 3)
    provider.shutdown()

    sent = encode_spans(memory.get_finished_spans())
    rag_sent = ExportTraceServiceRequest()
    rag_sent.CopyFrom(sent)
    for rs in rag_sent.resource_spans:  # what the filter must keep: all but the health check
        for ss in rs.scope_spans:
            keep = [s for s in ss.spans if s.name != "GET /health"]
            del ss.spans[:]
            ss.spans.extend(keep)
    expected_records = 3 if batch else 9
    records = read_records(collector.settings.kafka, expected=expected_records)
    assert len(records) == expected_records
    if batch:
        check_records(records, rag_sent)
    merged: dict[str, dict[bytes, Any]] = {}
    for r in records:
        for key, spans in traces_of(ExportTraceServiceRequest.FromString(r.value)).items():
            assert key == r.key.decode()
            merged.setdefault(key, {}).update(spans)
    assert merged == traces_of(rag_sent)
    stats = collector.stats()
    assert stats["spans_received"] == 10 and stats["spans_accepted"] == 9
    assert stats["spans_dropped_non_rag"] == 1 and stats["traces_dropped_non_rag"] == 1
    assert stats[f"{protocol}_requests"] == (1 if batch else 10)


def test_one_request_many_traces_split_per_trace(make_collector: Callable[..., Collector]) -> None:
    collector = make_collector()
    request = rag_request(12, seed=5)
    status, _, body = post(collector, request.SerializeToString())
    assert status == 200 and ExportTraceServiceResponse.FromString(body) == ExportTraceServiceResponse()
    records = read_records(collector.settings.kafka, expected=12)
    check_records(records, request)
    # Same partition as otelcol's kafka exporter would pick (sarama-compatible FNV-1a).
    assert all(r.partition == partition_for_key(r.key, 3) for r in records)


def test_records_are_lz4_compressed(make_collector: Callable[..., Collector]) -> None:
    from kafka import KafkaConsumer, TopicPartition
    from kafka.record import MemoryRecords

    collector = make_collector(producer={"partitions": 1})
    assert post(collector, rag_request(4, seed=2).SerializeToString())[0] == 200
    read_records(collector.settings.kafka, expected=4)
    # Read the raw record batches the broker stores and check their codec attribute.
    consumer = KafkaConsumer(**collector.settings.kafka.client_kwargs(), enable_auto_commit=False)
    try:
        tp = TopicPartition(collector.settings.kafka.topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        raw: list[bytes] = []
        fetcher = consumer._fetcher
        original = MemoryRecords.__init__

        def capture(self: Any, buffer: bytes) -> None:
            raw.append(bytes(buffer))
            original(self, buffer)

        MemoryRecords.__init__ = capture  # type: ignore[method-assign]
        try:
            deadline = time.monotonic() + 10
            while not raw and time.monotonic() < deadline:
                consumer.poll(timeout_ms=300)
        finally:
            MemoryRecords.__init__ = original  # type: ignore[method-assign]
        assert fetcher is not None and raw
        codecs = set()
        for buffer in raw:
            records = MemoryRecords(buffer)
            while (batch := records.next_batch()) is not None:
                codecs.add(batch.compression_type)
        assert codecs == {3}  # 3 = lz4 in the Kafka record batch attributes
    finally:
        consumer.close()


def _otlp_json(trace_hex: str, span_hex: str) -> dict[str, Any]:
    return {
        "resourceSpans": [{
            "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "rag-json"}}]},
            "scopeSpans": [{
                "scope": {"name": "manual"},
                "spans": [{
                    "traceId": trace_hex, "spanId": span_hex, "parentSpanId": "",
                    "name": "retrieve", "kind": 3,
                    "startTimeUnixNano": str(T0), "endTimeUnixNano": str(T0 + 100_000_000),
                    "attributes": [
                        {"key": "gen_ai.operation.name", "value": {"stringValue": "retrieval"}},
                        {"key": "gen_ai.request.top_k", "value": {"intValue": "5"}},
                    ],
                    "events": [{"timeUnixNano": str(T0 + 50_000_000), "name": "db.query.result",
                                "attributes": [{"key": "db.query.result.id", "value": {"stringValue": "d1"}}]}],
                    "links": [{"traceId": "0af7651916cd43dd8448eb211c80319c", "spanId": "b7ad6b7169203331"}],
                    "unknownFieldFromTheFuture": {"ignored": True},
                }],
            }],
        }]
    }


def test_json_and_gzip_requests(make_collector: Callable[..., Collector]) -> None:
    collector = make_collector()
    trace_hex, span_hex = "5b8efff798038103d269b633813fc60c", "eee19b7ec3c1b174"
    status, headers, body = post(collector, json.dumps(_otlp_json(trace_hex, span_hex)).encode(), "application/json")
    assert status == 200 and headers["content-type"] == "application/json" and json.loads(body) == {}

    gz_request = rag_request(3, seed=11)
    # Two gzip members and zero padding (common.inflate_bounded): the members' bytes are joined.
    raw = gz_request.SerializeToString()
    members = gzip.compress(raw[:100]) + gzip.compress(raw[100:]) + b"\x00" * 16
    status, _, _ = post(collector, members, headers={"Content-Encoding": "gzip"})
    assert status == 200

    records = read_records(collector.settings.kafka, expected=4)
    by_key = {r.key.decode(): ExportTraceServiceRequest.FromString(r.value) for r in records}
    assert set(by_key) == {trace_hex} | {t for t in traces_of(gz_request)}
    span = by_key.pop(trace_hex).resource_spans[0].scope_spans[0].spans[0]
    assert span.trace_id.hex() == trace_hex and span.span_id.hex() == span_hex
    assert span.links[0].trace_id.hex() == "0af7651916cd43dd8448eb211c80319c"
    assert span.attributes[1].value.int_value == 5 and span.events[0].name == "db.query.result"
    check_records([r for r in records if r.key.decode() != trace_hex], gz_request)


def test_responses_carry_the_current_date(make_collector: Callable[..., Collector]) -> None:
    """The Date header is formatted once a second (GuardedRequestHandler.date_time_string) and
    stays current: RFC 9110's IMF-fixdate, within a second or two of the clock."""
    import email.utils
    import time

    collector = make_collector()
    for _ in range(2):
        status, headers, _ = post(collector, rag_request(1, seed=5).SerializeToString())
        date = email.utils.parsedate_to_datetime(headers["date"])
        assert status == 200 and headers["date"].endswith(" GMT") and abs(date.timestamp() - time.time()) < 3
        time.sleep(1.1)


def test_malformed_requests_get_400_and_are_counted(make_collector: Callable[..., Collector]) -> None:
    collector = make_collector()
    status, headers, body = post(collector, b"\x0a\xff\xff\xff\x0fgarbage")
    assert status == 400 and headers["content-type"] == "application/x-protobuf"
    assert status_pb2.Status.FromString(body).code == code_pb2.INVALID_ARGUMENT
    status, headers, body = post(collector, b'{"resourceSpans": [', "application/json")
    assert status == 400 and json.loads(body)["code"] == code_pb2.INVALID_ARGUMENT
    bad_id = _otlp_json("not-hex-at-all", "eee19b7ec3c1b174")
    assert post(collector, json.dumps(bad_id).encode(), "application/json")[0] == 400
    assert post(collector, b"not gzip", headers={"Content-Encoding": "gzip"})[0] == 400
    zipped = gzip.compress(rag_request(1).SerializeToString())
    assert post(collector, zipped[:-4], headers={"Content-Encoding": "gzip"})[0] == 400  # truncated
    assert post(collector, zipped + b"junk", headers={"Content-Encoding": "gzip"})[0] == 400
    assert collector.stats()["requests_malformed"] == 6
    assert collector.stats()["spans_accepted"] == 0


def test_partial_success_for_spans_without_trace_id(make_collector: Callable[..., Collector]) -> None:
    collector = make_collector()
    request = rag_request(2, seed=4)
    bad = request.resource_spans[0].scope_spans[1].spans.add()
    bad.CopyFrom(request.resource_spans[0].scope_spans[1].spans[0])
    bad.trace_id = bytes(16)
    status, _, body = post(collector, request.SerializeToString())
    response = ExportTraceServiceResponse.FromString(body)
    assert status == 200 and response.partial_success.rejected_spans == 1
    assert "trace_id" in response.partial_success.error_message
    assert collector.stats()["spans_rejected"] == 1


# The attacks of issue 17: each was acknowledged with a plain 200 and then lost downstream (the
# TTL dropped the rows, or the scorer dead-lettered the trace).
_HOSTILE_SPANS = [
    ("start_time_unix_nano", {"start_time_unix_nano": 0}),
    ("start_time_unix_nano", {"start_time_unix_nano": 1}),
    ("start_time_unix_nano", {"start_time_unix_nano": 2**63}),
    ("start_time_unix_nano", {"start_time_unix_nano": 2**64 - 1}),
    ("span_id", {"span_id": b""}),
    ("span_id", {"span_id": b"\x01" * 7}),
    ("span_id", {"span_id": b"\x01" * 9}),
    ("span_id", {"span_id": b"\x01" * 100}),
    ("parent_span_id", {"parent_span_id": b"\x01" * 9}),
    ("end_time_unix_nano", {"end_time_unix_nano": 2**64 - 1}),
]


def _hostile_request(seed: int) -> tuple[ExportTraceServiceRequest, set[str]]:
    """One good RAG trace plus one single-span trace per hostile case; the good trace's ids."""
    request = rag_request(1, seed=seed, services=1)
    good = set(traces_of(request))
    template = request.resource_spans[0].scope_spans[1].spans[0]
    for i, (_, fields) in enumerate(_HOSTILE_SPANS):
        bad = request.resource_spans[0].scope_spans[1].spans.add()
        bad.CopyFrom(template)
        bad.trace_id = bytes([seed, i + 1]) * 8
        for name, value in fields.items():
            setattr(bad, name, value)
    return request, good


def _json_of(request: ExportTraceServiceRequest) -> bytes:
    doc = json_format.MessageToDict(request)
    for rs in doc["resourceSpans"]:
        for ss in rs.get("scopeSpans", []):
            for span in ss.get("spans", []):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64decode(span[key]).hex()
    return json.dumps(doc).encode()


def test_bad_span_ids_and_implausible_start_times_get_a_partial_success_naming_the_field(
        make_collector: Callable[..., Collector]) -> None:
    collector = make_collector()
    fields = {name for name, _ in _HOSTILE_SPANS}
    n = len(_HOSTILE_SPANS)
    delivered: set[str] = set()

    def check(response: ExportTraceServiceResponse) -> None:
        assert response.partial_success.rejected_spans == n
        message = response.partial_success.error_message
        assert all(name in message for name in fields), message
        assert "4 span(s) with an implausible start_time_unix_nano" in message

    request, good = _hostile_request(1)
    status, _, body = post(collector, request.SerializeToString())
    assert status == 200
    check(ExportTraceServiceResponse.FromString(body))
    delivered |= good

    request, good = _hostile_request(2)
    status, _, body = post(collector, _json_of(request), "application/json")
    assert status == 200
    response = ExportTraceServiceResponse()
    json_format.Parse(body, response)
    check(response)
    delivered |= good

    request, good = _hostile_request(3)
    with grpc.insecure_channel(collector.grpc_endpoint or "") as channel:
        export = channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export")
        check(ExportTraceServiceResponse.FromString(export(request.SerializeToString(), timeout=10)))
    delivered |= good

    assert collector.stats()["spans_rejected"] == 3 * n
    records = read_records(collector.settings.kafka, expected=3)
    assert {r.key.decode() for r in records} == delivered  # only the good traces, whole


def test_spans_older_than_the_retention_get_a_partial_success(
        make_collector: Callable[..., Collector]) -> None:
    """Issue 38, item 13: a span started between 2000-01-01 and 90 days ago got a plain 200, and
    the scores table's TTL deleted its rows on insert (counted rows_expired, far from the
    client). Now it is rejected alone, as the other implausible spans: partial success naming
    the retention, over HTTP protobuf, HTTP JSON and gRPC, counted; a span just inside the
    retention, and the trace's other spans, are delivered."""
    collector = make_collector()
    assert collector.settings.otlp.max_span_age_days == 90
    day = 86_400 * 10**9
    now = time.time_ns()
    old_starts = [946_684_800 * 10**9, now - 91 * day, now - 365 * day]  # 2000-01-01, 91 days, a year

    def request(seed: int) -> tuple[ExportTraceServiceRequest, set[str]]:
        req = rag_request(1, seed=seed, services=1)
        good = set(traces_of(req))
        template = req.resource_spans[0].scope_spans[1].spans[0]
        for i, start in enumerate([*old_starts, now - 89 * day]):
            span = req.resource_spans[0].scope_spans[1].spans.add()
            span.CopyFrom(template)
            span.trace_id = bytes([seed, i + 1]) * 8
            span.start_time_unix_nano, span.end_time_unix_nano = start, start + 10**9
        good.add((bytes([seed, 4]) * 8).hex())  # 89 days old: kept
        return req, good

    def check(response: ExportTraceServiceResponse) -> None:
        assert response.partial_success.rejected_spans == len(old_starts)
        assert "3 span(s) with a start_time_unix_nano older than the retention" in \
            response.partial_success.error_message

    delivered: set[str] = set()
    req, good = request(1)
    status, _, body = post(collector, req.SerializeToString())
    assert status == 200
    check(ExportTraceServiceResponse.FromString(body))
    delivered |= good
    req, good = request(2)
    status, _, body = post(collector, _json_of(req), "application/json")
    assert status == 200
    check(json_format.Parse(body, ExportTraceServiceResponse()))
    delivered |= good
    req, good = request(3)
    with grpc.insecure_channel(collector.grpc_endpoint or "") as channel:
        export = channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export")
        check(ExportTraceServiceResponse.FromString(export(req.SerializeToString(), timeout=10)))
    delivered |= good

    stats = collector.stats()
    assert stats["spans_rejected"] == stats["spans_rejected_retention"] == 3 * len(old_starts)
    records = read_records(collector.settings.kafka, expected=len(delivered))
    assert {r.key.decode() for r in records} == delivered


def test_size_limits_give_413(make_collector: Callable[..., Collector]) -> None:
    collector = make_collector(otlp={"max_body_bytes": 64 * 1024, "max_decompressed_bytes": 256 * 1024})
    status, _, body = post(collector, b"\x00" * (64 * 1024 + 1))
    assert status == 413 and status_pb2.Status.FromString(body).code == code_pb2.RESOURCE_EXHAUSTED
    bomb = gzip.compress(b"\x00" * (50 * 1024 * 1024))  # 50 MiB of zeros in ~50 KiB
    assert len(bomb) < 64 * 1024
    status, _, _ = post(collector, bomb, headers={"Content-Encoding": "gzip"})
    assert status == 413
    assert collector.stats()["http_too_large"] == 2
    # The connection-level limit leaves the collector healthy.
    assert post(collector, rag_request(1).SerializeToString())[0] == 200


def test_wrong_content_type_or_encoding_gives_415(make_collector: Callable[..., Collector]) -> None:
    collector = make_collector()
    assert post(collector, b"x", "text/plain")[0] == 415
    assert post(collector, b"x", headers={"Content-Encoding": "br"})[0] == 415
    assert post(collector, b"x", path="/v1/metrics")[0] == 404
    assert collector.stats()["http_unsupported"] == 2


def test_full_queue_gives_429_and_resource_exhausted(make_collector: Callable[..., Collector]) -> None:
    # A long linger keeps the first request's records queued (unacknowledged) while the second
    # arrives; the queue holds exactly one request's spans.
    first = rag_request(3, seed=1)
    spans = sum(len(ss.spans) for rs in first.resource_spans for ss in rs.scope_spans)
    collector = make_collector(
        queue={"max_spans": spans}, producer={"linger_ms": 10_000, "delivery_timeout_ms": 60_000}
    )
    assert post(collector, first.SerializeToString())[0] == 200
    status, headers, body = post(collector, rag_request(1, seed=2).SerializeToString())
    assert status == 429 and headers["retry-after"] == "2"
    assert status_pb2.Status.FromString(body).code == code_pb2.RESOURCE_EXHAUSTED

    with grpc.insecure_channel(collector.grpc_endpoint or "") as channel:
        export = channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export")
        with pytest.raises(grpc.RpcError) as info:
            export(rag_request(1, seed=3).SerializeToString(), timeout=10)
    assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert _retry_delay(info.value) == 2
    stats = collector.stats()
    assert stats["queue_spans"] == spans and stats["spans_refused_queue_full"] == 14
    # Shutdown flushes the lingering request: nothing accepted is lost.
    collector.shutdown()
    check_records(read_records(collector.settings.kafka, expected=3), first)


def _retry_delay(error: grpc.RpcError) -> int:
    for key, value in error.trailing_metadata() or ():  # type: ignore[attr-defined]
        if key == "grpc-status-details-bin":
            for detail in status_pb2.Status.FromString(value).details:
                info = error_details_pb2.RetryInfo()
                if detail.Unpack(info):
                    return info.retry_delay.seconds
    return -1


def test_concurrent_grpc_exports_over_the_limit_are_refused_with_retry_info(
        make_collector: Callable[..., Collector]) -> None:
    # Issue 17: grpcio's own concurrency refusal is a bare RESOURCE_EXHAUSTED, which OTLP
    # exporters (Go SDK, otelcol) treat as permanent and drop. With confirm=ack and a long
    # linger, the two admitted calls hold their slots while the other 198 arrive.
    collector = make_collector(
        otlp={"grpc_workers": 1},
        producer={"confirm": "ack", "linger_ms": 2_500, "delivery_timeout_ms": 60_000,
                  "ack_timeout_s": 30},
    )
    requests = [rag_request(1, seed=1000 + i, services=1) for i in range(200)]
    with grpc.insecure_channel(collector.grpc_endpoint or "") as channel:
        export = channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export")
        calls = [export.future(r.SerializeToString(), timeout=60) for r in requests]
        outcomes = []
        for call in calls:
            try:
                call.result()
                outcomes.append((grpc.StatusCode.OK, 0))
            except grpc.RpcError as error:
                outcomes.append((error.code(), _retry_delay(error)))
        # An admitted call whose client gives up while it waits for the handler thread still
        # gives its slot back: afterwards both slots admit calls again.
        extra = [rag_request(1, seed=2000 + i, services=1) for i in range(4)]
        running = export.future(extra[0].SerializeToString(), timeout=60)  # holds the thread
        waiting = export.future(extra[1].SerializeToString(), timeout=0.5)
        with pytest.raises(grpc.RpcError) as gave_up:
            waiting.result()
        assert gave_up.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        running.result()
        again = [export.future(r.SerializeToString(), timeout=60) for r in extra[2:]]
        for call in again:
            call.result()  # neither refused: no slot was lost
    ok = [i for i, (code, _) in enumerate(outcomes) if code == grpc.StatusCode.OK]
    refused = [o for o in outcomes if o[0] != grpc.StatusCode.OK]
    assert refused, "the limit (2 calls) was never reached"
    assert set(refused) == {(grpc.StatusCode.RESOURCE_EXHAUSTED, 2)}  # every one with RetryInfo
    assert len(ok) >= 2
    stats = collector.stats()
    assert stats["grpc_refused_busy"] == len(refused) and stats["grpc_requests"] in (203, 204)
    sent = {next(iter(traces_of(requests[i]))) for i in ok}
    sent |= {next(iter(traces_of(r))) for r in (extra[0], *extra[2:])}
    records = read_records(collector.settings.kafka, expected=len(sent))
    # What was refused was not taken; the call given up on may or may not have been.
    assert {r.key.decode() for r in records} - {next(iter(traces_of(extra[1])))} == sent


def test_kafka_down_gives_503_and_unavailable(kafka_broker: Any) -> None:
    settings = collector_settings(
        kafka_broker.bootstrap, "spans_down",
        producer={"confirm": "ack", "delivery_timeout_ms": 2_000, "linger_ms": 0, "ack_timeout_s": 10},
    )
    collector = build_collector(settings).start()
    try:
        assert post(collector, rag_request(1).SerializeToString())[0] == 200
        kafka_broker.shutdown()
        status, headers, _ = post(collector, rag_request(2, seed=1).SerializeToString())
        assert status == 503 and headers["retry-after"] == "2"
        with grpc.insecure_channel(collector.grpc_endpoint or "") as channel:
            export = channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export")
            with pytest.raises(grpc.RpcError) as info:
                export(rag_request(1, seed=3).SerializeToString(), timeout=10)
        assert info.value.code() == grpc.StatusCode.UNAVAILABLE and _retry_delay(info.value) == 2
        stats = collector.stats()
        # Refused before producing (the client saw all brokers down) or produced and failed.
        assert stats["kafka_unavailable"] == 1
        assert stats["spans_failed"] + stats["spans_refused_unavailable"] > 0
    finally:
        collector.shutdown(drain_timeout_s=1.0)


def test_non_rag_traces_dropped_or_kept_with_pass_all(make_collector: Callable[..., Collector]) -> None:
    request = rag_request(10, seed=8, plain_every=2)  # 5 RAG traces, 5 plain ones
    rag_only = make_collector()
    assert post(rag_only, request.SerializeToString())[0] == 200
    records = read_records(rag_only.settings.kafka, expected=5)
    assert len(records) == 5
    stats = rag_only.stats()
    assert stats["traces_dropped_non_rag"] == 5 and stats["spans_dropped_non_rag"] == 15

    everything = make_collector(filter={"mode": "all"})
    assert post(everything, request.SerializeToString())[0] == 200
    check_records(read_records(everything.settings.kafka, expected=10), request)
    assert everything.stats()["traces_dropped_non_rag"] == 0


def test_late_root_span_kept_early_plain_span_dropped(make_collector: Callable[..., Collector]) -> None:
    collector = make_collector()
    request = rag_request(2, seed=6, services=1)
    web, rag = request.resource_spans[0].scope_spans
    roots = ExportTraceServiceRequest()
    roots.resource_spans.add().CopyFrom(request.resource_spans[0])
    del roots.resource_spans[0].scope_spans[1]
    first_rag_only = ExportTraceServiceRequest()
    first_rag_only.resource_spans.add().CopyFrom(request.resource_spans[0])
    del first_rag_only.resource_spans[0].scope_spans[0]
    trace_a = rag.spans[0].trace_id
    kept = [s for s in first_rag_only.resource_spans[0].scope_spans[0].spans if s.trace_id == trace_a]
    del first_rag_only.resource_spans[0].scope_spans[0].spans[:]
    first_rag_only.resource_spans[0].scope_spans[0].spans.extend(kept)
    assert post(collector, first_rag_only.SerializeToString())[0] == 200  # trace A's RAG spans
    assert post(collector, roots.SerializeToString())[0] == 200  # roots of A (late) and B (early)
    records = read_records(collector.settings.kafka, expected=2)
    assert {r.key for r in records} == {trace_a.hex().encode()}
    assert sum(len(ExportTraceServiceRequest.FromString(r.value).resource_spans[0].scope_spans[0].spans)
               for r in records) == 5 + 2
    assert collector.stats()["traces_dropped_non_rag"] == 1
    assert len(web.spans) == 4


def test_start_then_shutdown_twice(kafka_broker: Any) -> None:
    settings = collector_settings(kafka_broker.bootstrap, "spans_lifecycle")
    never_started = build_collector(settings)
    never_started.shutdown()
    never_started.shutdown()
    with pytest.raises(RuntimeError):
        never_started.start()

    collector = build_collector(settings).start()
    from ragpulse.collector.telemetry import COUNTERS

    assert set(collector.stats()) == set(COUNTERS)  # every counter is declared and documented
    endpoint = collector.http_endpoint
    assert endpoint and collector.grpc_endpoint
    collector.shutdown()
    collector.shutdown()
    assert collector.http_endpoint is None
    with pytest.raises(OSError):  # the port is closed: nothing listens any more
        url = urlsplit(endpoint)
        http.client.HTTPConnection(url.hostname, url.port, timeout=2).request("POST", "/v1/traces", body=b"")


def test_settings_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from pydantic import ValidationError

    from ragpulse.collector.config import CollectorSettings

    monkeypatch.setenv("RAGPULSE_KAFKA__BOOTSTRAP_SERVERS", "kafka-1:9092,kafka-2:9092")
    monkeypatch.setenv("RAGPULSE_OTLP__HTTP_PORT", "14318")
    monkeypatch.setenv("RAGPULSE_FILTER__MODE", "all")
    settings = CollectorSettings()
    assert settings.kafka.servers == ["kafka-1:9092", "kafka-2:9092"]
    assert settings.otlp.http_port == 14318 and settings.filter.mode == "all"
    monkeypatch.setenv("RAGPULSE_QUEUE__MAX_SPANS", "-1")
    with pytest.raises(ValidationError, match="max_spans"):
        CollectorSettings()


def test_a_trace_over_the_record_limit_is_cut_to_fit_not_dropped(
        make_collector: Callable[..., Collector]) -> None:
    """Issue 10: one huge retrieved document used to drop the whole trace (no scores at all).
    Now its longest values are cut to fit, with a marker, and the trace is delivered and
    counted; only a trace that cannot fit even so is refused (partial success)."""
    from opentelemetry.proto.trace.v1.trace_pb2 import Span

    from ragpulse.collector.shrink import MARKER

    collector = make_collector(producer={"max_request_size": 16_384})
    request = rag_request(3, seed=12)
    huge = request.resource_spans[0].scope_spans[1].spans[0]
    huge.attributes.add(key="output.value").value.string_value = "x" * 20_000
    status, _, body = post(collector, request.SerializeToString())
    response = ExportTraceServiceResponse.FromString(body)
    assert status == 200 and response.partial_success.rejected_spans == 0
    assert "truncated" in response.partial_success.error_message
    records = read_records(collector.settings.kafka, expected=3)
    assert len(records) == 3
    cut = next(r for r in records if r.key == huge.trace_id.hex().encode())
    assert len(cut.value) <= 16_384
    spans = [s for rs in ExportTraceServiceRequest.FromString(cut.value).resource_spans
             for ss in rs.scope_spans for s in ss.spans]
    assert len(spans) == 7  # every span kept
    value = next(kv.value.string_value for s in spans for kv in s.attributes
                 if kv.key == "output.value" and kv.value.string_value.startswith("xxx"))
    assert value.endswith(MARKER.format(n=20_000 - len(value.split(" …")[0]))) and len(value) < 20_000
    stats = collector.stats()
    assert stats["records_truncated"] == 1 and stats["attribute_values_truncated"] >= 1
    assert stats["spans_accepted"] == 21 and stats["spans_rejected"] == 0

    # 200 spans of one trace cannot fit in 16 KiB however their values are cut: refused.
    many = rag_request(1, seed=13)
    scope = many.resource_spans[0].scope_spans[1]
    template = scope.spans[0]
    for i in range(200):
        span = scope.spans.add()
        span.CopyFrom(template)
        span.span_id = (i + 1).to_bytes(8, "big")
        span.kind = Span.SPAN_KIND_INTERNAL
    status, _, body = post(collector, many.SerializeToString())
    response = ExportTraceServiceResponse.FromString(body)
    assert status == 200 and response.partial_success.rejected_spans > 200
    assert "record limit" in response.partial_success.error_message
    assert collector.stats()["records_rejected"] == 1


def test_ten_thousand_small_contexts_are_cut_like_one_huge_context_not_rejected(
        make_collector: Callable[..., Collector]) -> None:
    """Issue 17: 10,000 contexts of ~100 bytes (1.04 MB) were refused whole while one 10 MB
    context was cut to fit. Both now keep what fits from the start, counted, and the scorer
    reads the first contexts of each, as it would have from the whole trace."""
    from ragpulse.scorer.traces import SpanDecoder, extract

    collector = make_collector()  # the default 1 MB Kafka record limit
    limit = collector.settings.producer.max_request_size
    many = rag_request(1, seed=21, services=1)
    retriever = next(s for s in many.resource_spans[0].scope_spans[1].spans if s.name == "retrieve")
    retriever.ClearField("attributes")
    retriever.attributes.add(key="openinference.span.kind").value.string_value = "RETRIEVER"
    retriever.attributes.add(key="input.value").value.string_value = "where is my parcel?"
    for i in range(10_000):
        retriever.attributes.add(key=f"retrieval.documents.{i}.document.content").value.string_value = \
            f"document {i:05d}: " + "parcels ship the next working day " * 2
    huge = rag_request(1, seed=22, services=1)
    big = next(s for s in huge.resource_spans[0].scope_spans[1].spans if s.name == "retrieve")
    big.attributes.add(key="retrieval.documents.5.document.content").value.string_value = "y" * 10_000_000
    assert many.ByteSize() > 1_040_000 and huge.ByteSize() > 10_000_000

    for request in (many, huge):
        status, _, body = post(collector, request.SerializeToString())
        response = ExportTraceServiceResponse.FromString(body)
        assert status == 200 and response.partial_success.rejected_spans == 0
        assert "record limit" in response.partial_success.error_message
    stats = collector.stats()
    assert stats["records_truncated"] == 2 and stats["records_rejected"] == 0
    assert stats["spans_accepted"] == 14 and stats["spans_rejected"] == 0

    records = {r.key.decode(): r for r in read_records(collector.settings.kafka, expected=2)}
    record = records[retriever.trace_id.hex()]
    assert len(record.value) <= limit
    sent = ExportTraceServiceRequest.FromString(record.value)
    got = next(s for rs in sent.resource_spans for ss in rs.scope_spans for s in ss.spans
               if s.name == "retrieve")
    kept = [kv.key for kv in got.attributes]
    n = len(kept) - 2
    # The first n contexts, whole and in order; the rest dropped, counted on the span and here.
    assert kept == ["openinference.span.kind", "input.value"] + [
        f"retrieval.documents.{i}.document.content" for i in range(n)]
    assert 0 < n < 10_000 and got.dropped_attributes_count == 10_000 - n
    assert len(record.value) > limit - 1_000  # as many as fit, not far fewer
    assert all(kv.value.string_value.startswith(f"document {i:05d}: ")
               and not kv.value.string_value.endswith("bytes]") for i, kv in enumerate(got.attributes[2:]))
    assert stats["list_items_dropped"] == 10_000 - n
    # The scorer reads the same first contexts it would have read from the whole trace.
    whole = extract(SpanDecoder().decode(many.SerializeToString()))
    cut = extract(SpanDecoder().decode(record.value))
    assert cut.sample is not None and whole.sample is not None
    assert cut.sample.contexts == whole.sample.contexts and len(cut.sample.contexts) == 64
    assert len(records[big.trace_id.hex()].value) <= limit  # the huge one: cut, as before


def test_receive_buffer_budget_gives_429(make_collector: Callable[..., Collector]) -> None:
    import socket

    body = rag_request(4, seed=13).SerializeToString()
    collector = make_collector(otlp={"max_body_bytes": len(body), "max_inflight_bytes": len(body) + 1024})
    url = urlsplit(collector.http_endpoint or "")
    # A slow client: headers and half of its body, so its reservation is held while we wait.
    slow = socket.create_connection((url.hostname, url.port), timeout=30)
    try:
        slow.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-protobuf\r\n"
                     b"Content-Length: %d\r\n\r\n" % len(body) + body[: len(body) // 2])
        deadline = time.monotonic() + 10
        while collector.stats()["http_inflight_bytes"] == 0 and time.monotonic() < deadline:
            time.sleep(0.02)  # wait until the server holds the slow request's reservation
        status, headers, _ = post(collector, body)
        assert status == 429 and headers["retry-after"] == "2"
        assert collector.stats()["http_refused_busy"] == 1
        slow.sendall(body[len(body) // 2 :])
        assert slow.recv(64).startswith(b"HTTP/1.1 200")
    finally:
        slow.close()
    assert post(collector, body)[0] == 200  # the budget was released


def test_recovers_after_broker_restart_with_idempotent_producer() -> None:
    """tansu's memory storage forgets producer ids on restart; kafka-python's idempotent producer
    then fails fatally and never recovers by itself. The exporter must replace it."""
    from ragpulse.deploy.broker import TansuBroker

    broker = TansuBroker().start()
    settings = collector_settings(
        broker.bootstrap, "spans_restart",
        producer={"confirm": "ack", "delivery_timeout_ms": 2_000, "linger_ms": 0, "ack_timeout_s": 5,
                  "max_block_ms": 500, "idempotent": True},
    )
    collector = build_collector(settings).start()
    restarted = None
    try:
        assert post(collector, rag_request(1, seed=1).SerializeToString())[0] == 200
        port = broker.port
        broker.shutdown()  # SIGKILL: a crash
        assert post(collector, rag_request(1, seed=2).SerializeToString())[0] == 503
        restarted = TansuBroker(port=port).start()
        body = rag_request(1, seed=3).SerializeToString()
        statuses = []
        deadline = time.monotonic() + 45
        while time.monotonic() < deadline:
            status, headers, _ = post(collector, body)
            statuses.append(status)
            if status == 200:
                break
            assert status == 503 and headers["retry-after"]
            time.sleep(0.2)  # a client retrying (faster than Retry-After, to keep the test short)
        assert statuses[-1] == 200, statuses
        assert collector.stats()["producers_rebuilt"] >= 1
        records = read_records(settings.kafka.model_copy(update={"bootstrap_servers": restarted.bootstrap}), 1)
        assert [r.key for r in records] == [b for b in (ExportTraceServiceRequest.FromString(body)
                .resource_spans[0].scope_spans[1].spans[0].trace_id.hex().encode(),)]
    finally:
        collector.shutdown(drain_timeout_s=1.0)
        broker.shutdown()
        if restarted is not None:
            restarted.shutdown()


def test_shared_listener_leaves_a_connection_to_the_process_with_fewer() -> None:
    import socket as socket_module
    import time as time_module

    from ragpulse.collector.otlp_http import _ACCEPT_WAIT_S, SharedListener

    listener = socket_module.create_server(("127.0.0.1", 0))
    try:
        first = SharedListener.create(listener, 2)
        # The worker (index 1) is not serving yet: nobody waits for it.
        t = time_module.monotonic()
        first.wait_turn(3)
        assert time_module.monotonic() - t < _ACCEPT_WAIT_S / 2
        assert first.argument(1) == f"{listener.fileno()},{first.counts_fd},1,2"
        # What a spawned worker rebuilds from its argument (its own descriptor of the socket).
        worker = SharedListener.from_argument(f"{os.dup(listener.fileno())},{first.counts_fd},1,2")
        worker.publish(1)
        t = time_module.monotonic()
        first.wait_turn(3)  # the worker holds fewer: the first waits, then takes it anyway
        assert time_module.monotonic() - t >= _ACCEPT_WAIT_S
        t = time_module.monotonic()
        worker.wait_turn(1)  # the fewest (or as few): accepts at once
        first.wait_turn(1)
        assert time_module.monotonic() - t < _ACCEPT_WAIT_S / 2
        # A connection of the first closes while it waits (its client reconnects at once, so
        # the count it entered with was one too many): it must not wait for itself.
        import threading

        closer = threading.Timer(0.01, first.publish, args=(1,))
        closer.start()
        t = time_module.monotonic()
        first.wait_turn(2)
        assert time_module.monotonic() - t < _ACCEPT_WAIT_S / 2
        closer.join()
        worker.close()  # stopped: the first no longer waits for it
        t = time_module.monotonic()
        first.wait_turn(5)
        assert time_module.monotonic() - t < _ACCEPT_WAIT_S / 2
        assert not listener.getblocking()  # the process that loses the race gets EAGAIN
        worker.socket.close()
    finally:
        listener.close()
