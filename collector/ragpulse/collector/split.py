"""Split an OTLP ``ExportTraceServiceRequest`` into one request per trace id, on the wire bytes.

This is the collector's hot path. The OpenTelemetry Collector's kafka exporter with
``partition_traces_by_id: true`` runs ``batchpersignal.SplitTraces``: one
``ExportTraceServiceRequest`` per trace id, each keeping the resource and scope (with their
schema urls) its spans came from, keyed by the trace id as 32 lowercase hex characters. We
produce the same messages without building Python objects for spans: the request is first
validated by upb (``ParseFromString`` checks the whole wire format in C), then this module walks
the length-delimited frames of ``resource_spans`` → ``scope_spans`` → ``spans`` and copies each
span's bytes verbatim into its trace's message. Per span that is a few varint reads and a slice,
several times cheaper than copying protobuf sub-messages or ``json_format``.

RAG classification is done on the same bytes: a span attribute is serialized as
``0x4A <len> 0x0A <len> <key> ...`` (``Span.attributes`` → ``KeyValue.key``) and an event name as
``0x12 <len> <name>`` (``Span.Event.name``), so a ``bytes.find`` per marker over a span's byte
range finds the markers of every convention (:data:`RAG_MARKERS`, from
:data:`ragpulse.common.CONVENTIONS`; docs/instrumentation.md) without decoding attributes. A
false positive needs a string value holding those control bytes before a marker, and only means
a trace is kept; nothing is missed as long as the key is shorter than 128 bytes (always, here).

Each span is also checked on the same walk, cheaply (a few tag bytes after the trace id), and a
span that fails is rejected alone, answered as an OTLP partial success
(https://opentelemetry.io/docs/specs/otlp/#partial-success) naming the field: ``trace_id`` (16
bytes, not all zero), ``span_id`` (8 bytes, not all zero), ``parent_span_id`` (empty or 8 bytes)
and ``start_time_unix_nano``/``end_time_unix_nano`` (each from :data:`MIN_START_NS`,
2000-01-01, to :data:`MAX_FUTURE_NS` past the receiver's clock; an end before the start is
clock skew and passes); with ``max_age_ns``, a start older than that (the ``scores`` table's
TTL, 90 days by default) is rejected too, named as past the retention. The scorer would
otherwise drop the ids (the whole trace dead-lettered) and ClickHouse's TTL rows timed by such
times (a row that vanishes on insert).
When the trace id is the span's first field (every SDK), the check stops at the first field
numbered 9 or more (attributes): a hand-built span repeating ``span_id`` after its attributes is
judged by the first value, protobuf by the last; the scorer still drops such a span (counted).
A span laid out as SDKs write it is checked by one precompiled regular expression instead
(:func:`_fast_check`: ids, the time bounds as byte ranges of the top three bytes); a span it does
not match takes the field walk, which also names the field at fault.

References: opentelemetry-proto ``trace/v1/trace.proto`` field numbers; protobuf encoding
https://protobuf.dev/programming-guides/encoding/.
"""

from __future__ import annotations

import os
import re
import time
from binascii import hexlify
from dataclasses import dataclass, field
from difflib import SequenceMatcher

from ragpulse.collector.wire import MalformedRequest, read_varint
from ragpulse.common import RAG_MARKERS as _CONVENTION_MARKERS

try:  # the per-span loop in C (hatch_build.py builds it at install); this module is the fallback
    if os.environ.get("RAGPULSE_PURE_PYTHON"):
        raise ImportError("RAGPULSE_PURE_PYTHON is set")
    from ragpulse.collector import _native  # type: ignore[attr-defined]
except ImportError:
    _native = None

__all__ = [
    "MAX_FUTURE_NS",
    "MIN_START_NS",
    "RAG_MARKERS",
    "Layout",
    "MalformedRequest",
    "SplitResult",
    "TraceRecord",
    "assemble_trace",
    "assemble_traces",
    "split_request",
]

