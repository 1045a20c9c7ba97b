"""The one varint reader of the collector's byte-level walks (split and the item count)."""

from __future__ import annotations

import pytest

from ragpulse.collector.items import count_items
from ragpulse.collector.split import MalformedRequest as SplitMalformed
from ragpulse.collector.split import _encode_varint
from ragpulse.collector.wire import MalformedRequest, read_varint


@pytest.mark.parametrize("value", [0, 1, 127, 128, 300, 16383, 16384, 2**32, 2**63 - 1, 2**64 - 1])
def test_read_varint_reads_what_protobuf_writes(value: int) -> None:
    encoded = _encode_varint(value)
    buf = b"\x07" + encoded + b"\x09"
    assert read_varint(buf, 1) == (value, 1 + len(encoded))


def test_a_varint_over_64_bits_or_past_the_end_is_refused() -> None:
    with pytest.raises(MalformedRequest, match="varint too long"):
        read_varint(b"\xff" * 10 + b"\x01", 0)
    with pytest.raises(IndexError):
        read_varint(b"\x80\x80", 0)
    # The split re-exports the same error, and the item count's ValueError contract holds.
    assert SplitMalformed is MalformedRequest and issubclass(MalformedRequest, ValueError)
    with pytest.raises(ValueError, match="varint too long"):
        count_items(b"\x0a" + b"\xff" * 10 + b"\x01", 100)
