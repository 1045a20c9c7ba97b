"""The byte-level per-trace split and RAG classification, checked against protobuf decoding."""

from __future__ import annotations

import random
import re

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from ragpulse.collector.split import RAG_MARKERS, MalformedRequest, split_request
from testkit.payloads import T0, rag_request

# T0 (testkit.payloads): midnight UTC yesterday, a plausible start time for every span


@pytest.fixture(autouse=True, params=["native", "python"])
def implementation(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test here runs on both per-span loops: the C module and split.py's own."""
    from ragpulse.collector import split as split_module

    if request.param == "python":
        monkeypatch.setattr(split_module, "_native", None)
    elif not split_module.NATIVE:
        pytest.skip("ragpulse.collector._native is not built here (see tests/collector/test_native.py)")
    return str(request.param)


def _by_trace(req: ExportTraceServiceRequest) -> dict[bytes, list[tuple[bytes, bytes, bytes]]]:
    """trace id → [(resource bytes + schema, scope bytes + schema, span bytes)] in request order."""
    out: dict[bytes, list[tuple[bytes, bytes, bytes]]] = {}
    for rs in req.resource_spans:
        for ss in rs.scope_spans:
            for span in ss.spans:
                out.setdefault(span.trace_id, []).append(
                    (
                        rs.resource.SerializeToString() + rs.schema_url.encode(),
                        ss.scope.SerializeToString() + ss.schema_url.encode(),
                        span.SerializeToString(),
                    )
                )
    return out


def test_split_equals_protobuf_grouping() -> None:
    req = rag_request(40, seed=3, plain_every=5, services=3)
    for ss in (req.resource_spans[1].scope_spans[0],):
        ss.schema_url = "https://opentelemetry.io/schemas/1.27.0"
    expected = _by_trace(req)
    result = split_request(req.SerializeToString())
    assert result.spans_total == sum(len(v) for v in expected.values())
    assert result.spans_invalid == 0
    assert [r.key for r in result.records] == [t.hex().encode() for t in expected]
    for record in result.records:
        got = ExportTraceServiceRequest.FromString(record.value)
        trace_id = bytes.fromhex(record.key.decode())
        assert _by_trace(got) == {trace_id: expected[trace_id]}
        assert record.spans == len(expected[trace_id])
        # No empty resource/scope groups: exactly what otelcol's SplitTraces emits.
        assert all(ss.spans for rs in got.resource_spans for ss in rs.scope_spans)
    # every 5th trace is a plain HTTP+DB trace (no span in the OpenInference scope): not RAG
    plain = {
        span.trace_id
        for rs in req.resource_spans
        for ss in rs.scope_spans
        for span in ss.spans
        if span.name == "GET /health"
    }
    assert len(plain) == 8
    assert {r.key for r in result.records if not r.rag} == {t.hex().encode() for t in plain}


def test_single_trace_request_is_forwarded_unchanged() -> None:
    req = rag_request(1, seed=1)
    body = req.SerializeToString()
    (record,) = split_request(body).records
    assert record.value == body and record.rag and record.spans == 7


@pytest.mark.parametrize(
    ("key", "value", "event"),
    [
        ("openinference.span.kind", "RETRIEVER", None),
        ("openinference.span.kind", "CHAIN", None),
        ("gen_ai.operation.name", "chat", None),
        ("gen_ai.retrieval.query.text", "where is my parcel", None),
        ("traceloop.span.kind", "task", None),
        ("llm.request.type", "chat", None),
        ("retrieval.documents.0.document.content", "text", None),
        (None, None, "db.query.result"),
        (None, None, "gen_ai.content.prompt"),
    ],
)
def test_rag_conventions_are_detected(key: str | None, value: str | None, event: str | None) -> None:
    req = _span_with(key, event, value)
    other = req.resource_spans[0].scope_spans[0].spans.add()
    other.trace_id, other.span_id, other.name = random.randbytes(16), random.randbytes(8), "GET /x"
    other.start_time_unix_nano = other.end_time_unix_nano = T0
    other.attributes.add(key="http.route", value=AnyValue(string_value="llm.gen_ai.retrieval. in a value"))
    other.events.add(name="exception")
    rag, plain = split_request(req.SerializeToString()).records
    assert rag.rag and not plain.rag
    assert all(r.rag for r in split_request(req.SerializeToString(), keep_all=True).records)


def _span_with(key: str | None, event: str | None = None, value: str | None = "v",
               ) -> ExportTraceServiceRequest:
    """A request of one span with an HTTP attribute, plus attribute ``key`` and event ``event``."""
    req = ExportTraceServiceRequest()
    span = req.resource_spans.add().scope_spans.add().spans.add()
    span.trace_id, span.span_id, span.name = random.randbytes(16), random.randbytes(8), "op"
    span.start_time_unix_nano = span.end_time_unix_nano = T0
    span.attributes.add(key="http.method", value=AnyValue(string_value="POST"))
    if key:
        span.attributes.append(KeyValue(key=key, value=AnyValue(string_value=value)))
    if event:
        span.events.add(name=event, time_unix_nano=1)
    return req


@pytest.mark.parametrize("marker", RAG_MARKERS)
def test_every_declared_marker_is_found_as_a_key_and_an_event(marker: str) -> None:
    """The markers come from the convention declarations and some are looked for by what they
    share (``ai.``, ``.result``): each is still found at the start of a key or an event name."""
    (as_key,) = split_request(_span_with(marker + "x").SerializeToString()).records
    (as_event,) = split_request(_span_with(None, marker + "x").SerializeToString()).records
    assert as_key.rag and as_event.rag


@pytest.mark.parametrize("key", ["openai.model", "task.result", "ai.obs", "ai.other.attribute.key", "mygen_ai.x", "xllm.y",
                                 "db.query.resul", "confident", "http.route"])
def test_near_misses_of_the_markers_are_not_rag(key: str) -> None:
    (record,) = split_request(_span_with(key, key).SerializeToString()).records
    assert not record.rag


def test_invalid_trace_ids_are_counted_not_exported() -> None:
    req = rag_request(2, seed=9)
    bad = req.resource_spans[0].scope_spans[0].spans.add()
    bad.CopyFrom(req.resource_spans[0].scope_spans[0].spans[0])
    bad.trace_id = b"\x00" * 16
    short = req.resource_spans[0].scope_spans[0].spans.add()
    short.CopyFrom(bad)
    short.trace_id = b"\x01" * 8
    missing = req.resource_spans[0].scope_spans[0].spans.add()
    missing.CopyFrom(bad)
    missing.ClearField("trace_id")
    result = split_request(req.SerializeToString())
    assert result.spans_invalid == 3 and "trace_id" in result.invalid_message
    assert len(result.records) == 2 and sum(r.spans for r in result.records) == 14


def test_fields_in_any_order_are_handled() -> None:
    # A span whose trace_id is not the first field (hand-built encoders may do this).
    span = Span(span_id=b"\x02" * 8, name="x", start_time_unix_nano=T0, end_time_unix_nano=T0)
    body = span.SerializeToString() + b"\x0a\x10" + b"\x07" * 16
    scope = b"\x12" + bytes([len(body)]) + body
    rs = b"\x12" + bytes([len(scope)]) + scope
    req = b"\x0a" + bytes([len(rs)]) + rs
    ExportTraceServiceRequest.FromString(req)  # valid protobuf
    (record,) = split_request(req).records
    assert record.key == (b"\x07" * 16).hex().encode()


def test_truncated_bytes_raise_malformed() -> None:
    body = rag_request(3).SerializeToString()
    with pytest.raises(MalformedRequest):
        split_request(body[:-7])


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_trace_ids = st.sampled_from([bytes([i]) * 16 for i in range(1, 6)])
_span = st.builds(
    lambda tid, name, n_attrs, big: (tid, name, n_attrs, big),
    # Names from a plain alphabet: control bytes followed by "llm." inside a name are the
    # documented (harmless) false-positive case, not what this property is about.
    _trace_ids, st.text(alphabet="abc xyzé東", max_size=20), st.integers(0, 4), st.booleans(),
)
_scope = st.tuples(st.text(max_size=10), st.text(max_size=10), st.lists(_span, max_size=6))
_resource = st.tuples(st.text(max_size=10), st.lists(_scope, max_size=3))


@settings(max_examples=150, deadline=None)
@given(st.lists(_resource, max_size=4), st.booleans())
def test_split_regroups_any_request_exactly(resources: list, keep_all: bool) -> None:
    req = ExportTraceServiceRequest()
    for r_schema, scopes in resources:
        rs = req.resource_spans.add(schema_url=r_schema)
        rs.resource.attributes.add(key="service.name", value=AnyValue(string_value="svc"))
        for name, s_schema, spans in scopes:
            ss = rs.scope_spans.add(schema_url=s_schema)
            ss.scope.name = name
            for tid, span_name, n_attrs, big in spans:
                span = ss.spans.add(trace_id=tid, span_id=random.randbytes(8), name=span_name,
                                    start_time_unix_nano=T0, end_time_unix_nano=T0)
                for i in range(n_attrs):
                    span.attributes.add(key=f"llm.k{i}" if i == 3 else f"k{i}", value=AnyValue(string_value="v" * (300 if big else 3)))
    expected = _by_trace(req)
    result = split_request(req.SerializeToString(), keep_all=keep_all)
    got = {}
    for record in result.records:
        msg = ExportTraceServiceRequest.FromString(record.value)
        assert list(_by_trace(msg)) == [bytes.fromhex(record.key.decode())]
        got.update(_by_trace(msg))
        # the RAG flag is exactly "some span of this trace has an llm.* attribute key"
        rag = any(kv.key.startswith("llm.") for rs in msg.resource_spans for ss in rs.scope_spans
                  for sp in ss.spans for kv in sp.attributes)
        assert record.rag == (rag or keep_all)
    assert got == expected
    assert result.spans_total == sum(len(v) for v in expected.values())


NOW = T0 + 11 * 86_400 * 10**9  # the receiver's clock in these tests (11 days after T0)


def _one_span_request(**fields: object) -> ExportTraceServiceRequest:
    """A good RAG trace plus one more span of another trace with ``fields`` overriding its own."""
    req = rag_request(1, seed=11)
    span = req.resource_spans[0].scope_spans[0].spans.add(
        trace_id=b"\x05" * 16, span_id=b"\x06" * 8, name="odd", start_time_unix_nano=T0,
        end_time_unix_nano=T0 + 10**6)
    for name, value in fields.items():
        setattr(span, name, value)
    return req


@pytest.mark.parametrize(("fields", "reason"), [
    ({"span_id": b""}, "span_id"),
    ({"span_id": b"\x01" * 7}, "span_id"),
    ({"span_id": b"\x01" * 9}, "span_id"),
    ({"span_id": b"\x01" * 100}, "span_id"),
    ({"span_id": bytes(8)}, "span_id"),
    ({"parent_span_id": b"\x01" * 7}, "parent_span_id"),
    ({"parent_span_id": b"\x01" * 16}, "parent_span_id"),
    ({"start_time_unix_nano": 0}, "start_time_unix_nano"),
    ({"start_time_unix_nano": 1}, "start_time_unix_nano"),
    ({"start_time_unix_nano": 2**63}, "start_time_unix_nano"),
    ({"start_time_unix_nano": 2**64 - 1}, "start_time_unix_nano"),
    ({"start_time_unix_nano": 946_684_799 * 10**9}, "start_time_unix_nano"),  # 1999-12-31
    ({"start_time_unix_nano": NOW + 86_400 * 10**9 + 1}, "start_time_unix_nano"),
    ({"end_time_unix_nano": 0}, "end_time_unix_nano"),
    ({"end_time_unix_nano": 2**64 - 1}, "end_time_unix_nano"),
])
@pytest.mark.parametrize("reordered", [False, True])
def test_spans_with_bad_ids_or_implausible_start_times_are_rejected_by_field(
        fields: dict[str, object], reason: str, reordered: bool) -> None:
    req = _one_span_request(**fields)
    body = req.SerializeToString()
    if reordered:  # the same span with its trace id written last (a hand-built encoder)
        span = req.resource_spans[0].scope_spans[0].spans.pop()
        tid = span.trace_id
        span.ClearField("trace_id")
        raw = span.SerializeToString() + b"\x0a\x10" + tid
        scope = req.resource_spans[0].scope_spans[0].SerializeToString() + b"\x12" + _len(raw) + raw
        rs_rest = b"".join(
            b"\x12" + _len(s.SerializeToString()) + s.SerializeToString()
            for s in req.resource_spans[0].scope_spans[1:])
        rs = (b"\x0a" + _len(req.resource_spans[0].resource.SerializeToString())
              + req.resource_spans[0].resource.SerializeToString()
              + b"\x12" + _len(scope) + scope + rs_rest)
        body = b"\x0a" + _len(rs) + rs
        ExportTraceServiceRequest.FromString(body)
    result = split_request(body, now_ns=NOW)
    assert result.spans_invalid == 1 and result.invalid == {reason: 1}
    assert reason in result.invalid_message
    (record,) = result.records  # the good trace goes on, whole
    assert record.spans == 7 and record.key != (b"\x05" * 16).hex().encode()


def _len(b: bytes) -> bytes:
    out = bytearray()
    n = len(b)
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


@pytest.mark.parametrize("fields", [
    {"parent_span_id": b""},
    {"parent_span_id": b"\x07" * 8},
    {"start_time_unix_nano": 946_684_800 * 10**9},
    {"start_time_unix_nano": NOW + 86_400 * 10**9},
    {"end_time_unix_nano": T0 - 10**9},  # ends before it starts: clock skew, kept
    {"trace_state": "k=v", "kind": Span.SPAN_KIND_CLIENT, "end_time_unix_nano": NOW},
])
def test_valid_ids_and_start_times_at_the_bounds_are_accepted(fields: dict[str, object]) -> None:
    result = split_request(_one_span_request(**fields).SerializeToString(), now_ns=NOW)
    assert result.spans_invalid == 0 and len(result.records) == 2


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(
    st.sampled_from([b"", b"\x01" * 7, b"\x02" * 8, bytes(8), b"\x03" * 9]),
    st.sampled_from([b"", b"\x04" * 8, b"\x05" * 3]),
    st.sampled_from([0, 1, T0, NOW + 2 * 86_400 * 10**9, 2**63, 2**64 - 1]),
    st.sampled_from([0, T0, 2**64 - 1]),
    st.integers(0, 3),
), min_size=1, max_size=8))
def test_the_byte_level_check_agrees_with_protobuf(
        spans: list[tuple[bytes, bytes, int, int, int]]) -> None:
    req = ExportTraceServiceRequest()
    ss = req.resource_spans.add().scope_spans.add()
    for i, (sid, pid, start, end, n_attrs) in enumerate(spans):
        span = ss.spans.add(trace_id=bytes([i + 1]) * 16, span_id=sid, parent_span_id=pid,
                            start_time_unix_nano=start, end_time_unix_nano=end, name="n" * i)
        for k in range(n_attrs):
            span.attributes.add(key=f"k{k}", value=AnyValue(string_value="v"))
    parsed = ExportTraceServiceRequest.FromString(req.SerializeToString())
    good = [
        s for s in parsed.resource_spans[0].scope_spans[0].spans
        if len(s.span_id) == 8 and s.span_id != bytes(8) and len(s.parent_span_id) in (0, 8)
        and 946_684_800 * 10**9 <= s.start_time_unix_nano <= NOW + 86_400 * 10**9
        and 946_684_800 * 10**9 <= s.end_time_unix_nano <= NOW + 86_400 * 10**9
    ]
    result = split_request(req.SerializeToString(), now_ns=NOW)
    assert result.spans_invalid == len(spans) - len(good)
    assert [r.key for r in result.records] == [s.trace_id.hex().encode() for s in good]


