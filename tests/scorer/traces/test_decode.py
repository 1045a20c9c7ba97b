"""SpanDecoder over real OTLP bytes: typed values, events, resources, caps, malformed records."""

from __future__ import annotations

import pytest
from google.protobuf.message import DecodeError as ProtobufDecodeError
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue, KeyValueList
from opentelemetry.proto.trace.v1 import trace_pb2
from opentelemetry.trace import SpanKind

from ragpulse.scorer.traces import (
    DecodeError,
    DecodeLimits,
    SpanDecoder,
    StatusCode,
    group_by_trace,
)

from .sdk import Recorder, decode_traces, one_trace, to_record


def _raw_span(
    trace_id: bytes = b"\x01" * 16,
    span_id: bytes = b"\x02" * 8,
    name: str = "s",
    attrs: dict[str, AnyValue] | None = None,
) -> trace_pb2.TracesData:
    td = trace_pb2.TracesData()
    rs = td.resource_spans.add()
    rs.resource.attributes.append(KeyValue(key="service.name", value=AnyValue(string_value="raw")))
    ss = rs.scope_spans.add()
    ss.scope.name, ss.scope.version = "raw-scope", "9"
    s = ss.spans.add(
        trace_id=trace_id, span_id=span_id, name=name, start_time_unix_nano=1, end_time_unix_nano=2
    )
    for k, v in (attrs or {}).items():
        s.attributes.append(KeyValue(key=k, value=v))
    return td


def test_sdk_span_fields_round_trip() -> None:
    rec = Recorder(service="checkout", env="staging")
    with rec.span(
        "root",
        {
            "s": "text",
            "b": True,
            "i": 7,
            "f": 0.25,
            "ls": ["a", "b"],
            "li": [1, 2],
            "lf": [0.5],
            "lb": [True, False],
        },
        kind=SpanKind.SERVER,
    ) as root:
        rec.event(
            root,
            "db.query.result",
            {"db.query.result.document": "日本語", "db.query.result.score": 0.7},
        )
        with rec.span("child", error="boom"):
            pass
    spans = {s.name: s for s in one_trace(to_record(rec.finished()))}

    root_s, child = spans["root"], spans["child"]
    assert root_s.attributes == {
        "s": "text",
        "b": True,
        "i": 7,
        "f": 0.25,
        "ls": ("a", "b"),
        "li": (1, 2),
        "lf": (0.5,),
        "lb": (True, False),
    }
    assert root_s.kind == SpanKind.SERVER.value + 1  # OTLP numbers kinds from 1 (INTERNAL)
    assert root_s.parent_span_id is None and child.parent_span_id == root_s.span_id
    assert (
        len(root_s.trace_id) == 32
        and len(root_s.span_id) == 16
        and root_s.trace_id == root_s.trace_id.lower()
    )
    assert root_s.start_ns < child.start_ns < child.end_ns < root_s.end_ns
    (ev,) = root_s.events
    assert ev.name == "db.query.result" and ev.attributes["db.query.result.document"] == "日本語"
    assert ev.time_ns > root_s.start_ns
    assert (
        child.status_code == StatusCode.ERROR and child.status_message == "boom" and child.is_error
    )
    assert root_s.service_name == "checkout" and root_s.environment == "staging"
    assert root_s.resource is child.resource  # one dict per ResourceSpans, shared
    assert root_s.scope_name == "tests.writer" and root_s.scope_version == "1.0"


def test_kvlist_bytes_nested_arrays_and_empty_values() -> None:
    kv = AnyValue(
        kvlist_value=KeyValueList(
            values=[
                KeyValue(key="role", value=AnyValue(string_value="user")),
                KeyValue(
                    key="parts",
                    value=AnyValue(
                        array_value=ArrayValue(
                            values=[
                                AnyValue(
                                    kvlist_value=KeyValueList(
                                        values=[
                                            KeyValue(
                                                key="content", value=AnyValue(string_value="hi")
                                            )
                                        ]
                                    )
                                )
                            ]
                        )
                    ),
                ),
            ]
        )
    )
    td = _raw_span(attrs={"msg": kv, "raw": AnyValue(bytes_value=b"\x00\xff"), "empty": AnyValue()})

    (span,) = SpanDecoder().decode(td.SerializeToString())

    assert span.attributes == {
        "msg": {"role": "user", "parts": ({"content": "hi"},)},
        "raw": b"\x00\xff",
        "empty": None,
    }
    assert (
        span.service_name == "raw" and span.scope_name == "raw-scope" and span.scope_version == "9"
    )


def test_many_traces_many_resources_in_one_record() -> None:
    spans = []
    ids = set()
    for service in ("a", "b"):
        rec = Recorder(service=service)
        for _ in range(3):
            with rec.span("root"), rec.span("child"):
                pass
        finished = rec.finished()
        ids |= {format(s.context.trace_id, "032x") for s in finished}
        spans += finished
    decoder = SpanDecoder()

    traces = decode_traces(to_record(spans), decoder)

    assert set(traces) == ids and len(traces) == 6
    assert all(len(v) == 2 and len({s.service_name for s in v}) == 1 for v in traces.values())
    assert decoder.stats()["spans_decoded"] == 12 and decoder.stats()["records_decoded"] == 1


@pytest.mark.parametrize("value", [b"\xff\xff\xff\xff garbage", b"\x0a\x05\x0a\x03"])
def test_malformed_bytes_raise_decode_error_with_reason(value: bytes) -> None:
    decoder = SpanDecoder()
    with pytest.raises(DecodeError) as info:
        decoder.decode(value)
    assert info.value.reason == DecodeError.MALFORMED and info.value.permanent
    assert decoder.stats()["records_failed"] == 1 and decoder.stats()["records_decoded"] == 0


