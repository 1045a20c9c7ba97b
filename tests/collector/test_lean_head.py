"""The receiver's lean request-head parse (``GuardedRequestHandler.lean_head``) answers every
head as ``BaseHTTPRequestHandler.parse_request`` (email.parser) does: same request fields, same
header values for the names the receiver reads, same connection handling, same refusals."""

from __future__ import annotations

import http.client
import io
import socket

import pytest

from ragpulse.common.http import GuardedRequestHandler, LeanHeaders

NAMES = ["Host", "Content-Type", "content-length", "CONTENT-ENCODING", "Authorization",
         "Transfer-Encoding", "Connection", "Expect", "X-Missing"]


class _Handler(GuardedRequestHandler):
    def __init__(self, lean: bool, head: bytes) -> None:  # no socket: only parse_request
        self.lean_head = lean
        self.rfile = io.BytesIO(head)
        self.raw_requestline = self.rfile.readline(65537)
        self.request_version = "HTTP/0.9"
        self.close_connection = True
        self.command = None
        self.errors: list[tuple[int, str | None]] = []
        self.expected = 0

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        self.errors.append((code, message, explain))  # type: ignore[arg-type]

    def handle_expect_100(self) -> bool:
        self.expected += 1
        return True


def parsed(lean: bool, head: bytes) -> tuple[object, ...]:
    h = _Handler(lean, head)
    ok = h.parse_request()
    headers = getattr(h, "headers", None)
    values = tuple(headers.get(n) for n in NAMES) if ok and headers is not None else None
    return (ok, h.command, getattr(h, "path", None), h.request_version, h.close_connection,
            values, tuple(h.errors), h.expected, h.rfile.read())


BODY = b"\x0a\x02xy"
HEADS = [
    b"POST /v1/traces HTTP/1.1\r\nHost: a:4318\r\nContent-Type: application/x-protobuf\r\n"
    b"Content-Length: 4\r\n\r\n",
    b"POST /v1/traces HTTP/1.1\nHost: a\nContent-Length: 4\n\n",  # bare LF
    b"POST /v1/traces HTTP/1.0\r\nContent-Length: 4\r\n\r\n",
    b"POST /v1/traces HTTP/1.0\r\nConnection: keep-alive\r\nContent-Length: 4\r\n\r\n",
    b"POST /v1/traces HTTP/1.1\r\nConnection: Close\r\nContent-Length: 4\r\n\r\n",
    b"POST /v1/traces HTTP/1.1\r\nExpect: 100-Continue\r\nContent-Length: 4\r\n\r\n",
    b"POST /v1/traces HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n",
    # no Host at all; no headers at all
    b"POST /v1/traces HTTP/1.1\r\nContent-Length: 4\r\n\r\n",
    b"POST /v1/traces HTTP/1.1\r\n\r\n",
    # duplicate headers: the first counts, whatever the case of the name
    b"POST /v1/traces HTTP/1.1\r\nContent-Length: 4\r\ncontent-length: 999999\r\n\r\n",
    b"POST /v1/traces HTTP/1.1\r\nAuthorization: Bearer a\r\nAUTHORIZATION: Bearer b\r\n\r\n",
    # bad Content-Length values are passed on unchanged (the receiver decides)
    b"POST /v1/traces HTTP/1.1\r\nContent-Length: -4\r\n\r\n",
    b"POST /v1/traces HTTP/1.1\r\nContent-Length: 4, 4\r\n\r\n",
    b"POST /v1/traces HTTP/1.1\r\nContent-Length:    4   \r\n\r\n",
    b"POST /v1/traces HTTP/1.1\r\nContent-Length: 0x10\r\n\r\n",
    b"POST /v1/traces HTTP/1.1\r\nContent-Length:\r\n\r\n",
    b"POST /v1/traces HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n",
    # obs-fold, odd names and bytes: email.parser's reading is kept
    b"POST /v1/traces HTTP/1.1\r\nContent-Type: application/\r\n x-protobuf\r\nContent-Length: 4\r\n\r\n",
    b"POST /v1/traces HTTP/1.1\r\n Content-Length: 4\r\nHost: a\r\n\r\n",
    b"POST /v1/traces HTTP/1.1\r\nContent-Length : 4\r\nHost: a\r\n\r\n",
    b"POST /v1/traces HTTP/1.1\r\nno colon here\r\nContent-Length: 4\r\n\r\n",
    b"POST /v1/traces HTTP/1.1\r\nX-A: a\rContent-Length: 4\r\n\r\n",
    b"POST /v1/traces HTTP/1.1\r\nX-A: \x85\xe9\r\nContent-Length: 4\r\n\r\n",
    b"POST /v1/traces HTTP/1.1\r\nX-A: a\x0bb\r\nContent-Length: 4\r\n\r\n",
    b"POST /v1/traces HTTP/1.1\r\nFrom nobody\r\nContent-Length: 4\r\n\r\n",
    b"POST /v1/traces HTTP/1.1\r\n:empty: name\r\nContent-Length: 4\r\n\r\n",
    b"POST /v1/traces HTTP/1.1\r\nX-A:\ttabbed\t\r\nContent-Length: 4\r\n\r\n",
    # request lines
    b"POST //evil//v1/traces HTTP/1.1\r\nContent-Length: 4\r\n\r\n",
    b"POST /v1/traces?x=1 HTTP/1.1\r\nContent-Length: 4\r\n\r\n",
    b"POST  /v1/traces  HTTP/1.1\r\nContent-Length: 4\r\n\r\n",
    b"POST /v1/traces HTTP/2.0\r\nContent-Length: 4\r\n\r\n",
    b"POST /v1/traces HTTP/1.1.1\r\nContent-Length: 4\r\n\r\n",
    b"POST /v1/traces FTP/1.1\r\n\r\n",
    b"POST /v1/traces\r\n\r\n",
    b"GET /\r\n\r\n",
    b"POST\r\n\r\n",
    b"\r\n",
    b"POST /v1/\xa0traces HTTP/1.1\r\n\r\n",
    b"post /v1/traces http/1.1\r\n\r\n",
    # limits: one header line over 65536 bytes, more than 100 header lines, exactly 100
    b"POST /v1/traces HTTP/1.1\r\nX-Big: " + b"a" * 65536 + b"\r\n\r\n",
    b"POST /v1/traces HTTP/1.1\r\n" + b"X-N: 1\r\n" * 101 + b"\r\n",
    b"POST /v1/traces HTTP/1.1\r\n" + b"X-N: 1\r\n" * 100 + b"\r\n",
    b"POST /v1/traces HTTP/1.1\r\n" + b"X-N: 1\r\n" * 99 + b"\r\n",
    b"POST /v1/traces HTTP/1.1\r\n" + b"X-N: 1\r\n" * 100,
    # a head cut off before its end
    b"POST /v1/traces HTTP/1.1\r\nContent-Length: 4\r\n",
]