def _random_request(rng: random.Random) -> ExportTraceServiceRequest:
    """Resources and scopes with spans of a few traces, contiguous runs and interleaved ones, a
    trace spread over scopes and resources, now and then a RAG attribute or an invalid trace id."""
    pool = [rng.randbytes(16) for _ in range(rng.randint(1, 6))]
    req = ExportTraceServiceRequest()
    for r in range(rng.randint(1, 3)):
        rs = req.resource_spans.add(schema_url=rng.choice(["", f"https://schema/{r}"]))
        rs.resource.attributes.add(key="service.name", value=AnyValue(string_value=f"svc{r}"))
        for s in range(rng.randint(0, 3)):
            ss = rs.scope_spans.add(schema_url=rng.choice(["", "s"]))
            ss.scope.name = f"scope{s}"
            tid = rng.choice(pool)
            for _ in range(rng.randint(0, 12)):
                if rng.random() < 0.4:  # a new run; otherwise the previous span's trace continues
                    tid = rng.choice(pool)
                span = ss.spans.add(trace_id=tid, span_id=rng.randbytes(7) + b"\x01", name=rng.choice(["a", "b" * 200]),
                                    start_time_unix_nano=1_700_000_000_000_000_000, end_time_unix_nano=1_700_000_000_000_000_001)
                if rng.random() < 0.2:
                    span.attributes.add(key="openinference.span.kind", value=AnyValue(string_value="LLM"))
                if rng.random() < 0.03:
                    span.trace_id = rng.choice([bytes(16), b"\x01" * 8])
    return req