RAG_MARKERS: tuple[str, ...] = _CONVENTION_MARKERS
"""Attribute-key and event-name prefixes that make a span a RAG/LLM span: every convention's
markers and shared prefixes, declared in :mod:`ragpulse.common.conventions`, most common first
(a RAG span usually stops at the first ``find``)."""

_Needle = tuple[bytes, tuple[tuple[bytes, int, bool], ...]]


def _needles(markers: tuple[str, ...]) -> tuple[_Needle, ...]:
    """What :func:`_is_rag_span` looks for: ``(needle, ((marker, offset of the needle in it,
    whether the marker is the needle), ...))`` in marker order. Markers sharing 3 bytes or more
    (``gen_ai.`` and ``ai.observability.`` share ``ai.``, the two vector-DB events ``.result``)
    are found by what they share, together: one ``find`` less each, for every span of a non-RAG
    trace."""
    groups: list[tuple[bytes, list[bytes]]] = []
    for m in (m.encode() for m in markers):
        for n, (needle, group) in enumerate(groups):
            match = SequenceMatcher(None, needle, m, autojunk=False).find_longest_match()
            if match.size >= 3:
                groups[n] = (needle[match.a:match.a + match.size], group + [m])
                break
        else:
            groups.append((m, [m]))
    return tuple((needle, tuple((m, m.index(needle), m == needle) for m in group))
                 for needle, group in groups)


_NEEDLES = _needles(RAG_MARKERS)

NATIVE: bool = _native is not None
"""Whether the per-span loop runs in C (``ragpulse.collector._native``, the same records)."""
if _native is not None:
    _native.configure(_NEEDLES, MalformedRequest)

MIN_START_NS = 946_684_800 * 10**9
"""Earliest accepted ``start_time_unix_nano`` and ``end_time_unix_nano``: 2000-01-01T00:00:00Z. Zero (unset), 1 ns and
other pre-2000 times are clock bugs; no store keeps them (``rag.scores`` has a 90-day TTL)."""
MAX_FUTURE_NS = 86_400 * 10**9
"""How far past the receiver's clock a start or end time may be: one day, for skewed clocks.
``2**63`` and ``2**64 - 1`` ns (year 2262 and 2554) are far outside it."""


def _is_rag_span(buf: bytes, start: int, end: int) -> bool:
    """Whether the span's ``buf[start:end]`` (the whole span, or its fields from the attributes
    on) has a RAG attribute key or event name.

    ``bytes.find`` per needle (:data:`_NEEDLES`; C speed, no decoding); the hit must be one of
    the needle's markers and the bytes before it the framing of an attribute key or an event
    name: a span attribute (``Span.attributes``, tag 0x4A) or event attribute
    (``Event.attributes``, tag 0x1A) is ``tag, KeyValue length, 0x0A, key length, key``; an
    event name is ``0x12, length, name``. Requiring that framing keeps string *values* that
    merely start with "llm." (``AnyValue.string_value`` is also tag 0x0A) out.
    """
    find = buf.find
    for needle, markers in _NEEDLES:
        i = find(needle, start, end)
        while i >= 0:
            for marker, offset, whole in markers:
                k = i - offset
                if not whole and (k < start or not buf.startswith(marker, k)):
                    continue
                length = buf[k - 1]
                if len(marker) <= length < 0x80 and k + length <= end:
                    tag = buf[k - 2]
                    if tag == 0x12:
                        return True
                    if tag == 0x0A:
                        j = k - 4  # skip the KeyValue length varint backwards: last byte < 0x80
                        if buf[k - 3] < 0x80:
                            limit = j - 4
                            while j > limit and buf[j] >= 0x80:
                                j -= 1
                            if buf[j] in (0x4A, 0x1A):
                                return True
            i = find(needle, i + 1, end)
    return False


