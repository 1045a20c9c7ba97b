"""Protobuf wire-format primitives shared by the collector's byte-level walks: the per-trace
split (:mod:`~ragpulse.collector.split`) and the item count before decoding
(:mod:`~ragpulse.collector.items`).

Pure functions, thread-safe. Reference: https://protobuf.dev/programming-guides/encoding/.
"""

from __future__ import annotations

__all__ = ["MalformedRequest", "read_varint"]


class MalformedRequest(ValueError):
    """The bytes are not a valid ExportTraceServiceRequest (permanent: answer 400)."""


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """The base-128 varint at ``buf[pos]``: ``(value, position after it)``.

    Raises :class:`MalformedRequest` (a ``ValueError``) for a varint longer than 64 bits and
    ``IndexError`` when it runs past the end of ``buf``; callers turn both into a 400. A
    one-byte varint (most tags and lengths) returns before the loop."""
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    result = b & 0x7F
    shift = 7
    pos += 1
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise MalformedRequest("varint too long")