def test_split_equals_the_reference_split_on_random_requests() -> None:
    """The run-based assembly writes exactly the records (key, bytes, span count, RAG flag) of
    the span-by-span one it replaced (tests/collector/split_reference.py), on 600 random requests
    and the bench's request shapes."""
    from testkit.payloads import load_request
    from tests.collector.split_reference import reference_split

    rng = random.Random(20)
    bodies = [_random_request(rng).SerializeToString() for _ in range(600)]
    bodies += [load_request(20, 5, seed=i).SerializeToString() for i in range(3)]
    bodies += [rag_request(20, seed=i, plain_every=4, services=3).SerializeToString() for i in range(3)]
    multi_run = 0
    for body in bodies:
        for keep_all in (False, True):
            got, want = split_request(body, keep_all=keep_all), reference_split(body, keep_all=keep_all)
            assert [(r.key, r.value, r.spans, r.rag) for r in got.records] == \
                [(r.key, r.value, r.spans, r.rag) for r in want.records]
            assert (got.spans_total, got.spans_invalid, got.invalid_message) == \
                (want.spans_total, want.spans_invalid, want.invalid_message)
        multi_run += any(len(ExportTraceServiceRequest.FromString(r.value).resource_spans) > 1
                         or len(ExportTraceServiceRequest.FromString(r.value).resource_spans[0].scope_spans) > 1
                         for r in want.records)
    assert multi_run > 100  # traces spread over several scopes or resources were exercised