@dataclass(slots=True)
class TraceRecord:
    """One Kafka record: all spans of one trace id from one request (or, grouped by
    ``producer.records=per_partition``, of several). Not frozen: a frozen dataclass's
    ``__init__`` costs 3x as much (0.5 vs 0.16 us), and the collector makes one per trace;
    treat it as immutable."""

    key: bytes  # trace id as 32 lowercase hex characters, ASCII
    # Serialized ExportTraceServiceRequest holding only this trace; None from
    # ``split_request(..., assemble=False)``: ``layout`` says where its spans are instead.
    value: bytes | None
    spans: int
    rag: bool  # the request held at least one RAG span of this trace
    layout: tuple[Layout, list] | None = None  # (the request's layout, this trace's runs)


@dataclass(slots=True)
class SplitResult:
    """Outcome of :func:`split_request`."""

    records: list[TraceRecord] = field(default_factory=list)
    spans_total: int = 0
    spans_invalid: int = 0  # spans rejected by the per-span check (any field): see ``invalid``
    invalid: dict[str, int] = field(default_factory=dict)  # field name -> spans rejected for it
    invalid_message: str = ""


@dataclass(slots=True)
class Layout:
    """Where a split request's traces are, for records built later (:func:`assemble_trace`,
    :func:`assemble_traces`): the request's bytes, and per resource (and scope) the frames around
    its spans. A trace's runs are ``[span count, [resource index, scope index, first frame
    start, last frame end], ...]``."""

    view: memoryview
    size: int  # bytes of the request: a record of any of its traces is at most this long
    resources: list[tuple[bytes, bytes]]  # per resource: the frames before and after its scopes
    scopes: list[list[tuple[bytes, bytes]]]  # per resource, per scope: before and after its spans


_ZERO_TRACE = bytes(16)
_ZERO_SPAN = bytes(8)


def _byte_ranges(a: int, b: int, width: int) -> list[tuple[tuple[int, int], ...]]:
    """``[a, b]`` over ``width``-byte big-endian numbers as rows of per-byte ranges (most
    significant first): a number is in ``[a, b]`` iff its bytes fall in one row's ranges."""
    if width == 1:
        return [((a, b),)]
    unit = 256 ** (width - 1)
    a_hi, a_rest = divmod(a, unit)
    b_hi, b_rest = divmod(b, unit)
    if a_hi == b_hi:
        return [((a_hi, a_hi), *row) for row in _byte_ranges(a_rest, b_rest, width - 1)]
    rows = []
    first, last = a_hi, b_hi
    if a_rest:
        rows += [((a_hi, a_hi), *row) for row in _byte_ranges(a_rest, unit - 1, width - 1)]
        first += 1
    if b_rest != unit - 1:
        last -= 1
    if first <= last:
        rows.append(((first, last), *((0, 255),) * (width - 1)))
    if b_rest != unit - 1:
        rows += [((b_hi, b_hi), *row) for row in _byte_ranges(0, b_rest, width - 1)]
    return rows


def _byte_class(a: int, b: int) -> bytes:
    return b"." if (a, b) == (0, 255) else b"\\x%02x" % a if a == b else b"[\\x%02x-\\x%02x]" % (a, b)


def _time_pattern(lo: int, hi: int) -> bytes:
    """A fixed64 (8 bytes, little-endian) whose top 3 bytes, as a number, lie strictly between
    ``lo >> 40`` and ``hi >> 40``: then the value is inside ``[lo, hi]`` for sure (it may miss
    values within 2**40 ns, 18 minutes, of a bound; the field walk judges those)."""
    first, last = (lo >> 40) + 1, min((hi >> 40) - 1, (1 << 24) - 1)  # a fixed64 has 3 top bytes
    if first > last:
        return rb"(?!)"
    rows = _byte_ranges(first, last, 3)
    rows.reverse()  # the rows near ``hi`` (recent times) first
    alts = [b"".join(_byte_class(*r) for r in reversed(row)) for row in rows]  # little-endian
    return rb".{5}(?:" + b"|".join(alts) + rb")"