@pytest.mark.parametrize("head", HEADS, ids=range(len(HEADS)))
def test_lean_head_answers_as_the_standard_library(head: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    # The standard library's own limit, as in the collector's process (clickhouse_connect, imported
    # by other tests, raises it to 10000 for the whole interpreter; the lean parse keeps 100).
    monkeypatch.setattr(http.client, "_MAXHEADERS", 100)
    monkeypatch.setattr(http.client, "_MAXLINE", 65536)
    assert parsed(True, head + BODY) == parsed(False, head + BODY)


def test_plain_heads_take_the_lean_path() -> None:
    h = _Handler(True, HEADS[0] + BODY)
    assert h.parse_request()
    assert isinstance(h.headers, LeanHeaders)
    assert h.headers["CONTENT-type"] == "application/x-protobuf"
    assert "content-LENGTH" in h.headers and "x-missing" not in h.headers
    obs_fold = _Handler(True, HEADS[17] + BODY)
    assert obs_fold.parse_request() and not isinstance(obs_fold.headers, LeanHeaders)


def test_receiver_answers_hostile_heads(tmp_path: object) -> None:
    """Through the collector's own handler, on a socket: 431s, and a normal request after."""
    from ragpulse.collector.config import CollectorSettings
    from ragpulse.collector.exporter import ExportResult
    from ragpulse.collector.otlp_http import HttpReceiver

    class Ingest:
        def consume_proto(self, body: bytes) -> ExportResult:
            return ExportResult(accepted_spans=0)

        def _count(self, **deltas: int) -> None:
            pass

    settings = CollectorSettings.model_validate({
        "otlp": {"http_port": 0, "grpc_port": 0}, "kafka": {"bootstrap_servers": "127.0.0.1:9", "topic": "x"},
    })
    receiver = HttpReceiver(settings.otlp, Ingest())  # type: ignore[arg-type]
    receiver.start()
    try:
        def exchange(raw: bytes) -> bytes:
            with socket.create_connection(("127.0.0.1", receiver.port), timeout=10) as s:
                s.sendall(raw)
                s.shutdown(socket.SHUT_WR)
                out = b""
                while chunk := s.recv(65536):
                    out += chunk
                return out

        assert exchange(HEADS[-6] + BODY).startswith(b"HTTP/1.1 431")
        assert exchange(HEADS[-5] + BODY).startswith(b"HTTP/1.1 431")
        ok = (b"POST /v1/traces HTTP/1.1\r\nContent-Type: application/x-protobuf\r\n"
              b"Content-Length: 0\r\nConnection: close\r\n\r\n")
        assert exchange(ok).startswith(b"HTTP/1.1 200")
        folded = (b"POST /v1/traces HTTP/1.1\r\nContent-Type: application/\r\n x-protobuf\r\n"
                  b"Content-Length: 0\r\nConnection: close\r\n\r\n")
        assert exchange(folded).startswith(b"HTTP/1.1 ")
    finally:
        receiver.shutdown(1.0)