def _random_span(rng: random.Random, latest: int) -> bytes:
    """One span's bytes: the SDK layout or near it, with ids and times good, bad or at the bounds,
    and now and then a hand-built twist (a field repeated after the times, fields reordered, a
    multi-byte kind, the span cut short)."""
    lo = 946_684_800 * 10**9
    times = [0, 1, lo - 1, lo, lo + 1, lo + 2**40, latest - 2**40, latest - 1, latest, min(latest + 1, 2**64 - 1),
             2**63, 2**64 - 1, rng.randrange(lo, latest), rng.randrange(2**64), T0]
    span = Span(
        trace_id=rng.choice([rng.randbytes(16), bytes(16), bytes(15) + b"\x01", b"\x01" + bytes(15), b"\x01" * 8]),
        span_id=rng.choice([rng.randbytes(8), bytes(8), bytes(7) + b"\x01", b"\x01" + bytes(7), b"\x01" * 7, b""]),
        parent_span_id=rng.choice([b"", rng.randbytes(8), bytes(8), b"\x02" * 7]),
        name=rng.choice(["", "n", "x" * rng.randrange(200)]),
        kind=rng.choice([0, 1, 3, 5, 300]),  # type: ignore[arg-type]
        start_time_unix_nano=rng.choice(times), end_time_unix_nano=rng.choice(times),
    )
    if rng.random() < 0.2:
        span.trace_state = "k=v"
    for _ in range(rng.randrange(3)):
        span.attributes.add(key="llm.x", value=AnyValue(string_value="v"))
    if rng.random() < 0.2:
        span.status.code = 2  # type: ignore[assignment]
    raw = span.SerializeToString()
    twist = rng.random()
    if twist < 0.1:  # span_id again after the end time, before the attributes (last one wins)
        cut = raw.find(b"\x4a") if b"\x4a" in raw[18:] else len(raw)
        raw = raw[:cut] + b"\x12\x08" + rng.choice([bytes(8), b"\x03" * 8]) + raw[cut:]
    elif twist < 0.2:  # parent or start time repeated at the end
        raw += rng.choice([b"\x22\x03abc", b"\x39" + rng.choice(times).to_bytes(8, "little")])
    elif twist < 0.25 and len(raw) > 20:
        raw = raw[: rng.randrange(18, len(raw))]
    return raw


