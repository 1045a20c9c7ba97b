"""Count a request's items before anything is decoded, so the work a request costs is bounded by
items and not only by bytes.

A list item is only two bytes on the wire (an empty ``AnyValue`` in an array is ``0A 00``), and
gzip packs millions of them into a few kilobytes; decoding one costs tens of bytes (upb's
message and its slot in the list), hundreds once Python touches it. So 64 MiB of decompressed
body could hold 32 million items and cost gigabytes. :func:`count_items` walks the protobuf
wire bytes of an ``ExportTraceServiceRequest`` down every path that holds a list (resource
spans, scope spans, spans, events, links, attributes of all of them, array and key-value-list
values at any depth) and counts each field it steps over; it stops as soon as the count passes
the bound, so refusing costs at most ``limit`` steps. :func:`count_json_containers` bounds an
OTLP/JSON body the same way before ``json.loads`` builds an object per item: every item is a
JSON object (``{``) and every list an array (``[``), counted outside strings at C speed.

Every field is at least two bytes (a tag and a one-byte length or value), so a body of ``n``
bytes holds at most ``n // 2`` of them: :func:`may_exceed` tells the caller when the walk can be
skipped (the request's common case; the walk costs about as much as the split itself).

Pure functions, thread-safe. References: opentelemetry-proto ``trace/v1/trace.proto`` and
``common/v1/common.proto`` field numbers; https://protobuf.dev/programming-guides/encoding/.
"""

from __future__ import annotations

import re

from ragpulse.collector.wire import read_varint

__all__ = ["count_items", "count_json_containers", "may_exceed"]

# Message kinds on the walk, and which length-delimited field of each leads to which kind.
_REQUEST, _RESOURCE_SPANS, _RESOURCE, _SCOPE_SPANS, _SCOPE, _SPAN, _EVENT, _LINK, _KEY_VALUE, \
    _ANY, _ARRAY, _KV_LIST = range(12)
_CHILDREN: dict[int, dict[int, int]] = {
    _REQUEST: {1: _RESOURCE_SPANS},
    _RESOURCE_SPANS: {1: _RESOURCE, 2: _SCOPE_SPANS},
    _RESOURCE: {1: _KEY_VALUE},
    _SCOPE_SPANS: {1: _SCOPE, 2: _SPAN},
    _SCOPE: {3: _KEY_VALUE},
    _SPAN: {9: _KEY_VALUE, 11: _EVENT, 13: _LINK},
    _EVENT: {3: _KEY_VALUE},
    _LINK: {5: _KEY_VALUE},
    _KEY_VALUE: {2: _ANY},
    _ANY: {5: _ARRAY, 6: _KV_LIST},
    _ARRAY: {1: _ANY},
    _KV_LIST: {1: _KEY_VALUE},
}
# The tag bytes of AnyValue.array_value (5) and kvlist_value (6): a value holding a list.
_LIST_VALUE_TAGS = (0x2A, 0x32)


def may_exceed(size: int, limit: int) -> bool:
    """Whether a body of ``size`` bytes can hold more than ``limit`` fields (each is >= 2 bytes)."""
    return size // 2 > limit


def _plain_key_value(buf: bytes, pos: int, end: int) -> bool:
    """Whether the KeyValue in ``buf[pos:end]`` is ``key`` then one value that holds no list,
    as SDKs write it: then it counts as one item and is not walked field by field."""
    if pos >= end or buf[pos] != 0x0A:
        return pos == end  # empty
    n, p = read_varint(buf, pos + 1)
    p += n
    if p == end:
        return True  # a key and no value
    if p + 2 > end or buf[p] != 0x12:
        return False
    n, q = read_varint(buf, p + 1)
    return q + n == end and (n == 0 or buf[q] not in _LIST_VALUE_TAGS)


def count_items(buf: bytes, limit: int) -> int:
    """The fields met on the walk down every list of the request in ``buf`` (module docstring);
    a number over ``limit`` as soon as it passes it (the walk stops there). Raises
    ``ValueError``/``IndexError`` on broken framing (the caller's decoder then says what is
    wrong). Blocks on CPU only: at most about ``limit`` loop steps.

    Long because: one loop with the frame parsing inline (a function call per field would
    double the cost of the walk).
    """
    count = 0
    stack = [(_REQUEST, 0, len(buf))]
    children = _CHILDREN
    while stack:
        kind, pos, end = stack.pop()
        leads = children[kind]
        while pos < end:
            count += 1
            if count > limit:
                return count
            tag = buf[pos]
            if tag < 0x80:
                pos += 1
            else:
                tag, pos = read_varint(buf, pos)
            wire = tag & 7
            if wire == 2:
                n = buf[pos]
                if n < 0x80:
                    pos += 1
                else:
                    n, pos = read_varint(buf, pos)
                vend = pos + n
                if vend > end:
                    raise ValueError("field overruns its message")
                child = leads.get(tag >> 3)
                if child is not None and n:
                    if child != _KEY_VALUE or not _plain_key_value(buf, pos, vend):
                        stack.append((child, pos, vend))
                pos = vend
            elif wire == 0:
                while buf[pos] >= 0x80:
                    pos += 1
                pos += 1
            elif wire == 1:
                pos += 8
            elif wire == 5:
                pos += 4
            else:
                raise ValueError(f"unsupported wire type {wire}")
        if pos > end:
            raise ValueError("field overruns its message")
    return count


# A JSON string (with escapes), or a container's opening bracket.
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)


def count_json_containers(body: bytes) -> int:
    """The JSON objects and arrays in ``body`` (``{`` and ``[`` outside strings): an upper
    bound on the OTLP items ``json.loads`` would build, counted in C without building them
    (one copy of the body without its strings). Malformed JSON still gets a count; its parse
    fails afterwards."""
    bare = _JSON_STRING.sub(b"", body)
    return bare.count(b"{") + bare.count(b"[")
