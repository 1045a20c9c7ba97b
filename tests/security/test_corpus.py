"""The hostile-input corpus (:mod:`tests.security.corpus`) through the real collector (HTTP and
gRPC, real tansu broker) and the real scorer path (decode → extract → evaluate with the local
judge), with good traces interleaved: each hostile input gets its stated, counted outcome, the
collector stays healthy, and every good trace arrives exactly once, untouched.

Single-purpose checks that already exist are not repeated here (see docs/reliability.md):
tests/collector/test_collector.py (400/413/415/429/503 one by one, partial success),
tests/scorer/traces/test_decode.py (caps, invalid UTF-8, arbitrary bytes),
tests/scorer/traces/test_extract_fuzz.py (arbitrary attribute values).
"""

from __future__ import annotations

import http.client
from collections.abc import Callable
from urllib.parse import urlsplit

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from ragpulse.collector.service import Collector
from ragpulse.scorer import Evaluator
from ragpulse.scorer.traces import DecodeError, SpanDecoder, extract, group_by_trace
from tests.collector.conftest import read_records
from tests.security.corpus import (
    MAX_BODY,
    MAX_DECOMPRESSED,
    TRACE_CASES,
    WIRE,
    TraceCase,
    good_request,
    trace_id,
)

EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
METRICS = ["faithfulness", "answer_relevancy", "context_precision", "context_utilization"]