def test_the_one_match_fast_path_never_accepts_what_the_field_walk_rejects() -> None:
    """``_fast_check`` (one regex per span) against ``_check_span`` (the field walk) on 20,000
    random and hand-built spans and clocks: a match always means a good span, and SDK-shaped
    good spans (times more than 2**40 ns inside the bounds) do match."""
    from ragpulse.collector.split import MIN_START_NS, MalformedRequest, _check_span, _fast_check

    rng = random.Random(17)
    clocks = [NOW + 86_400 * 10**9, MIN_START_NS + 2**40 + 5, MIN_START_NS + 3 * 2**40 - 1, 2**64 - 1]
    clocks += [rng.randrange(MIN_START_NS, 2**64) for _ in range(4)]  # (one regex compiled per clock)
    matched = 0
    for i in range(20_000):
        latest = rng.choice(clocks)
        raw = _random_span(rng, latest)
        ok = _fast_check(latest)(raw, 0, len(raw)) is not None
        try:
            walk = _check_span(raw, 18, len(raw), MIN_START_NS, latest, True) if raw[:2] == b"\x0a\x10" else -1
        except (MalformedRequest, IndexError):
            walk = -1
        if ok:
            matched += 1
            assert walk == 0 and raw[2:18] != bytes(16), (i, raw.hex())
        if i % 7 == 0:  # a plain SDK span well inside the bounds always takes the fast path
            span = Span(trace_id=rng.randbytes(15) + b"\x01", span_id=rng.randbytes(7) + b"\x01",
                        parent_span_id=rng.choice([b"", b"\x01" * 8]), name="x" * rng.randrange(128),
                        kind=rng.randrange(6),  # type: ignore[arg-type]
                        start_time_unix_nano=rng.randrange(MIN_START_NS + 2**41, NOW),
                        end_time_unix_nano=rng.randrange(MIN_START_NS + 2**41, NOW))
            span.attributes.add(key="k", value=AnyValue(string_value="v"))
            good = span.SerializeToString()
            assert _fast_check(NOW + 86_400 * 10**9)(good, 0, len(good)) is not None, good.hex()
    assert matched > 100