# After the trace id, the fields as SDKs write them: a non-zero 8-byte span_id, an optional 8-byte
# parent_span_id, an optional name (shorter than 128 bytes), an optional one-byte kind, start and end
# times (tags 0x39, 0x41), then the span's end or a field numbered 9 or more, where
# _check_span's walk stops too. One match per span; its branches on the name's length byte
# are skipped on that byte alone. The optional fields are written ``(?:X|)``, not ``(?:X)?``: the
# same matches tried in the same order, but a branch where ``?`` on a group takes sre's general
# repeat machinery (0.36 -> 0.28 µs per match call on the load tool's spans).
_NAMES = b"|".join(re.escape(bytes((n,))) + b".{%d}" % n for n in range(128))
_FAST: dict[tuple[int, int], re.Pattern[bytes]] = {}


def _fast_check(latest_ns: int, oldest_ns: int = MIN_START_NS):
    """``match(buf, pos, end)`` of the span layout above with the start inside
    ``[oldest_ns, latest_ns]`` and the end inside ``[MIN_START_NS, latest_ns]``: a match means
    :func:`_check_span` returns 0; no match means nothing (the walk decides). Compiled once per
    2**40 ns of ``latest_ns`` and of ``oldest_ns``."""
    key = (latest_ns >> 40, oldest_ns >> 40)
    pattern = _FAST.get(key)
    if pattern is None:
        starts = _time_pattern(oldest_ns, latest_ns)
        times = _time_pattern(MIN_START_NS, latest_ns)
        pattern = re.compile(
            rb"\x0a\x10(?:.{15}[^\x00]|(?!\x00{16}).{16})\x12\x08(?:.{7}[^\x00]|(?!\x00{8}).{8})"
            rb"(?:\x22\x08.{8}|)(?:\x2a(?:" + _NAMES + rb")|)(?:\x30[\x00-\x7f]|)"
            rb"\x39" + starts + rb"\x41" + times + rb"(?![\x00-\x47])", re.S)
        if len(_FAST) > 16:
            _FAST.clear()
        _FAST[key] = pattern
    return pattern.match
# Why a span is rejected, by the field at fault (index = the code _check_span returns).
_REASONS = (
    "",
    "trace_id",
    "span_id",
    "parent_span_id",
    "start_time_unix_nano",
    "end_time_unix_nano",
    "retention",
)
_EXPLAIN = {
    "trace_id": "without a valid 16-byte non-zero trace_id",
    "span_id": "without a valid 8-byte non-zero span_id",
    "parent_span_id": "with a parent_span_id that is neither empty nor 8 bytes",
    "start_time_unix_nano": "with an implausible start_time_unix_nano "
    "(before 2000-01-01 or more than a day ahead of the receiver's clock)",
    "end_time_unix_nano": "with an implausible end_time_unix_nano "
    "(before 2000-01-01 or more than a day ahead of the receiver's clock)",
    "retention": "with a start_time_unix_nano older than the retention "
    "(otlp.max_span_age_days, the scores table's TTL: their rows would be deleted on insert)",
}


def _encode_varint(value: int) -> bytes:
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


# The varints of lengths below 2**14 (a one-run trace's record needs two per trace), by value.
_VARINTS = [_encode_varint(n) for n in range(1 << 14)]


def _fields(buf: bytes, start: int, end: int):
    """Yield ``(field_number, wire_type, value_start, value_end, frame_start)`` for a message range."""
    pos = start
    while pos < end:
        frame = pos
        tag, pos = read_varint(buf, pos)
        wire = tag & 7
        if wire == 2:
            length, pos = read_varint(buf, pos)
            vend = pos + length
        elif wire == 0:
            _, vend = read_varint(buf, pos)
        elif wire == 1:
            vend = pos + 8
        elif wire == 5:
            vend = pos + 4
        else:  # groups (3, 4) are not used by OTLP; upb would have rejected garbage already
            raise MalformedRequest(f"unsupported wire type {wire}")
        if vend > end:
            raise MalformedRequest("field overruns its message")
        yield tag >> 3, wire, pos, vend, frame
        pos = vend


