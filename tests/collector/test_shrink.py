"""Fitting an oversized per-trace record: long values cut, or the last list items dropped."""

from __future__ import annotations

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from ragpulse.collector.shrink import MARKER, shrink_request


def _request() -> tuple[ExportTraceServiceRequest, Span]:
    req = ExportTraceServiceRequest()
    span = req.resource_spans.add().scope_spans.add().spans.add(
        trace_id=b"\x01" * 16, span_id=b"\x02" * 8, name="retrieve")
    span.attributes.add(key="input.value").value.string_value = "where is my parcel?"
    return req, span


def _spans(value: bytes) -> list[Span]:
    req = ExportTraceServiceRequest.FromString(value)
    return [s for rs in req.resource_spans for ss in rs.scope_spans for s in ss.spans]


def test_the_last_events_are_dropped_and_counted_on_the_span() -> None:
    req, span = _request()
    for i in range(2_000):
        event = span.events.add(name="db.query.result", time_unix_nano=i)
        event.attributes.add(key="db.query.result.document", value=AnyValue(string_value=f"doc {i} " * 5))
    result = shrink_request(req.SerializeToString(), 50_000)
    assert result.value is not None and len(result.value) <= 50_000
    (got,) = _spans(result.value)
    kept = [e.time_unix_nano for e in got.events]
    assert kept == list(range(len(kept))) and 0 < len(kept) < 2_000  # the first ones, in order
    assert got.dropped_events_count == 2_000 - len(kept) == result.items_dropped
    assert [kv.key for kv in got.attributes] == ["input.value"]  # no other attribute touched


def test_the_last_items_of_an_array_value_are_dropped() -> None:
    req, span = _request()
    docs = span.attributes.add(key="retrieval.documents").value.array_value
    for i in range(5_000):
        docs.values.add(string_value=f"document {i}")
    result = shrink_request(req.SerializeToString(), 20_000)
    assert result.value is not None and len(result.value) <= 20_000
    (got,) = _spans(result.value)
    values = [v.string_value for v in got.attributes[1].value.array_value.values]
    assert values == [f"document {i}" for i in range(len(values))] and values
    assert result.items_dropped == 5_000 - len(values)


def test_a_whole_context_group_goes_before_any_earlier_one() -> None:
    req, span = _request()
    for i in range(3_000):  # id, content, score per document, as OpenInference writes them
        span.attributes.add(key=f"retrieval.documents.{i}.document.id").value.string_value = f"d{i}"
        span.attributes.add(key=f"retrieval.documents.{i}.document.content").value.string_value = "text " * 8
        span.attributes.add(key=f"retrieval.documents.{i}.document.score").value.double_value = 0.5
    result = shrink_request(req.SerializeToString(), 60_000)
    assert result.value is not None
    (got,) = _spans(result.value)
    keys = [kv.key for kv in got.attributes]
    n = (len(keys) - 1) // 3
    # Documents 0..n-1 complete, then at most a part of document n (its first fields).
    assert keys[: 1 + 3 * n] == ["input.value"] + [
        f"retrieval.documents.{i}.document.{f}" for i in range(n) for f in ("id", "content", "score")]
    assert all(k.startswith(f"retrieval.documents.{n}.") for k in keys[1 + 3 * n:])


def test_many_contexts_whole_are_preferred_to_all_of_them_cut() -> None:
    req, span = _request()
    for i in range(400):
        span.attributes.add(key=f"retrieval.documents.{i}.document.content").value.string_value = \
            f"document {i} " + "x" * 2_000
    result = shrink_request(req.SerializeToString(), 60_000)
    assert result.value is not None and len(result.value) <= 60_000
    assert result.values_cut == 0 and 0 < result.items_dropped < 400
    (got,) = _spans(result.value)
    assert all(kv.value.string_value == f"document {i} " + "x" * 2_000
               for i, kv in enumerate(got.attributes[1:]))


def test_a_huge_value_and_many_small_items_are_cut_and_dropped_together() -> None:
    req, span = _request()
    span.attributes.add(key="output.value").value.string_value = "y" * 500_000
    for i in range(5_000):
        span.attributes.add(key=f"retrieval.documents.{i}.document.content").value.string_value = \
            f"document {i}: parcels ship the next working day"
    result = shrink_request(req.SerializeToString(), 100_000)
    assert result.value is not None and len(result.value) <= 100_000
    assert result.values_cut == 1 and 0 < result.items_dropped < 5_000
    (got,) = _spans(result.value)
    output = got.attributes[1].value.string_value
    assert output.startswith("y" * 256) and output.endswith(MARKER.format(n=500_000 - 256))
    contents = [kv.value.string_value for kv in got.attributes[2:]]
    assert contents == [f"document {i}: parcels ship the next working day" for i in range(len(contents))]


def test_a_record_that_cannot_fit_is_refused() -> None:
    req, span = _request()
    for _ in range(1_000):  # many spans, nothing long, no list: nothing to cut or drop
        req.resource_spans[0].scope_spans[0].spans.add().CopyFrom(span)
    assert shrink_request(req.SerializeToString(), 5_000).value is None