def test_the_fast_path_gives_the_verdicts_of_its_optional_group_form() -> None:
    """``_fast_check`` writes its optional fields as ``(?:X|)``; the same pattern with ``(?:X)?``
    (its earlier, slower form) matches exactly the same spans, at the same end."""
    from ragpulse.collector.split import _NAMES, MIN_START_NS, _fast_check, _time_pattern

    rng = random.Random(23)
    clocks = [NOW + 86_400 * 10**9, MIN_START_NS + 2**40 + 5, 2**64 - 1]
    clocks += [rng.randrange(MIN_START_NS, 2**64) for _ in range(3)]
    optional_groups = {}
    for latest in clocks:
        times = _time_pattern(MIN_START_NS, latest)
        optional_groups[latest] = re.compile(
            rb"\x0a\x10(?:.{15}[^\x00]|(?!\x00{16}).{16})\x12\x08(?:.{7}[^\x00]|(?!\x00{8}).{8})"
            rb"(?:\x22\x08.{8})?(?:\x2a(?:" + _NAMES + rb"))?(?:\x30[\x00-\x7f])?"
            rb"\x39" + times + rb"\x41" + times + rb"(?![\x00-\x47])", re.S).match
    matched = 0
    for i in range(20_000):
        latest = rng.choice(clocks)
        raw = _random_span(rng, latest)
        start = rng.choice([0, 0, 0, 1])
        new = _fast_check(latest)(raw, start, len(raw))
        old = optional_groups[latest](raw, start, len(raw))
        assert (new and new.end()) == (old and old.end()), (i, raw.hex())
        matched += new is not None
    assert matched > 100


