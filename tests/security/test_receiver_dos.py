"""Denial of service against the OTLP/HTTP receiver, over real sockets (issue 10, part 2).

* slowloris: connections that trickle a request head took every connection slot, so every valid
  request got 503; now idle and slow connections are evicted and deadlines close them;
* a chunk size of ``-1`` made the decoder call ``read(-1)`` and buffer everything the client
  sent, past the body limit; now malformed and oversized chunk sizes are refused before reading;
* JSON nested 10,000 levels raised ``RecursionError`` (a 500 with a traceback); now a counted 400.

The same connection guard and chunked decoder serve the ClickHouse facade (one implementation,
ragpulse.common.http); its slowloris test is at the end.
"""

from __future__ import annotations

import http.client
import logging
import socket
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from ragpulse.collector.service import Collector
from tests.security.corpus import good_request


def _body(i: int = 0) -> bytes:
    return good_request(i)[1].SerializeToString()


def _endpoint(collector: Collector) -> tuple[str, int]:
    url = urlsplit(collector.http_endpoint or "")
    return url.hostname or "127.0.0.1", url.port or 0


def _valid_post(host: str, port: int, timeout_s: float = 10.0) -> int:
    conn = http.client.HTTPConnection(host, port, timeout=timeout_s)
    try:
        conn.request("POST", "/v1/traces", body=_body(),
                     headers={"Content-Type": "application/x-protobuf"})
        resp = conn.getresponse()
        resp.read()
        return resp.status
    finally:
        conn.close()


def _slow_clients(host: str, port: int, n: int, stack: ExitStack) -> list[socket.socket]:
    """``n`` connections that have sent the start of a request head and then nothing."""
    socks = []
    for _ in range(n):
        s = stack.enter_context(socket.create_connection((host, port), timeout=5))
        s.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        socks.append(s)
    return socks


def test_slowloris_does_not_starve_valid_clients(make_collector: Callable[..., Collector]) -> None:
    c = make_collector(otlp={"max_concurrent_requests": 8, "header_timeout_s": 30.0})
    host, port = _endpoint(c)
    with ExitStack() as stack:
        slow = _slow_clients(host, port, 40, stack)  # five times the connection slots
        for s in slow[-8:]:
            s.sendall(b"X-Drip: 1\r\n")  # still trickling, as a slowloris client does
        statuses = [_valid_post(host, port) for _ in range(10)]
        assert statuses == [200] * 10
    st = c.stats()
    assert st["http_connections_evicted"] >= 32
    assert st["spans_accepted"] > 0


def test_a_trickled_head_is_cut_at_its_deadline(make_collector: Callable[..., Collector]) -> None:
    c = make_collector(otlp={"header_timeout_s": 1.0})
    host, port = _endpoint(c)
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(b"POST /v1/traces HTTP/1.1\r\n")
        closed = False
        # One header line every 0.3 s for 9 s: each line would reset a per-read timeout, so only
        # a deadline on the whole head (1 s) closes the connection before the last line.
        for i in range(30):
            try:
                s.sendall(b"X-Drip-%d: 1\r\n" % i)
                time.sleep(0.3)
                s.settimeout(0.01)
                if s.recv(1024) == b"":
                    closed = True
                    break
            except TimeoutError:
                continue
            except OSError:
                closed = True
                break
            finally:
                s.settimeout(10)
        assert closed  # before the client stopped sending
    assert c.stats()["http_requests_timed_out"] == 1


def test_a_slow_body_is_cut_and_counted(make_collector: Callable[..., Collector]) -> None:
    c = make_collector(otlp={"body_timeout_s": 1.0, "body_min_bytes_per_s": 1024})
    host, port = _endpoint(c)
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-protobuf\r\n"
                  b"Content-Length: 1000\r\n\r\nab")
        s.settimeout(60)  # a hang guard: the body never completes, only its deadline ends it
        assert s.recv(1024) == b""  # closed without a reply (1 s + 1000 B at 1 KiB/s)
    assert c.stats()["http_requests_timed_out"] == 1
    assert _valid_post(host, port) == 200


@pytest.mark.parametrize("size_line", [b"-1", b"-0x10", b"0x10", b"zz", b"+5", b"1 0",
                                       b"ffffffffffffffffff", b"", b"7fffffffffffffff"])
