"""Fit an oversized per-trace record under the Kafka record limit by cutting its longest values.

A trace whose record is larger than ``producer.max_request_size`` (1 MB by default, as Kafka's
``message.max.bytes``) cannot be produced whole. Dropping it loses a whole RAG query because one
retrieved document was huge; instead the longest string values (attributes of spans, events and
links, at any nesting depth, and the resource's) are cut to a common length, just short enough
for the record to fit, each ending in a visible marker. Everything else is kept as sent: ids,
times, names, the other attributes, short values. The scorer then judges the trace with the
shortened text (a cut context can only make a claim look less supported).

When cutting long values is not enough (ten thousand short contexts are as large as one huge
one, and no value is long), the last items of the trace's lists are dropped instead, highest
index first, until the record fits: span attributes whose key holds a list index
(``retrieval.documents.9999.document.content``, ``llm.input_messages.3.message.content``,
``gen_ai.prompt.12.content``), span events (vector-database results), and items of array
values. So both keep the first contexts that fit, as the scorer does
(``extraction.max_contexts``). Each span's ``dropped_attributes_count`` /
``dropped_events_count`` grow by what it lost, as OTLP specifies for dropped data.

This path is rare and runs on decoded protobuf messages (upb), not on the hot wire-level path of
:mod:`.split`. Its work is bounded by items: a record with more than :data:`MAX_LIST_ITEMS`
items that could be dropped is rejected without listing them (counted first, at a few Python
operations per attribute; listing costs ~200 bytes and ~2 µs per item), one shrink runs at a
time per process (each holds a decoded copy of its record; under the GIL two would interleave,
not run in parallel), and a record is decoded once per step, never twice at once. Thread-safe.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

__all__ = ["MARKER", "MAX_LIST_ITEMS", "ShrinkResult", "shrink_request"]

MARKER = " …[truncated by ragpulse: {n} bytes]"
"""Appended to every cut value; ``{n}`` is how many UTF-8 bytes were removed."""

_MIN_KEEP = 256  # never cut a value shorter than this: short values are not the problem

MAX_LIST_ITEMS = 100_000
"""Most droppable list items (indexed attributes, events, array items) a record may hold for the
list-item drop; a record with more is rejected (the scorer reads the first 64 contexts)."""

_ONE_AT_A_TIME = threading.Lock()


class ShrinkResult:
    """The shrunk record value and what was cut (``None`` value: it cannot be made to fit):
    ``values_cut`` long values cut, ``items_dropped`` list items (indexed attributes, events,
    array items) dropped from the end of their lists."""

    __slots__ = ("bytes_removed", "items_dropped", "value", "values_cut")

    def __init__(self, value: bytes | None, values_cut: int, bytes_removed: int,
                 items_dropped: int = 0) -> None:
        self.value = value
        self.values_cut = values_cut
        self.bytes_removed = bytes_removed
        self.items_dropped = items_dropped


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
    huge document loses its tail while every normal-sized value stays whole. If that cannot
    save enough, the last list items are dropped instead (module docstring), values whole; if
    that cannot either, both. Raises nothing: a value that cannot be parsed, or a record that
    does not fit even so (e.g. tens of thousands of spans), comes back as
    ``ShrinkResult(None, ...)``.
    """
    with _ONE_AT_A_TIME:
        try:
            cut = _cut_values(ExportTraceServiceRequest.FromString(value), value, limit)
        except Exception:  # the record was validated before; never fail the request over it
            return ShrinkResult(None, 0, 0)
        if cut.value is not None:
            return cut
        req = ExportTraceServiceRequest.FromString(value)
        if _droppable(req) > MAX_LIST_ITEMS:
            return ShrinkResult(None, 0, 0)
        dropped = _drop_items(req, limit)
        if dropped.value is not None:
            return dropped
        del req, dropped
        # Both: every long value cut to the smallest cap, then the last items dropped.
        req = ExportTraceServiceRequest.FromString(value)
        strings = _long_strings(req)
        n_cut, removed, _ = _cut(req, strings, _MIN_KEEP)
        del strings
        both = _drop_items(req, limit)
        if both.value is None:
            return ShrinkResult(None, 0, 0)
        return ShrinkResult(both.value, n_cut, removed + both.bytes_removed, both.items_dropped)