def post(collector: Collector, body: bytes, content_type: str = "application/x-protobuf",
         headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    url = urlsplit(collector.http_endpoint or "")
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    try:
        conn.request("POST", "/v1/traces", body=body,
                     headers={"Content-Type": content_type, **(headers or {})})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def grpc_export(channel: grpc.Channel, body: bytes) -> grpc.StatusCode:
    """Send raw bytes as an Export call (no client-side serialization: malformed stays
    malformed); the call's status code."""
    call = channel.unary_unary(EXPORT)
    try:
        call(body, timeout=30)
    except grpc.RpcError as exc:
        return exc.code()
    return grpc.StatusCode.OK


# Hostile traces the collector cannot ship whole: the per-trace record is over
# producer.max_request_size (1 MB), so its longest values are cut to fit; the request gets a
# partial success with 0 rejected spans and a warning, and the trace is delivered.
TRUNCATED = {"megabyte_context"}


@pytest.fixture
def collector(make_collector: Callable[..., Collector]) -> Collector:
    # mode "all": hostile traces that look like no RAG at all must reach the scorer too
    return make_collector(otlp={"max_body_bytes": MAX_BODY,
                                "max_decompressed_bytes": MAX_DECOMPRESSED},
                          filter={"mode": "all"})


def test_http_corpus_with_good_traces_interleaved(collector: Collector) -> None:
    good: list[str] = []
    sent_hostile: dict[str, int] = {}
    n = rejected = 0

    def send_good() -> None:
        nonlocal n
        tid, req = good_request(n)
        n += 1
        assert post(collector, req.SerializeToString())[0] == 200
        good.append(tid)

    for case in WIRE:
        status, _ = post(collector, case.body, case.content_type, case.headers)
        assert status == case.http_status, case.name
        send_good()
    for tc in TRACE_CASES:
        tid = trace_id(tc.name)
        req = tc.build(tid)
        status, body = post(collector, req.SerializeToString())
        assert status == 200, tc.name
        partial = ExportTraceServiceResponse.FromString(body).partial_success
        assert ("truncated" in partial.error_message) == (tc.name in TRUNCATED), tc.name
        if tc.rejected:
            assert partial.rejected_spans == tc.spans_sent(req), tc.name
            assert tc.rejected in partial.error_message, tc.name
            rejected += partial.rejected_spans
        else:
            assert partial.rejected_spans == 0, tc.name
            sent_hostile[tid] = tc.spans_sent(req)
        send_good()

    records = read_records(collector.settings.kafka, expected=len(good) + len(sent_hostile))
    keys = [r.key.decode() for r in records]
    # every good trace exactly once, with exactly its three spans
    for tid in good:
        assert keys.count(tid) == 1
    for r in records:
        spans = [s for rs in ExportTraceServiceRequest.FromString(r.value).resource_spans
                 for ss in rs.scope_spans for s in ss.spans]
        key = r.key.decode()
        assert {s.trace_id.hex() for s in spans} == {key}
        if key in good:
            assert len(spans) == 3
        else:
            assert len(spans) == sent_hostile[key]
    assert set(keys) == set(good) | set(sent_hostile)
    st_ = collector.stats()
    malformed = sum(1 for c in WIRE if c.http_status == 400)
    assert st_["requests_malformed"] == malformed
    assert st_["http_too_large"] == sum(1 for c in WIRE if c.http_status == 413)
    assert st_["http_unsupported"] == sum(1 for c in WIRE if c.http_status == 415)
    assert st_["spans_rejected"] == rejected > 0
    assert st_["records_truncated"] == len(TRUNCATED)


def test_grpc_corpus_with_good_traces_interleaved(collector: Collector) -> None:
    good: list[str] = []
    with grpc.insecure_channel(
        collector.grpc_endpoint or "",
        options=[("grpc.max_send_message_length", 4 * MAX_BODY)],
    ) as channel:
        for i, case in enumerate(c for c in WIRE if c.grpc_code):
            assert grpc_export(channel, case.body) == getattr(grpc.StatusCode, case.grpc_code), \
                case.name
            tid, req = good_request(100 + i)
            assert grpc_export(channel, req.SerializeToString()) == grpc.StatusCode.OK
            good.append(tid)
        for tc in TRACE_CASES:
            assert grpc_export(channel, tc.build(trace_id(tc.name)).SerializeToString()) == \
                grpc.StatusCode.OK, tc.name
    delivered = [tc for tc in TRACE_CASES if not tc.rejected]
    records = read_records(collector.settings.kafka, expected=len(good) + len(delivered))
    keys = [r.key.decode() for r in records]
    assert all(keys.count(t) == 1 for t in good)
    assert set(keys) == set(good) | {trace_id(tc.name) for tc in delivered}
    assert collector.stats()["requests_malformed"] == sum(
        1 for c in WIRE if c.grpc_code == "INVALID_ARGUMENT")


@pytest.mark.parametrize("case", TRACE_CASES, ids=[c.name for c in TRACE_CASES])
async def test_scorer_path_gives_each_trace_a_clear_outcome(case: TraceCase, local_judge) -> None:
    decoder = SpanDecoder()
    tid = trace_id(case.name)
    spans = decoder.decode(case.build(tid).SerializeToString())
    groups = group_by_trace(spans)
    assert list(groups) == [tid]
    for counter in case.decoder:
        assert decoder.stats()[counter] > 0, counter
    ex = extract(groups[tid])
    if case.outcome != "scored":
        assert ex.sample is None and ex.reason == case.outcome
        return
    assert ex.sample is not None, ex.reason
    assert 1 <= len(ex.sample.contexts) <= 64
    result = await Evaluator(local_judge, METRICS).evaluate(ex.sample)
    assert [s.metric for s in result.scores] == METRICS
    for s in result.scores:
        # a value in [0, 1] (Score validates it), or no value with a status and a reason
        assert (s.value is not None and s.status == "ok") or (s.status != "ok" and s.reason)
    # the well-formed part of a hostile trace is still judged
    assert any(s.value is not None for s in result.scores)


def _mutations(raw: bytes) -> st.SearchStrategy[bytes]:
    n = len(raw)
    flip = st.tuples(st.integers(0, n - 1), st.integers(1, 255)).map(
        lambda t: raw[:t[0]] + bytes([raw[t[0]] ^ t[1]]) + raw[t[0] + 1:])
    cut = st.integers(0, n - 1).map(lambda i: raw[:i])
    splice = st.tuples(st.integers(0, n), st.binary(max_size=32)).map(
        lambda t: raw[:t[0]] + t[1] + raw[t[0]:])
    dup = st.tuples(st.integers(0, n), st.integers(0, n)).map(
        lambda t: raw[:max(t)] + raw[min(t):])
    return st.one_of(flip, cut, splice, dup)


_SEED = b"".join(c.build(trace_id(c.name)).SerializeToString()
                 for c in TRACE_CASES if c.name in ("duplicate_spans", "orphan_spans",
                                                    "unexpected_types", "control_characters"))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_mutations(_SEED))
def test_mutated_otlp_decodes_or_fails_cleanly_and_extracts_without_raising(data: bytes) -> None:
    """Structure-aware fuzz: valid OTLP bytes with a flipped byte, cut short, spliced or with a
    repeated slice (most mutations still parse, unlike random bytes, so the extractor gets
    strange spans). Decoding raises only DecodeError; extraction never raises."""
    decoder = SpanDecoder()
    try:
        spans = decoder.decode(data)
    except DecodeError as exc:
        assert exc.reason
        return
    for trace_spans in group_by_trace(spans).values():
        ex = extract(trace_spans)
        assert (ex.sample is None) == bool(ex.reason)