def _span_trace_id(buf: bytes, start: int, end: int) -> bytes | None:
    # Every SDK serializes fields in number order, so trace_id (field 1, 16 bytes) comes first:
    # tag 0x0A, length 0x10. Fall back to a scan for hand-built or reordered messages.
    if end - start >= 18 and buf[start] == 0x0A and buf[start + 1] == 0x10:
        return buf[start + 2 : start + 18]
    found = None
    for number, wire, vstart, vend, _ in _fields(buf, start, end):
        if number == 1 and wire == 2:
            found = buf[vstart:vend]  # last one wins, as in protobuf merging
    return found


def _check_span(buf: bytes, pos: int, end: int, lo: int, hi: int, ordered: bool,
                oldest: int = MIN_START_NS, stop: list[int] | None = None) -> int:
    """0 if the span's ids and times are acceptable, else the index in ``_REASONS``.

    Walks the span's fields from ``pos``; with ``ordered`` (the trace id was the first field, as
    every SDK writes it) it stops at the first field numbered 9 or more, so the attributes and
    events are never walked. Fields 1-8 have one-byte tags (``number << 3 | wire``). ``stop``,
    if given, receives where the walk stopped (with ``ordered``: where the attributes start)."""
    span_id = None
    parent = b""
    start = finish = 0
    if ordered and pos + 10 <= end and buf[pos] == 0x12 and buf[pos + 1] == 0x08:
        span_id = buf[pos + 2 : pos + 10]  # span_id as SDKs write it, right after trace_id
        pos += 10
    while pos < end:
        tag = buf[pos]
        if ordered and tag >= 0x48:  # field 9 (attributes) or later, or a multi-byte tag
            break
        if tag == 0x39:  # start_time_unix_nano, fixed64
            start = int.from_bytes(buf[pos + 1 : pos + 9], "little")
            pos += 9
            continue
        if tag == 0x41:  # end_time_unix_nano, fixed64
            finish = int.from_bytes(buf[pos + 1 : pos + 9], "little")
            pos += 9
            continue
        if tag == 0x30 and buf[pos + 1] < 0x80:  # kind, a one-byte varint
            pos += 2
            continue
        if tag == 0x12 or tag == 0x22 or tag == 0x2A or tag == 0x1A or tag == 0x0A:
            n = buf[pos + 1]
            if n < 0x80:
                vstart = pos + 2
            else:
                n, vstart = read_varint(buf, pos + 1)
            pos = vstart + n
            if tag == 0x12:
                span_id = buf[vstart:pos]
            elif tag == 0x22:
                parent = buf[vstart:pos]
            continue
        _, _, _, vend, _ = next(_fields(buf, pos, end))  # any other field: skipped
        pos = vend
    if pos > end:
        raise MalformedRequest("span field overruns the span")
    if stop is not None:
        stop.append(pos)
    if span_id is None or len(span_id) != 8 or span_id == _ZERO_SPAN:
        return 2
    if len(parent) not in (0, 8):
        return 3
    if not lo <= start <= hi:
        return 4
    if not lo <= finish <= hi:
        return 5
    if start < oldest:
        return 6
    return 0


def _frame(tag: bytes, body: list[bytes | memoryview]) -> bytes:
    payload = b"".join(body)
    n = len(payload)
    return tag + (_VARINTS[n] if n < 16384 else _encode_varint(n)) + payload


def split_request(buf: bytes, *, keep_all: bool = False, now_ns: int | None = None,
                  max_age_ns: int | None = None, assemble: bool = True) -> SplitResult:
    """Split a serialized (and already upb-validated) request into per-trace records.

    Records come in order of each trace's first span. ``keep_all`` skips RAG classification
    (every record gets ``rag=True``). Spans failing the per-span check (module docstring) are
    left out and counted in ``spans_invalid``/``invalid``; ``now_ns`` is the clock the start
    time is checked against (default: ``time.time_ns()``); ``max_age_ns``, if set, is the oldest
    start accepted before ``now_ns`` (reason ``retention``). Pure function: thread-safe, blocks
    only on CPU. Raises :class:`MalformedRequest` on inconsistent framing (only possible when
    the caller skipped validation). With ``assemble=False`` the records carry no value but a
    :class:`Layout` and their runs: a consumer that groups traces (per-partition records) builds
    its own records with :func:`assemble_traces`, without a message per trace first.
    """
    if now_ns is None:
        now_ns = time.time_ns()
    try:
        oldest = MIN_START_NS if max_age_ns is None else max(MIN_START_NS, now_ns - max_age_ns)
        return _split(buf, keep_all, now_ns + MAX_FUTURE_NS, oldest, assemble)
    except IndexError as exc:  # a varint ran past the end of the buffer
        raise MalformedRequest("truncated message") from exc


