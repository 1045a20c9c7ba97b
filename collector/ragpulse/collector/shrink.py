"""Fit an oversized per-trace record under the Kafka record limit by cutting its longest values.

A trace whose record is larger than ``producer.max_request_size`` (1 MB by default, as Kafka's
``message.max.bytes``) cannot be produced whole. Dropping it loses a whole RAG query because one
retrieved document was huge; instead the longest string values (attributes of spans, events and
links, at any nesting depth, and the resource's) are cut to a common length, just short enough
for the record to fit, each ending in a visible marker. Everything else is kept as sent: ids,
times, names, the other attributes, short values. The scorer then judges the trace with the
shortened text (a cut context can only make a claim look less supported).

This path is rare and runs on decoded protobuf messages (upb), not on the hot wire-level path of
:mod:`.split`. Thread-safe: pure functions.
"""

from __future__ import annotations

from collections.abc import Iterator

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

__all__ = ["MARKER", "ShrinkResult", "shrink_request"]

MARKER = " …[truncated by ragpulse: {n} bytes]"
"""Appended to every cut value; ``{n}`` is how many UTF-8 bytes were removed."""

_MIN_KEEP = 256  # never cut a value shorter than this: short values are not the problem


class ShrinkResult:
    """The shrunk record value and what was cut (``None`` value: it cannot be made to fit)."""

    __slots__ = ("bytes_removed", "value", "values_cut")

    def __init__(self, value: bytes | None, values_cut: int, bytes_removed: int) -> None:
        self.value = value
        self.values_cut = values_cut
        self.bytes_removed = bytes_removed


def _string_values(values: Iterator[AnyValue]) -> Iterator[AnyValue]:
    for v in values:
        kind = v.WhichOneof("value")
        if kind in ("string_value", "bytes_value"):
            yield v
        elif kind == "array_value":
            yield from _string_values(iter(v.array_value.values))
        elif kind == "kvlist_value":
            yield from _string_values(kv.value for kv in v.kvlist_value.values)


def _attributes(req: ExportTraceServiceRequest) -> Iterator[KeyValue]:
    for rs in req.resource_spans:
        yield from rs.resource.attributes
        for ss in rs.scope_spans:
            for span in ss.spans:
                yield from span.attributes
                for event in span.events:
                    yield from event.attributes
                for link in span.links:
                    yield from link.attributes


def _size(v: AnyValue) -> int:
    return len(v.string_value.encode()) if v.WhichOneof("value") == "string_value" \
        else len(v.bytes_value)


def shrink_request(value: bytes, limit: int) -> ShrinkResult:
    """``value`` (a serialized ``ExportTraceServiceRequest``) cut to at most ``limit`` bytes.

    Values are cut to a common length ``cap`` (the largest that makes the record fit), so one
    huge document loses its tail while every normal-sized value stays whole. Raises nothing:
    a value that cannot be parsed, or a record that does not fit even with every long value
    cut (e.g. tens of thousands of spans), comes back as ``ShrinkResult(None, ...)``.
    """
    try:
        req = ExportTraceServiceRequest.FromString(value)
    except Exception:  # the record was validated before; never fail the request over it
        return ShrinkResult(None, 0, 0)
    strings = [v for v in _string_values(kv.value for kv in _attributes(req))]
    sizes = [_size(v) for v in strings]
    # Each cut value gains a marker: reserve room for it.
    excess = len(value) - limit + len(MARKER) + 16
    for _ in range(3):  # a marker or a varint may still tip it over: cut a little more
        cap = _largest_cap(sizes, excess)
        if cap is None:
            return ShrinkResult(None, 0, 0)
        cut, removed, out = _cut(req, strings, cap)
        if len(out) <= limit:
            return ShrinkResult(out, cut, removed)
        excess += len(out) - limit + 1024
        req = ExportTraceServiceRequest.FromString(value)
        strings = [v for v in _string_values(kv.value for kv in _attributes(req))]
    return ShrinkResult(None, 0, 0)


def _largest_cap(sizes: list[int], excess: int) -> int | None:
    """The largest length ``cap`` >= ``_MIN_KEEP`` with ``sum(max(0, s - cap)) >= excess``
    (binary search: the saving only shrinks as the cap grows); ``None`` when even the
    smallest cap does not save enough."""

    def saved(cap: int) -> int:
        return sum(s - cap for s in sizes if s > cap)

    if not sizes or saved(_MIN_KEEP) < excess:
        return None
    lo, hi = _MIN_KEEP, max(sizes)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if saved(mid) >= excess:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _cut(req: ExportTraceServiceRequest, strings: list[AnyValue], cap: int) -> tuple[int, int, bytes]:
    cut = removed = 0
    for v in strings:
        size = _size(v)
        if size <= cap:
            continue
        if v.WhichOneof("value") == "string_value":
            kept = v.string_value.encode()[:cap].decode("utf-8", "ignore")
            n = size - len(kept.encode())
            v.string_value = kept + MARKER.format(n=n)
        else:
            n = size - cap
            v.bytes_value = v.bytes_value[:cap]
        cut += 1
        removed += n
    return cut, removed, req.SerializeToString()