@pytest.mark.parametrize("a_b", [(0, 65535), (1, 65534), (256, 511), (255, 256), (300, 300), (0x0D23, 0x187A)])
def test_byte_ranges_cover_exactly_the_range(a_b: tuple[int, int]) -> None:
    from ragpulse.collector.split import _byte_ranges

    a, b = a_b
    rows = _byte_ranges(a, b, 2)
    covered = [v for v in range(65536) if any(r[0][0] <= v >> 8 <= r[0][1] and r[1][0] <= v & 255 <= r[1][1] for r in rows)]
    assert covered == list(range(a, b + 1))


def test_split_is_the_same_with_and_without_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whole requests of random spans (``_random_span``) split to the same records and the same
    rejections whether spans take the one-match fast path or always the field walk."""
    import re

    from ragpulse.collector import split as split_module

    rng = random.Random(18)
    bodies = []
    for _ in range(300):
        spans = [_random_span(rng, NOW + 86_400 * 10**9) for _ in range(rng.randrange(1, 12))]
        scope = b"".join(b"\x12" + _len(s) + s for s in spans)
        rs = b"\x12" + _len(scope) + scope
        bodies.append(b"\x0a" + _len(rs) + rs)

    def run() -> list:
        out = []
        for body in bodies:
            try:
                r = split_request(body, now_ns=NOW)
            except MalformedRequest as exc:
                out.append(str(exc))
                continue
            out.append(([(x.key, x.value, x.spans, x.rag) for x in r.records], r.spans_total, r.invalid,
                        r.invalid_message))
        return out

    fast = run()
    never = re.compile(rb"(?!)").match
    monkeypatch.setattr(split_module, "_fast_check", lambda latest_ns, oldest_ns: never)
    assert run() == fast
    assert sum(1 for f in fast if not isinstance(f, str) and f[2]) > 50  # rejections were exercised


@pytest.mark.parametrize("now_ns", [2**64, 2**70, 0, -1, 946_684_800 * 10**9])
def test_clocks_far_out_judge_times_as_the_field_walk_does(now_ns: int) -> None:
    body = _one_span_request(start_time_unix_nano=2**64 - 1).SerializeToString()
    result = split_request(body, now_ns=now_ns)
    accepted = now_ns + 86_400 * 10**9 >= 2**64 - 1  # only then is the year-2554 start plausible
    assert result.spans_invalid == (0 if accepted else 8 if now_ns < T0 else 1)


@pytest.mark.parametrize("reordered_fast_path", [False, True])
def test_starts_older_than_max_age_are_rejected_as_past_the_retention(
        reordered_fast_path: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 38, item 13: with ``max_age_ns`` (the scores table's TTL), a start older than that
    is rejected alone and named; just inside it is kept; the fast path and the field walk agree."""
    import ragpulse.collector.split as split_module

    if reordered_fast_path:  # every span takes the field walk
        never = re.compile(rb"(?!)").match
        monkeypatch.setattr(split_module, "_fast_check", lambda latest_ns, oldest_ns: never)
    day = 86_400 * 10**9
    for age_days, rejected in ((91, 1), (365 * 20, 1), (89, 0), (0, 0)):
        start = NOW - age_days * day
        body = _one_span_request(start_time_unix_nano=start,
                                 end_time_unix_nano=start + 10**9).SerializeToString()
        result = split_request(body, now_ns=NOW, max_age_ns=90 * day)
        assert result.spans_invalid == rejected, age_days
        assert result.invalid == ({"retention": 1} if rejected else {})
        assert ("older than the retention" in result.invalid_message) == bool(rejected)
        assert split_request(body, now_ns=NOW).spans_invalid == 0  # no max age: 2000-01-01 only