def _split(buf: bytes, keep_all: bool, latest_ns: int, oldest_ns: int = MIN_START_NS,
           assemble: bool = True) -> SplitResult:
    """One walk over the request's wire bytes: group spans by trace (checking each on the way),
    then build one record per trace. Raises :class:`MalformedRequest` on broken framing.

    Long because: this is the collector's per-span hot path (CPU per span, docs/benchmarks.md);
    the loop parses frames inline, without a function call per span, so it stays in one frame.
    """
    result = SplitResult()
    # trace id -> [span count, run, run, ...]: a run is [resource index, scope index, first frame
    # start, last frame end] of spans of the trace that follow each other in the request.
    traces: dict[bytes, list] = {}
    rag: set[bytes] = set()
    # Frames of the fields around the repeated one, kept verbatim and in field-number order:
    # per resource (resource | scope_spans... | schema_url), per scope (scope | spans... | schema_url).
    resource_heads: list[tuple[list[bytes], list[bytes]]] = []
    scope_heads: list[list[tuple[list[bytes], list[bytes]]]] = []
    total = 0
    rejected = [0] * len(_REASONS)
    lo, hi = MIN_START_NS, latest_ns
    span_ok = _fast_check(latest_ns, oldest_ns)
    check_rag = not keep_all
    # In C while the bounds fit its 64-bit times (clocks before year 2554 and after 1970).
    native = (_native.scan_spans if _native is not None and 0 <= latest_ns < 2**64
              and oldest_ns < 2**64 else None)
    for number, wire, rs_start, rs_end, _ in _fields(buf, 0, len(buf)):
        if number != 1 or wire != 2:
            continue  # ExportTraceServiceRequest has only resource_spans; pdata drops unknowns too
        ri = len(resource_heads)
        head: tuple[list[bytes], list[bytes]] = ([], [])
        scopes: list[tuple[list[bytes], list[bytes]]] = []
        resource_heads.append(head)
        scope_heads.append(scopes)
        for rnum, rwire, ss_start, ss_end, rframe in _fields(buf, rs_start, rs_end):
            if rnum != 2 or rwire != 2:
                head[rnum > 2].append(buf[rframe:ss_end])  # resource, schema_url, unknowns
                continue
            si = len(scopes)
            shead: tuple[list[bytes], list[bytes]] = ([], [])
            scopes.append(shead)
            if native is not None:  # the loop below, in C (the same checks, runs and RAG set)
                total += native(buf, ss_start, ss_end, ri, si, latest_ns, oldest_ns, check_rag,
                                traces, rag, rejected, shead)
                continue
            # The hot loop (one iteration per span) parses frames inline: a span is tag 0x12
            # (field 2, LEN) with a one- or two-byte length for all but very large spans.
            pos = ss_start
            while pos < ss_end:
                if buf[pos] != 0x12:
                    snum, _, _, fend, sframe = next(_fields(buf, pos, ss_end))
                    shead[snum > 2].append(buf[sframe:fend])  # scope, schema_url, unknowns
                    pos = fend
                    continue
                sframe = pos
                b = buf[pos + 1]
                if b < 0x80:
                    length, sp_start = b, pos + 2
                else:
                    b2 = buf[pos + 2]
                    if b2 < 0x80:
                        length, sp_start = (b & 0x7F) | (b2 << 7), pos + 3
                    else:
                        length, sp_start = read_varint(buf, pos + 1)
                sp_end = pos = sp_start + length
                if sp_end > ss_end:
                    raise MalformedRequest("span overruns its scope")
                total += 1
                ok = span_ok(buf, sp_start, sp_end)
                if ok is not None:  # the layout SDKs write, valid
                    trace_id = buf[sp_start + 2 : sp_start + 18]
                    rag_from = ok.end()
                else:  # another layout, or a value to reject: the field walk names the field
                    rag_from = sp_start
                    if length >= 18 and buf[sp_start] == 0x0A and buf[sp_start + 1] == 0x10:
                        trace_id = buf[sp_start + 2 : sp_start + 18]
                        stop: list[int] = []
                        why = _check_span(buf, sp_start + 18, sp_end, lo, hi, True, oldest_ns, stop)
                        rag_from = stop[0]  # set by every walk that returns
                    else:
                        trace_id = _span_trace_id(buf, sp_start, sp_end)
                        if trace_id is None or len(trace_id) != 16:
                            rejected[1] += 1
                            continue
                        why = _check_span(buf, sp_start, sp_end, lo, hi, False, oldest_ns)
                    if trace_id == _ZERO_TRACE:
                        rejected[1] += 1
                        continue
                    if why:
                        rejected[why] += 1
                        continue
                entry = traces.get(trace_id)
                if entry is None:
                    traces[trace_id] = [1, [ri, si, sframe, sp_end]]
                else:
                    entry[0] += 1
                    run = entry[-1]
                    if run[3] == sframe:  # right after the trace's previous span (same scope:
                        run[3] = sp_end  # a scope or resource boundary puts bytes between)
                    else:
                        entry.append([ri, si, sframe, sp_end])
                # The RAG markers are looked for from the attributes on where the trace id came
                # first (the fast check's match, or the ordered walk, ends there: ids, name and
                # times hold none), else from the span's start.
                if check_rag and trace_id not in rag and _is_rag_span(buf, rag_from, sp_end):
                    rag.add(trace_id)
    result.spans_total = total
    result.spans_invalid = sum(rejected)
    if result.spans_invalid:
        result.invalid = {_REASONS[i]: n for i, n in enumerate(rejected) if n}
        result.invalid_message = "; ".join(
            f"{n} span(s) {_EXPLAIN[name]}" for name, n in result.invalid.items()
        )
    records = result.records
    if assemble and len(traces) == 1 and not result.spans_invalid and _is_canonical(buf):
        # One trace: the request already is the per-trace message; forward it untouched.
        ((trace_id, entry),) = traces.items()
        records.append(TraceRecord(hexlify(trace_id), bytes(buf), entry[0], keep_all or trace_id in rag))
        return result
    layout = Layout(
        memoryview(buf), len(buf),
        [(b"".join(pre), b"".join(post)) for pre, post in resource_heads],
        [[(b"".join(pre), b"".join(post)) for pre, post in scopes] for scopes in scope_heads],
    )
    if not assemble:
        for trace_id, entry in traces.items():
            records.append(TraceRecord(hexlify(trace_id), None, entry[0], keep_all or trace_id in rag,
                                       (layout, entry)))
        return result
    for trace_id, entry in traces.items():
        records.append(TraceRecord(hexlify(trace_id), assemble_trace(layout, entry), entry[0],
                                   keep_all or trace_id in rag))
    return result


