"""``ragpulse.common.inflate_bounded``: the one bounded decompressor behind the OTLP/HTTP receiver
(gzip) and the ClickHouse-HTTP facade (gzip, deflate). Each edge case is decided once, here."""

from __future__ import annotations

import gzip
import time
import tracemalloc
import zlib

import pytest

from ragpulse.common import BodyTooLarge, MalformedBody, inflate_bounded

TEXT = b"SELECT 'ragpulse' -- " + bytes(range(256)) * 40


def _compress(data: bytes, encoding: str) -> bytes:
    return gzip.compress(data) if encoding == "gzip" else zlib.compress(data)


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
def test_round_trip_and_exact_limit(encoding: str) -> None:
    body = _compress(TEXT, encoding)
    assert inflate_bounded(body, len(TEXT), encoding) == TEXT  # exactly at the limit is fine
    with pytest.raises(BodyTooLarge) as err:
        inflate_bounded(body, len(TEXT) - 1, encoding)
    assert err.value.consumed and "exceeds" in str(err.value)


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
def test_bomb_is_bounded_while_inflating(encoding: str) -> None:
    """64 MiB of zeros in ~64 KiB: refused after about ``limit`` bytes of output, not after
    inflating it all (peak memory stays near the limit)."""
    bomb = _compress(b"\x00" * (64 << 20), encoding)
    assert len(bomb) < 128 << 10
    tracemalloc.start()
    try:
        with pytest.raises(BodyTooLarge):
            inflate_bounded(bomb, 1 << 20, encoding)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20, peak


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
def test_truncated_or_empty_stream_is_malformed(encoding: str) -> None:
    body = _compress(TEXT, encoding)
    for cut in (body[:-1], body[: len(body) // 2], body[:3], b""):
        with pytest.raises(MalformedBody, match="truncated|invalid"):
            inflate_bounded(cut, 1 << 20, encoding)


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
def test_concatenated_members_are_joined(encoding: str) -> None:
    """RFC 1952 section 2.2: a gzip body is a series of members (zlib streams likewise)."""
    body = _compress(TEXT[:100], encoding) + _compress(b"", encoding) + _compress(TEXT[100:], encoding)
    assert inflate_bounded(body, len(TEXT), encoding) == TEXT
    with pytest.raises(BodyTooLarge):  # the limit counts all members together
        inflate_bounded(body, len(TEXT) - 1, encoding)


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
def test_trailing_zero_padding_is_ignored_other_trailing_data_is_not(encoding: str) -> None:
    body = _compress(TEXT, encoding)
    assert inflate_bounded(body + b"\x00" * 512, 1 << 20, encoding) == TEXT
    assert inflate_bounded(body + b"\x00" * (200 << 10), 1 << 20, encoding) == TEXT  # > one step
    for tail in (b"garbage", b"\x00\x00x", b"\n", b"\x1f", body[:5]):
        with pytest.raises(MalformedBody):
            inflate_bounded(body + tail, 1 << 20, encoding)
    with pytest.raises(MalformedBody):  # zero bytes alone hold no member
        inflate_bounded(b"\x00" * 64, 1 << 20, encoding)


def test_wrong_format_is_malformed() -> None:
    with pytest.raises(MalformedBody, match="invalid gzip body"):
        inflate_bounded(zlib.compress(TEXT), 1 << 20, "gzip")
    with pytest.raises(MalformedBody, match="invalid deflate body"):
        inflate_bounded(gzip.compress(TEXT), 1 << 20, "deflate")
    with pytest.raises(MalformedBody):
        inflate_bounded(b"not gzip at all", 1 << 20, "gzip")


def test_many_tiny_members_cost_linear_time() -> None:
    """A 1 MiB body of 20-byte empty members: each member must not copy the rest of the input
    (that would be ~26 GB of copying); a generous bound that a quadratic walk cannot meet."""
    body = gzip.compress(b"", mtime=0) * ((1 << 20) // 20)
    started = time.process_time()
    assert inflate_bounded(body, 1 << 20, "gzip") == b""
    assert time.process_time() - started < 10