def test_bad_chunk_sizes_are_refused_before_reading(make_collector: Callable[..., Collector],
                                                     size_line: bytes) -> None:
    c = make_collector()
    host, port = _endpoint(c)
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-protobuf\r\n"
                  b"Transfer-Encoding: chunked\r\n\r\n" + size_line + b"\r\n" + b"A" * 65536)
        reply = s.recv(4096)
    status = int(reply.split(b" ", 2)[1])
    assert status in (400, 413), reply[:200]
    st = c.stats()
    assert st["requests_malformed"] + st["http_too_large"] == 1
    deadline = time.monotonic() + 10  # the reservation is released after the reply is sent
    while c.stats()["http_inflight_bytes"] and time.monotonic() < deadline:
        time.sleep(0.01)
    assert c.stats()["http_inflight_bytes"] == 0


def test_a_negative_chunk_cannot_buffer_past_the_limit(make_collector: Callable[..., Collector]) -> None:
    """The reported attack: ``-1`` then a stream of data. The connection is answered and closed
    at once, so the data is never read into memory."""
    c = make_collector(otlp={"max_body_bytes": 64 * 1024})
    host, port = _endpoint(c)
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-protobuf\r\n"
                  b"Transfer-Encoding: chunked\r\n\r\n-1\r\n")
        reply = s.recv(4096)
        assert reply.startswith(b"HTTP/1.1 400")
        sent = 0
        try:
            for _ in range(400):  # up to 100 MiB more: the server no longer reads
                s.sendall(b"B" * 262144)
                sent += 262144
        except OSError:
            pass
        assert sent < 100 * 2**20


def test_chunked_bodies_still_work(make_collector: Callable[..., Collector]) -> None:
    c = make_collector()
    host, port = _endpoint(c)
    body = _body()
    chunked = b"".join(b"%x;ext=1\r\n%s\r\n" % (len(body[i:i + 700]), body[i:i + 700])
                       for i in range(0, len(body), 700)) + b"0\r\nX-Trailer: 1\r\n\r\n"
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-protobuf\r\n"
                  b"Transfer-Encoding: chunked\r\n\r\n" + chunked)
        assert s.recv(4096).startswith(b"HTTP/1.1 200")


def test_deeply_nested_json_is_a_counted_400(make_collector: Callable[..., Collector],
                                             caplog: pytest.LogCaptureFixture) -> None:
    c = make_collector()
    host, port = _endpoint(c)
    bodies = [b"[" * 10_000 + b"]" * 10_000,
              b'{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"' + b"01" * 16
              + b'","spanId":"' + b"01" * 8 + b'","attributes":[{"key":"k","value":'
              + b'{"arrayValue":{"values":[' * 5000 + b"{}" + b"]}}" * 5000 + b"}]}]}]}]}"]
    with caplog.at_level(logging.DEBUG):
        for body in bodies:
            conn = http.client.HTTPConnection(host, port, timeout=30)
            conn.request("POST", "/v1/traces", body=body, headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            text = resp.read()
            conn.close()
            assert resp.status == 400 and b"nested too deeply" in text, text[:200]
    assert c.stats()["requests_malformed"] == 2
    assert "Traceback" not in caplog.text and "RecursionError" not in caplog.text


def test_the_facade_has_the_same_guard(chdb_dir: Path, chdb_client: Any) -> None:
    from ragpulse.deploy.facade import FacadeSettings, build_facade

    f = build_facade(str(chdb_dir), FacadeSettings(max_connections=4, advertise=False))
    f.start()
    try:
        host, port = "127.0.0.1", f.port
        with ExitStack() as stack:
            _slow_clients(host, port, 20, stack)
            for _ in range(5):
                conn = http.client.HTTPConnection(host, port, timeout=10)
                conn.request("POST", "/", body=b"SELECT 1")
                resp = conn.getresponse()
                assert (resp.status, resp.read()) == (200, b"1\n")
                conn.close()
        with socket.create_connection((host, port), timeout=10) as s:
            s.sendall(b"POST / HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\n")
            assert s.recv(4096).startswith(b"HTTP/1.1 400")
        assert f.stats()["connections_evicted"] >= 16
    finally:
        f.shutdown()