def test_truncated_record_is_malformed() -> None:
    rec = Recorder()
    with rec.span("root", {"k": "v" * 100}):
        pass
    data = to_record(rec.finished())
    with pytest.raises(DecodeError) as info:
        SpanDecoder().decode(data[: len(data) - 20])
    assert info.value.reason == DecodeError.MALFORMED


def test_record_too_large() -> None:
    data = _raw_span(attrs={"k": AnyValue(string_value="x" * 5000)}).SerializeToString()
    with pytest.raises(DecodeError) as info:
        SpanDecoder(DecodeLimits(max_record_bytes=1000)).decode(data)
    assert info.value.reason == DecodeError.TOO_LARGE


def test_invalid_ids_are_skipped_and_counted_and_all_invalid_is_an_error() -> None:
    td = _raw_span()
    ss = td.resource_spans[0].scope_spans[0]
    ss.spans.add(trace_id=b"\x00" * 16, span_id=b"\x03" * 8, name="zero trace id")
    ss.spans.add(trace_id=b"\x01" * 8, span_id=b"\x03" * 8, name="short trace id")
    ss.spans.add(trace_id=b"\x01" * 16, span_id=b"", name="no span id")
    decoder = SpanDecoder()

    spans = decoder.decode(td.SerializeToString())

    assert [s.name for s in spans] == ["s"]
    assert decoder.stats()["spans_invalid"] == 3
    with pytest.raises(DecodeError) as info:
        decoder.decode(_raw_span(trace_id=b"\x00" * 16).SerializeToString())
    assert info.value.reason == DecodeError.NO_VALID_SPANS


def test_empty_record_is_no_spans() -> None:
    assert SpanDecoder().decode(b"") == []
    assert SpanDecoder().decode(None) == []
    assert SpanDecoder().decode(trace_pb2.TracesData().SerializeToString()) == []


def test_invalid_utf8_is_replaced_and_counted_not_fatal() -> None:
    td = _raw_span(name="NAME", attrs={"input.value": AnyValue(string_value="QQQQ ok")})
    td.resource_spans[0].scope_spans[0].spans.add(
        trace_id=b"\x01" * 16, span_id=b"\x05" * 8, name="fine"
    )
    data = td.SerializeToString().replace(b"QQQQ", b"Q\xc3\x28Q").replace(b"NAME", b"N\xffME")
    with pytest.raises(ProtobufDecodeError):  # the strict schema really rejects these bytes
        trace_pb2.TracesData().ParseFromString(data)
    decoder = SpanDecoder()

    spans = decoder.decode(data)

    assert [s.name for s in spans] == ["N\ufffdME", "fine"]
    assert spans[0].attributes["input.value"] == "Q\ufffd(Q ok"
    assert spans[0].service_name == "raw" and spans[0].trace_id == "01" * 16
    st_ = decoder.stats()
    assert st_["records_lenient"] == 1 and st_["invalid_utf8_values"] == 2


def test_caps_cut_and_count() -> None:
    limits = DecodeLimits(
        max_attributes=3, max_events=2, max_value_chars=16, max_array_items=2, max_depth=2
    )
    rec = Recorder()
    deep = AnyValue(
        array_value=ArrayValue(
            values=[
                AnyValue(
                    array_value=ArrayValue(
                        values=[AnyValue(array_value=ArrayValue(values=[AnyValue(int_value=1)]))]
                    )
                )
            ]
        )
    )
    with rec.span("s", {"a": "x" * 100, "b": [1, 2, 3, 4], "c": 1, "d": 2, "e": 3}) as s:
        for i in range(5):
            rec.event(s, f"e{i}", {})
    data = to_record(rec.finished())
    decoder = SpanDecoder(limits)

    (span,) = decoder.decode(data)
    (raw,) = decoder.decode(_raw_span(attrs={"deep": deep}).SerializeToString())

    assert span.attributes == {"a": "x" * 16 + "…", "b": (1, 2), "c": 1}
    assert [e.name for e in span.events] == ["e0", "e1"]
    assert raw.attributes["deep"] == ((None,),)
    st_ = decoder.stats()
    resource_over = len(rec.provider.resource.attributes) - 3  # the resource is capped too
    assert st_["attributes_dropped"] == 2 + resource_over and st_["events_dropped"] == 3
    assert st_["values_truncated"] == 2 and st_["values_dropped"] == 1


def test_limits_validate() -> None:
    with pytest.raises(ValueError):
        DecodeLimits(max_attributes=0)
    with pytest.raises(ValueError):
        DecodeLimits(unknown=1)  # type: ignore[call-arg]


def test_group_by_trace_keeps_order() -> None:
    rec = Recorder()
    for _ in range(2):
        with rec.span("r"), rec.span("c"):
            pass
    spans = SpanDecoder().decode(to_record(rec.finished()))
    groups = group_by_trace(spans)
    assert list(groups) == list(dict.fromkeys(s.trace_id for s in spans))
    assert sum(len(v) for v in groups.values()) == 4


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=256))
def test_arbitrary_bytes_decode_or_raise_decode_error(data: bytes) -> None:
    try:
        spans = SpanDecoder().decode(data)
    except DecodeError as exc:
        assert exc.reason in (DecodeError.MALFORMED, DecodeError.NO_VALID_SPANS)
    else:
        assert all(len(s.trace_id) == 32 for s in spans)