def assemble_trace(layout: Layout, entry: list) -> bytes:
    """One trace's ``ExportTraceServiceRequest`` from its runs (``entry``: see :class:`Layout`),
    as otelcol's ``SplitTraces`` builds it: runs of the same resource (and scope) next to each
    other share one ``ResourceSpans`` (``ScopeSpans``)."""
    if len(entry) == 2:  # one run: the usual case, one resource, one scope, one slice
        ri, si, start, end = entry[1]
        return _one_scope(layout.resources[ri], layout.scopes[ri][si], [layout.view[start:end]],
                          end - start)
    return _assemble(layout.view, entry, layout.resources, layout.scopes)


def _one_scope(resource: tuple[bytes, bytes], scope: tuple[bytes, bytes],
               spans: list[bytes | memoryview], spans_len: int) -> bytes:
    """An ``ExportTraceServiceRequest`` of one ``ResourceSpans`` with one ``ScopeSpans`` holding
    ``spans`` (``spans_len`` bytes in all), written in one join: the lengths are known ahead."""
    r_pre, r_post = resource
    s_pre, s_post = scope
    scope_len = len(s_pre) + spans_len + len(s_post)
    scope_varint = _VARINTS[scope_len] if scope_len < 16384 else _encode_varint(scope_len)
    rs_len = len(r_pre) + 1 + len(scope_varint) + scope_len + len(r_post)
    return b"".join((b"\x0a", _VARINTS[rs_len] if rs_len < 16384 else _encode_varint(rs_len),
                     r_pre, b"\x12", scope_varint, s_pre, *spans, s_post, r_post))