def _long_strings(req: ExportTraceServiceRequest) -> list[AnyValue]:
    """The values a cut can shorten (longer than ``_MIN_KEEP``): at most one per 256 bytes of
    the record, where all string values could be one per two bytes."""
    return [v for v in _string_values(kv.value for kv in _attributes(req)) if _size(v) > _MIN_KEEP]


def _cut_values(req: ExportTraceServiceRequest, value: bytes, limit: int) -> ShrinkResult:
    strings = _long_strings(req)
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
        strings = _long_strings(req)
    return ShrinkResult(None, 0, 0)


# The first list index in an attribute key: "retrieval.documents.12.document.content" -> 12.
_INDEXED = re.compile(r"\.(\d{1,9})(?:\.|$)")


def _framed(size: int) -> int:
    """Bytes of a length-delimited field of ``size`` bytes: tag, length varint, payload."""
    return 1 + (size.bit_length() + 6) // 7 + size if size else 2


def _drop_items(req: ExportTraceServiceRequest, limit: int) -> ShrinkResult:
    """Drop list items, highest index first (the last contexts, messages, events, array
    items of every span), until ``req`` fits ``limit``; ``ShrinkResult(None, ...)`` if even
    dropping all of them does not."""
    size = req.ByteSize()
    # Removing an item saves at least its framed size (enclosing lengths only shrink); a span's
    # dropped_*_count fields may grow by up to 8 bytes: reserve that.
    spans = [span for rs in req.resource_spans for ss in rs.scope_spans for span in ss.spans]
    excess = size - limit + 8 * len(spans) + 16
    # (index, order, kind, owner, position, bytes): kind 0 attribute, 1 event, 2 array item.
    items: list[tuple[int, int, int, object, int, int]] = []
    order = 0
    for span in spans:
        for pos, kv in enumerate(span.attributes):
            m = _INDEXED.search(kv.key)
            if m:
                items.append((int(m.group(1)), order, 0, span, pos, _framed(kv.ByteSize())))
                order += 1
            elif kv.value.WhichOneof("value") == "array_value":
                for i, item in enumerate(kv.value.array_value.values):
                    items.append((i, order, 2, kv.value.array_value, i,
                                  _framed(item.ByteSize())))
                    order += 1
        for pos, event in enumerate(span.events):
            items.append((pos, order, 1, span, pos, _framed(event.ByteSize())))
            order += 1
    if sum(i[5] for i in items) < excess:
        return ShrinkResult(None, 0, 0)
    items.sort(key=lambda i: (-i[0], -i[1]))  # highest index first, later ones first
    drop: dict[tuple[int, int], set[int]] = {}  # (id of the list owner, kind) -> positions
    owners: dict[int, object] = {}
    saved = n = 0
    for _, _, kind, owner, pos, nbytes in items:
        if saved >= excess:
            break
        drop.setdefault((id(owner), kind), set()).add(pos)
        owners[id(owner)] = owner
        saved += nbytes
        n += 1
    for (key, kind), positions in drop.items():
        owner: Any = owners[key]
        items_of = owner.attributes if kind == 0 else owner.events if kind == 1 else owner.values
        for i in sorted(positions, reverse=True):  # from the end: the positions stay valid
            del items_of[i]
        if kind == 0:
            owner.dropped_attributes_count += len(positions)
        elif kind == 1:
            owner.dropped_events_count += len(positions)
    out = req.SerializeToString()
    if len(out) > limit:
        return ShrinkResult(None, 0, 0)
    return ShrinkResult(out, 0, size - len(out), n)


def _droppable(req: ExportTraceServiceRequest) -> int:
    """How many items :func:`_drop_items` would list, counted without listing them; stops
    once past :data:`MAX_LIST_ITEMS`."""
    count = 0
    search = _INDEXED.search
    for span in (span for rs in req.resource_spans for ss in rs.scope_spans for span in ss.spans):
        count += len(span.events)
        for kv in span.attributes:
            if search(kv.key):
                count += 1
            elif kv.value.WhichOneof("value") == "array_value":
                count += len(kv.value.array_value.values)
            if count > MAX_LIST_ITEMS:
                return count
    return count


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