def _spans_by_group(req: ExportTraceServiceRequest) -> set[tuple[bytes, bytes, bytes]]:
    return {(rs.resource.SerializeToString() + rs.schema_url.encode(),
             ss.scope.SerializeToString() + ss.schema_url.encode(), span.SerializeToString())
            for rs in req.resource_spans for ss in rs.scope_spans for span in ss.spans}


def test_records_built_from_the_layout_hold_the_same_spans_under_the_same_resources() -> None:
    """``split_request(..., assemble=False)``: records carry the layout and runs, no message.
    ``assemble_trace`` builds each one's per-trace message byte for byte as the assembling split;
    ``assemble_traces`` builds one message for any group of them: exactly their spans, each under
    its own resource and scope (each of those once), never longer than the request."""
    from ragpulse.collector.split import assemble_trace, assemble_traces

    rng = random.Random(41)
    bodies = [_random_request(rng).SerializeToString() for _ in range(300)]
    bodies += [rag_request(20, seed=i, plain_every=4, services=3).SerializeToString() for i in range(3)]
    grouped_several = 0
    for body in bodies:
        lazy, eager = split_request(body, assemble=False), split_request(body)
        assert [(r.key, r.spans, r.rag) for r in lazy.records] == [(r.key, r.spans, r.rag) for r in eager.records]
        assert all(r.value is None and r.layout is not None for r in lazy.records)
        for a, b in zip(lazy.records, eager.records):
            if len(eager.records) > 1 or len(b.value) != len(body):  # not the untouched one-trace request
                assert assemble_trace(*a.layout) == b.value
        for _ in range(3):  # random groups, as partitions would make them
            group = [r for r in lazy.records if rng.random() < 0.5]
            if not group:
                continue
            value = assemble_traces(group[0].layout[0], [r.layout[1] for r in group])
            assert len(value) <= len(body)
            got = ExportTraceServiceRequest.FromString(value)
            want = set().union(*(_spans_by_group(ExportTraceServiceRequest.FromString(
                assemble_trace(*r.layout))) for r in group))
            assert _spans_by_group(got) == want
            assert sum(len(ss.spans) for rs in got.resource_spans for ss in rs.scope_spans) == \
                sum(r.spans for r in group)
            heads = [(rs.resource.SerializeToString(), rs.schema_url) for rs in got.resource_spans]
            assert len(heads) == len(set(heads))  # each resource once
            grouped_several += len(group) > 1
    assert grouped_several > 100