def assemble_traces(layout: Layout, entries: list[list]) -> bytes:
    """One ``ExportTraceServiceRequest`` holding every span of the traces ``entries`` (their
    runs, from records of one :func:`split_request` with ``assemble=False``): per resource one
    ``ResourceSpans``, per scope one ``ScopeSpans``, in the order they first appear, the spans of
    each in trace order. At most the request's size (``Layout.size``): each resource's and
    scope's frames once, the spans a subset."""
    view = layout.view
    if len(layout.resources) == 1 and len(layout.scopes[0]) == 1:  # the usual request
        spans: list[bytes | memoryview] = []
        spans_len = 0
        for entry in entries:
            for run in entry[1:]:
                spans.append(view[run[2]:run[3]])
                spans_len += run[3] - run[2]
        return _one_scope(layout.resources[0], layout.scopes[0][0], spans, spans_len)
    grouped: dict[int, dict[int, list[memoryview]]] = {}
    for entry in entries:
        for ri, si, start, end in entry[1:]:
            grouped.setdefault(ri, {}).setdefault(si, []).append(view[start:end])
    out: list[bytes] = []
    for ri, scopes in grouped.items():
        r_pre, r_post = layout.resources[ri]
        body: list[bytes | memoryview] = [r_pre]
        for si, in_scope in scopes.items():
            s_pre, s_post = layout.scopes[ri][si]
            body.append(_frame(b"\x12", [s_pre, *in_scope, s_post]))
        body.append(r_post)
        out.append(_frame(b"\x0a", body))
    return b"".join(out)


def _is_canonical(buf: bytes) -> bool:
    # Only resource_spans frames at top level (no unknown fields that splitting would drop).
    return all(number == 1 and wire == 2 for number, wire, *_ in _fields(buf, 0, len(buf)))


def _assemble(
    view: memoryview,
    entry: list,
    resources: list[tuple[bytes, bytes]],
    scopes: list[list[tuple[bytes, bytes]]],
) -> bytes:
    """One trace's message from its runs (``entry[1:]``, in request order): runs of the same
    resource (and scope) next to each other share one ``ResourceSpans`` (``ScopeSpans``), as
    otelcol's ``SplitTraces`` groups them."""
    out: list[bytes | memoryview] = []
    i = 1
    n = len(entry)
    while i < n:
        ri = entry[i][0]
        r_pre, r_post = resources[ri]
        resource_body: list[bytes | memoryview] = [r_pre]
        while i < n and entry[i][0] == ri:
            si = entry[i][1]
            s_pre, s_post = scopes[ri][si]
            scope_body: list[bytes | memoryview] = [s_pre]
            while i < n and entry[i][0] == ri and entry[i][1] == si:
                _, _, start, end = entry[i]
                scope_body.append(view[start:end])
                i += 1
            scope_body.append(s_post)
            resource_body.append(_frame(b"\x12", scope_body))
        resource_body.append(r_post)
        out.append(_frame(b"\x0a", resource_body))
    return b"".join(out)
