"""HTTP/1.1 serving that a slow or hostile client cannot exhaust.

Both HTTP listeners of ragpulse (the OTLP/HTTP receiver and the ClickHouse-HTTP facade) are the
standard library's threading server: one thread per connection. Three things keep a client from
taking the server down, as Go's ``net/http`` server (which the OpenTelemetry Collector uses:
``ReadHeaderTimeout``, ``IdleTimeout``) and nginx (``client_header_timeout``,
``keepalive_timeout``) do:

* **read deadlines**: a request head must arrive within ``header_timeout_s`` of its first byte, a
  body within ``body_timeout_s`` plus its length at ``body_min_bytes_per_s``, and a keep-alive
  connection may idle for ``idle_timeout_s``. A deadline is total, not per ``recv``: a client that
  sends one byte every few seconds is cut off all the same (slowloris).
* **a connection cap that evicts**: at ``max_connections`` a new connection does not get a 503
  while somebody is merely idling or trickling a request head; the connection that has been in
  that state the longest is closed to make room. Only when every connection is sending a body or
  being served is the new one refused (503 with ``Retry-After``).
* **one bounded body decoder** (:func:`read_body`, :func:`read_chunked`): a declared length or a
  chunk size is checked against the limit before anything is read, and a chunk size must be
  1-16 hexadecimal digits (RFC 9112 section 7.1: ``chunk-size = 1*HEXDIG``), so ``-1``, ``0x10``
  or a size beyond the limit is refused before a byte of the chunk is buffered.
* **one bounded decompressor** (:func:`inflate_bounded`): a gzip or deflate body is refused
  while it inflates, once its output passes the limit, so a small body cannot expand into memory.

Use: subclass :class:`GuardedRequestHandler` (instead of ``BaseHTTPRequestHandler``) and serve
it with :class:`GuardedHTTPServer`; call ``handler.begin_body(length)`` before reading a body
(:func:`read_body` does) and ``handler.end_body()`` once it is read.
"""

from __future__ import annotations

import email.parser
import functools
import hmac
import io
import ipaddress
import logging
import re
import socket
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, BinaryIO, Literal
from urllib.parse import urlsplit

__all__ = [
    "BodyError",
    "BodyTooLarge",
    "ConnectionLimits",
    "GuardedHTTPServer",
    "GuardedRequestHandler",
    "MalformedBody",
    "inflate_bounded",
    "read_body",
    "read_chunked",
    "serve_in_thread",
]

log = logging.getLogger(__name__)

# Phases of a connection, in the order they happen for each request.
IDLE, HEAD, BODY, BUSY = "idle", "head", "body", "busy"
_EVICTABLE = (IDLE, HEAD)

_MAX_CHUNK_LINE = 1024  # chunk size + extensions; RFC 9112 sets no limit, servers use ~4 KiB
_MAX_TRAILER_LINES = 64


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """How long and how many. All durations are totals measured by a monotonic clock."""

    max_connections: int = 64
    """Connections served at once (one thread each); see the module docstring for eviction."""
    idle_timeout_s: float = 60.0
    """A keep-alive connection waiting for its next request is closed after this long."""
    header_timeout_s: float = 10.0
    """From the first byte of a request to the end of its head (request line + headers)."""
    body_timeout_s: float = 10.0
    """Base allowance for a body, on top of its length at ``body_min_bytes_per_s``."""
    body_min_bytes_per_s: int = 64 * 1024
    write_timeout_s: float = 30.0
    """Sending a response: a client that stops reading is cut off after this long."""
    retry_after_s: int = 2
    """``Retry-After`` of the 503 sent when every connection is busy."""

    def body_deadline_s(self, length: int | None) -> float:
        """Seconds allowed for a body of ``length`` bytes (``None``: unknown, chunked)."""
        return self.body_timeout_s + (length or 0) / self.body_min_bytes_per_s


class BodyError(Exception):
    """A request body that cannot be accepted. ``status`` is the HTTP status to answer."""

    status = 400


class BodyTooLarge(BodyError):
    """Larger than the limit (413). ``consumed``: the body was read to its end, so the
    connection can stay open; otherwise the rest is unread and the connection must close."""

    status = 413

    def __init__(self, message: str, *, consumed: bool = False) -> None:
        super().__init__(message)
        self.consumed = consumed


class MalformedBody(BodyError):
    """Framing that is not HTTP/1.1 (400): a bad chunk size, a short body, a missing length; or
    a content encoding that does not decode (:func:`inflate_bounded`)."""


class _Connection:
    __slots__ = ("evicted", "phase", "since", "sock")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.phase = IDLE
        self.since = time.monotonic()
        self.evicted = False


class _DeadlineReader(io.RawIOBase):
    """A socket reader whose reads fail with ``TimeoutError`` once ``deadline`` has passed.

    The socket timeout is set to the time left before every ``recv``, so the deadline is a total
    for all the reads it covers, however the bytes trickle in.
    """

    def __init__(self, sock: socket.socket) -> None:
        super().__init__()
        self._sock = sock
        self.deadline = float("inf")

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("read deadline exceeded")
        self._sock.settimeout(min(left, 3600.0))
        return self._sock.recv_into(buffer)


class GuardedHTTPServer(ThreadingHTTPServer):
    """A threading HTTP server with a connection cap that evicts idle and slow clients.

    Thread-safe. ``connections()`` and ``close_idle()`` may be called from any thread;
    ``stats()`` returns counters: ``connections_refused`` (503: nothing evictable),
    ``connections_evicted``, ``requests_timed_out`` (a read deadline passed).
    """

    daemon_threads = True  # idle keep-alive connections must not block interpreter exit
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler],
                 limits: ConnectionLimits, *, listen_socket: socket.socket | None = None) -> None:
        """Binds and listens on ``address``, or serves ``listen_socket`` (already bound and
        listening, e.g. inherited from another process; ``address`` is then ignored)."""
        self.limits = limits
        self._conns: dict[socket.socket, _Connection] = {}
        self._conn_lock = threading.Lock()
        self._accepting = True
        self.guard_stats = {"connections_refused": 0, "connections_evicted": 0,
                            "requests_timed_out": 0}
        super().__init__(address, handler, bind_and_activate=listen_socket is None)
        if listen_socket is not None:
            self.socket.close()
            self.socket = listen_socket
            self.server_address = listen_socket.getsockname()
            self.server_name, self.server_port = str(self.server_address[0]), self.server_address[1]

    # -- accounting ------------------------------------------------------------------------

    def process_request(self, request: Any, client_address: Any) -> None:
        """Admit a new connection, on the accept loop's thread: at the cap, evict the connection
        idle or sending its head the longest, or answer 503 with ``Retry-After`` when none is
        evictable. Reads nothing from a client (the victim's socket is only shut down)."""
        victim = None
        with self._conn_lock:
            live = [c for c in self._conns.values() if not c.evicted]
            admit = self._accepting
            if admit and len(live) >= self.limits.max_connections:
                candidates = [c for c in live if c.phase in _EVICTABLE]
                if candidates:
                    victim = min(candidates, key=lambda c: c.since)
                    victim.evicted = True
                    self.guard_stats["connections_evicted"] += 1
                else:
                    admit = False
            if admit:
                self._conns[request] = _Connection(request)
            else:
                self.guard_stats["connections_refused"] += 1
        if victim is not None:
            _shutdown(victim.sock)  # its thread sees EOF and ends
        if not admit:
            try:
                request.sendall(
                    b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: %d\r\n"
                    b"Content-Length: 0\r\nConnection: close\r\n\r\n" % self.limits.retry_after_s)
            except OSError:
                pass
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        """The connection's own thread: :meth:`wrap_connection`, then serve its requests until it
        closes; it leaves the accounting however it ends."""
        raw = request
        try:
            request = self.wrap_connection(raw, client_address)
            if request is None:
                self.shutdown_request(raw)
                return
            if request is not raw:
                with self._conn_lock:
                    conn = self._conns.pop(raw, None)
                    if conn is not None:
                        conn.sock = request
                        self._conns[request] = conn
            super().process_request_thread(request, client_address)
        finally:
            with self._conn_lock:
                self._conns.pop(request, None)
                self._conns.pop(raw, None)

    def wrap_connection(self, sock: socket.socket, client_address: Any) -> socket.socket | None:
        """Hook run on the connection's own thread before the first request (e.g. a TLS
        handshake, which must never run in the accept loop). Returns the socket to serve, or
        ``None`` to drop the connection. The connection is idle, hence evictable, meanwhile."""
        return sock

    def _set_phase(self, sock: socket.socket, phase: str) -> None:
        with self._conn_lock:
            conn = self._conns.get(sock)
            if conn is not None:
                conn.phase = phase
                conn.since = time.monotonic()

    def count_timeout(self) -> None:
        """Count a request whose read deadline passed (``requests_timed_out``). Any thread."""
        with self._conn_lock:
            self.guard_stats["requests_timed_out"] += 1

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Connection resets and timeouts are a client's business: debug, not a traceback."""
        import sys

        exc = sys.exc_info()[1]
        if isinstance(exc, OSError):
            log.debug("http %s: %s", client_address, exc)
        else:
            log.error("http %s: unexpected error in the request handler", client_address,
                      exc_info=True)

    # -- control ---------------------------------------------------------------------------

    def connections(self) -> int:
        """Connections open now (admitted, not yet closed). Any thread."""
        with self._conn_lock:
            return len(self._conns)

    def stop_accepting(self) -> None:
        """New connections get 503 from now on (the accept loop may still run)."""
        with self._conn_lock:
            self._accepting = False

    def close_idle(self) -> None:
        """Wake every connection waiting for its next request (or still sending its head), so
        its thread ends; connections sending a body or being served finish their request."""
        with self._conn_lock:
            idle = [c.sock for c in self._conns.values() if c.phase in _EVICTABLE]
        for sock in idle:
            _shutdown(sock)

    def stats(self) -> dict[str, int]:
        """A snapshot of the counters (see the class docstring). Any thread."""
        with self._conn_lock:
            return dict(self.guard_stats)


def _shutdown(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


# (second, its Date header), replaced whole: a handler thread sees a matching pair.
_date_header: tuple[int, str] = (0, "")


# The lean request head (opt-in, ``GuardedRequestHandler.lean_head``) ---------------------------
#
# ``BaseHTTPRequestHandler.parse_request`` hands every head to ``email.parser``, about 18 µs of a
# 100-span OTLP request. Heads from OTLP exporters are plain: ``METHOD /path HTTP/1.x`` and
# ``Name: value`` lines. Those are parsed here directly; anything else (HTTP/0.9 or other
# versions, obs-fold, a line that is not ``token:value``, a stray CR) goes the standard library's
# way, so odd heads get exactly its answers. The limits are the standard library's: 65536 bytes
# per line (431), 100 lines after the request line, the empty one included (431).
_HEAD_LINE_MAX = 65536
_HEAD_LINES_MAX = 100
_LEAN_REQUEST_LINE = re.compile(rb"([!#$%&'*+.^_`|~0-9A-Za-z-]+) ([!-~]+) HTTP/1\.([01])\r?\n")
# A header line email.parser reads as one header: a name of printable ASCII but ':', a colon,
# and a value of printable ASCII and tabs (email.parser also ends lines at a bare CR and
# other line breaks, some of them in Latin-1).
_LEAN_HEADER_LINE = re.compile(rb"([!-9;-~]+):[ \t]*([\t -~]*)\r?\n")


class LeanHeaders(dict):  # type: ignore[type-arg]
    """The head's headers, as ``email.message.Message.get`` answers them: by name, any case;
    of repeated names the first. Keys are lower-case names, values the first value."""

    def get(self, name: str, default: Any = None) -> Any:  # type: ignore[override]
        return dict.get(self, name.lower(), default)

    def __getitem__(self, name: str) -> Any:
        return dict.get(self, name.lower())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and dict.__contains__(self, name.lower())


def _read_header_lines(rfile: BinaryIO) -> list[bytes] | str:
    """The header lines up to the empty line, or the 431 reason when over the limits."""
    lines: list[bytes] = []
    while True:
        line = rfile.readline(_HEAD_LINE_MAX + 1)
        if len(line) > _HEAD_LINE_MAX:
            return "Line too long"
        if len(lines) >= _HEAD_LINES_MAX:  # the empty line counts too, as in the standard library
            return "Too many headers"
        if line in (b"\r\n", b"\n", b""):
            return lines
        lines.append(line)


class GuardedRequestHandler(BaseHTTPRequestHandler):
    """``BaseHTTPRequestHandler`` with read deadlines and phase tracking for eviction.

    Serve it with :class:`GuardedHTTPServer`. ``do_*`` methods run with the head read; they call
    :meth:`begin_body`/:meth:`end_body` around reading a body (:func:`read_body` does both).
    A passed deadline raises ``TimeoutError`` in the read, which the base class turns into a
    closed connection; the server counts it.
    """

    protocol_version = "HTTP/1.1"
    server: GuardedHTTPServer
    #: Parse plain heads without ``email.parser`` (see :class:`LeanHeaders`); ``self.headers``
    #: is then a :class:`LeanHeaders` (``get`` by any-case name, the first of repeated names).
    lean_head = False

    def setup(self) -> None:
        """Read the connection through a deadline-aware reader (the deadlines of each phase)."""
        super().setup()
        raw = self.connection
        self._reader = _DeadlineReader(raw)
        self.rfile = io.BufferedReader(self._reader, 64 * 1024)

    def handle_one_request(self) -> None:
        """Wait for the next request under the idle deadline, then read its head under the header
        deadline; a silent or closed peer ends the connection without an error."""
        limits = self.server.limits
        self._phase(IDLE, limits.idle_timeout_s)
        try:
            if not self.rfile.peek(1):
                self.close_connection = True
                return
        except (TimeoutError, OSError):
            self.close_connection = True
            return
        self._phase(HEAD, limits.header_timeout_s)
        super().handle_one_request()

    def parse_request(self) -> bool:
        if not self.lean_head:
            return super().parse_request()
        raw = self.raw_requestline
        m = _LEAN_REQUEST_LINE.fullmatch(raw)
        if m is None:  # HTTP/0.9, 2.0, odd spacing, ...: the standard library's answers
            return super().parse_request()
        self.requestline = str(raw, "iso-8859-1").rstrip("\r\n")
        self.command = m[1].decode("ascii")
        path = m[2].decode("ascii")
        if path.startswith("//"):  # as the standard library: not a scheme-relative URL
            path = "/" + path.lstrip("/")
        self.path = path
        self.request_version = "HTTP/1." + m[3].decode("ascii")
        self.close_connection = m[3] == b"0" or self.protocol_version < "HTTP/1.1"
        lines = _read_header_lines(self.rfile)
        if isinstance(lines, str):
            detail = (f"got more than {_HEAD_LINE_MAX} bytes when reading header line"
                      if lines == "Line too long" else f"got more than {_HEAD_LINES_MAX} headers")
            self.send_error(431, lines, detail)
            return False
        headers: Any = LeanHeaders()
        for line in lines:
            h = _LEAN_HEADER_LINE.fullmatch(line)
            if h is None:  # obs-fold, no colon, non-ASCII, ...: email.parser reads it
                headers = email.parser.Parser(_class=self.MessageClass).parsestr(
                    b"".join(lines).decode("iso-8859-1"))
                break
            name = h[1].decode("ascii").lower()
            if not dict.__contains__(headers, name):
                dict.__setitem__(headers, name, h[2].decode("ascii"))
        self.headers = headers
        connection = (headers.get("Connection") or "").lower()
        if connection == "close":
            self.close_connection = True
        elif connection == "keep-alive" and self.protocol_version >= "HTTP/1.1":
            self.close_connection = False
        if ((headers.get("Expect") or "").lower() == "100-continue"
                and self.protocol_version >= "HTTP/1.1" and self.request_version >= "HTTP/1.1"):
            return self.handle_expect_100()
        return True

    def log_error(self, format: str, *args: Any) -> None:
        """As the base class, and count a read deadline that passed on the server."""
        if format.startswith("Request timed out"):
            self.server.count_timeout()
        self.log_message(format, *args)

    def begin_body(self, length: int | None) -> None:
        """The body of ``length`` bytes (``None``: chunked) is about to be read."""
        self._phase(BODY, self.server.limits.body_deadline_s(length))

    def end_body(self) -> None:
        """The body was read; the request is being served (no deadline, not evictable)."""
        self._phase(BUSY, None)

    def date_time_string(self, timestamp: float | None = None) -> str:
        """The ``Date`` header, formatted once a second (``email.utils.formatdate`` was a tenth
        of a small request's Python time), not once a response."""
        global _date_header
        if timestamp is not None:
            return super().date_time_string(timestamp)
        now = int(time.time())
        cached = _date_header
        if cached[0] != now:
            cached = _date_header = (now, super().date_time_string(now))
        return cached[1]

    def end_headers(self) -> None:
        """Send the head; from here on a write that does not progress within ``write_timeout_s``
        raises, so a client that does not read its answer cannot hold the thread."""
        self.connection.settimeout(self.server.limits.write_timeout_s)
        super().end_headers()

    def _phase(self, phase: str, timeout_s: float | None) -> None:
        self._reader.deadline = float("inf") if timeout_s is None else time.monotonic() + timeout_s
        self.server._set_phase(self.connection, phase)


def read_chunked(rfile: BinaryIO, limit: int) -> bytes:
    """A ``Transfer-Encoding: chunked`` body (RFC 9112 section 7.1), at most ``limit`` bytes.

    Each chunk size is validated (1-16 hex digits) and checked against the limit before the
    chunk is read; chunk extensions are ignored and trailer fields are read and dropped.
    Raises :class:`MalformedBody` or :class:`BodyTooLarge` (``consumed=False``: the rest is
    unread). Blocks on ``rfile``; a deadline on it ends a slow body with ``TimeoutError``.
    """
    parts: list[bytes] = []
    total = 0
    while True:
        line = rfile.readline(_MAX_CHUNK_LINE + 1)
        if not line.endswith(b"\n") or len(line) > _MAX_CHUNK_LINE:
            raise MalformedBody("invalid chunked encoding: chunk size line missing or too long")
        field = line.split(b";", 1)[0].strip()
        if not 1 <= len(field) <= 16 or field.strip(b"0123456789abcdefABCDEF"):
            raise MalformedBody(f"invalid chunked encoding: bad chunk size {field[:20]!r}")
        size = int(field, 16)
        if size == 0:
            for _ in range(_MAX_TRAILER_LINES):
                trailer = rfile.readline(_MAX_CHUNK_LINE + 1)
                if trailer in (b"\r\n", b"\n", b""):
                    return b"".join(parts)
            raise MalformedBody("invalid chunked encoding: too many trailer fields")
        total += size
        if total > limit:
            raise BodyTooLarge(f"chunked body exceeds {limit} bytes")
        chunk = rfile.read(size)
        if len(chunk) != size:
            raise MalformedBody("invalid chunked encoding: body ends inside a chunk")
        parts.append(chunk)
        if rfile.readline(3) not in (b"\r\n", b"\n"):
            raise MalformedBody("invalid chunked encoding: chunk not followed by CRLF")


def read_body(handler: GuardedRequestHandler, limit: int, *, drain_up_to: int = 0,
              require_length: bool = True) -> bytes:
    """The request body of ``handler``: ``Content-Length`` or chunked, at most ``limit`` bytes.

    A declared length over ``limit`` is refused before reading; if it exceeds the limit by at
    most ``drain_up_to`` bytes the body is read and dropped, so the client gets the 413 on a
    connection that stays usable (``BodyTooLarge.consumed``). Without either header the body
    is empty unless ``require_length`` (then :class:`MalformedBody`). Blocks; the body deadline
    of :class:`ConnectionLimits` applies.
    """
    headers = handler.headers
    rfile = handler.rfile
    if "chunked" in (headers.get("Transfer-Encoding") or "").lower():
        handler.begin_body(None)
        try:
            return read_chunked(rfile, limit)
        finally:
            handler.end_body()
    raw = headers.get("Content-Length")
    if raw is None:
        if require_length:
            raise MalformedBody("Content-Length or chunked Transfer-Encoding required")
        return b""
    raw = raw.strip()
    if not raw.isdigit() or not raw.isascii():
        raise MalformedBody(f"invalid Content-Length {raw[:20]!r}")
    length = int(raw)
    if length > limit:
        if 0 < length - limit <= drain_up_to:
            handler.begin_body(length)
            try:
                _skip(rfile, length)
            finally:
                handler.end_body()
            raise BodyTooLarge(f"body of {length} bytes exceeds {limit} bytes", consumed=True)
        raise BodyTooLarge(f"body of {length} bytes exceeds {limit} bytes")
    if not length:
        return b""
    handler.begin_body(length)
    try:
        body = rfile.read(length)
    finally:
        handler.end_body()
    if len(body) != length:
        raise MalformedBody("body shorter than Content-Length")
    return body


def _skip(rfile: BinaryIO, length: int) -> None:
    left = length
    while left > 0:
        chunk = rfile.read(min(left, 1 << 16))
        if not chunk:
            raise MalformedBody("body shorter than Content-Length")
        left -= len(chunk)


_INFLATE_STEP = 1 << 16  # input handed to zlib at once: bounds each copy of what is left over
_INFLATE_OUT_STEP = 1 << 20  # output zlib may produce per call: what on_output hears at most


def inflate_bounded(data: bytes, limit: int, encoding: Literal["gzip", "deflate"] = "gzip",
                    on_output: Callable[[int], None] | None = None) -> bytes:
    """``data`` decompressed per its HTTP content coding, refusing more than ``limit`` bytes out.

    ``gzip`` is RFC 1952, ``deflate`` the zlib format (RFC 9110 section 8.4.1.2). The output is
    bounded while it is produced (zlib's ``max_length``), so a bomb costs at most ``limit + 1``
    bytes of memory. What each edge case gets, the same for the collector and the facade:

    * concatenated members (RFC 1952 section 2.2, also zlib streams): decoded one after the
      other, the output joined, as gzip(1), Go's ``gzip.Reader`` and ClickHouse do;
    * zero bytes after the last member: ignored (tape padding, as gzip(1) and Python's
      ``GzipFile``); any other trailing data: :class:`MalformedBody`;
    * an empty or truncated stream (no complete member at the end): :class:`MalformedBody`;
    * output over ``limit``: :class:`BodyTooLarge` with ``consumed=True`` (the body was read).

    Pure CPU on the caller's thread; holds no lock. The input is handed to zlib in 64 KiB
    steps, so many tiny members cost linear time, not a copy of the rest per member.
    ``on_output(n)`` is called after each step of at most 1 MiB of output (a memory budget
    reserving as it goes); what it raises stops the inflation and propagates.
    """
    wbits = (16 if encoding == "gzip" else 0) + zlib.MAX_WBITS
    view = memoryview(data)
    out: list[bytes] = []
    total = 0
    member = zlib.decompressobj(wbits)
    started = False  # whether the current member has had any input
    pending: bytes | memoryview = b""
    pos = 0
    full = False  # the last call filled its output step: zlib may hold more for the next
    while True:
        if not pending and not full:
            if pos >= len(view):
                break
            pending = view[pos:pos + _INFLATE_STEP]
            pos += len(pending)
        if not started and pending[0] == 0:  # no gzip or zlib header starts with a zero byte
            if data.count(0, pos) == len(data) - pos and not bytes(pending).strip(b"\x00"):
                if out:
                    return b"".join(out)
                break  # zero bytes only: no member at all
            raise MalformedBody(f"invalid {encoding} body: data after the last member")
        started = True
        want = min(limit - total + 1, _INFLATE_OUT_STEP)
        try:
            chunk = member.decompress(pending, want)
        except zlib.error as exc:
            raise MalformedBody(f"invalid {encoding} body: {exc}") from exc
        total += len(chunk)
        if total > limit:  # max_length reached: the member holds more than the limit allows
            raise BodyTooLarge(f"decompressed body exceeds {limit} bytes", consumed=True)
        if on_output is not None and chunk:
            on_output(len(chunk))
        out.append(chunk)
        full = len(chunk) == want
        pending = member.unconsumed_tail  # input held back by the output step, at most a step
        if member.eof:
            pending = member.unused_data  # at most one step's worth
            member = zlib.decompressobj(wbits)
            started = full = False
    if started or not out:
        raise MalformedBody(f"truncated {encoding} body")
    return b"".join(out)


def serve_in_thread(server: GuardedHTTPServer, name: str,
                    poll_interval_s: float = 0.2) -> threading.Thread:
    """Run ``server.serve_forever`` on a daemon thread and return the started thread."""
    thread = threading.Thread(target=server.serve_forever,
                              kwargs={"poll_interval": poll_interval_s}, name=name, daemon=True)
    thread.start()
    return thread


def bearer_ok(header: str | None, token: str) -> bool:
    """``header`` is ``Bearer <token>`` (the scheme case-insensitive, RFC 9110); constant-time
    in the token (hmac.compare_digest). The OTLP receivers and the ClickHouse facade use it."""
    if not header or header[:7].lower() != "bearer ":
        return False
    return hmac.compare_digest(header[7:].strip().encode(), token.encode())


# Browser guard: what a web page can make a browser send to a local server ---------------------


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) only accepts connections from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _url_host(value: str) -> str:
    """The host of a ``Host`` header (``name[:port]``, ``[v6]:port``) or an ``Origin``
    (``scheme://host[:port]``), lower-case, without brackets."""
    if "://" in value:
        value = urlsplit(value).netloc
    value = value.strip().lower()
    if value.startswith("["):
        return value[1:value.find("]")] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


@functools.lru_cache(maxsize=256)
def names_this_machine(value: str) -> bool:
    """Whether a ``Host``/``Origin`` value names this machine: ``localhost`` (or a name under
    ``.localhost``) or a loopback address. Cached (a client sends the same ``Host`` with every
    request; parsing an address cost 2 % of the collector's Python CPU, issue 41)."""
    host = _url_host(value)
    return host == "localhost" or host.endswith(".localhost") or is_loopback(host)


def origin_allowed(origin: str, patterns: tuple[str, ...] | list[str]) -> bool:
    """Whether ``origin`` (``scheme://host[:port]``) matches one of ``patterns``, compared as
    otelcol's ``cors.allowed_origins``: case-insensitive, ``*`` alone allows every origin and a
    ``*`` inside a pattern stands for any run of characters of a host
    (``https://*.example.com``)."""
    origin = origin.strip().lower()
    for pattern in patterns:
        pattern = pattern.strip().lower()
        if pattern == "*" or pattern == origin:
            return True
        if "*" in pattern and re.fullmatch(
                ".*".join(re.escape(p) for p in pattern.split("*")).replace(".*", "[^/@]*"),
                origin):
            return True
    return False


def browser_refusal(headers: Any, *, check_host: bool,
                    allowed_origins: tuple[str, ...] | list[str] = ()) -> str | None:
    """Why a request a web page could have made a browser send is refused, or ``None``.

    Shared by the ClickHouse facade and the OTLP/HTTP receiver. With ``check_host`` (a listener
    no login protects, on loopback) the ``Host`` must name this machine: otherwise a page of
    evil.example whose name now resolves to 127.0.0.1 (DNS rebinding) is same-origin with the
    server. An ``Origin``, if sent, must name this machine or match ``allowed_origins``
    (:func:`origin_allowed`); a browser's ``Sec-Fetch-Site: cross-site`` (a no-cors request or
    an iframe, which carry no Origin) needs an allowed Origin too. Clients (SDK exporters,
    curl, clickhouse-connect) send a loopback ``Host`` and neither header."""
    host, origin = headers.get("Host"), headers.get("Origin")
    if check_host and host is not None and not names_this_machine(host):
        return (f"Host {host[:100]!r} does not name this machine; a loopback listener answers "
                "loopback names only (DNS rebinding guard)")
    allowed = origin is not None and origin_allowed(origin, allowed_origins)
    if origin is not None and not allowed and not names_this_machine(origin):
        return f"requests from web pages of {origin[:100]!r} are refused (cross-site guard)"
    site = headers.get("Sec-Fetch-Site")
    if site is not None and site.strip().lower() == "cross-site" and not allowed:
        return ("a request another site's page made a browser send is refused (Sec-Fetch-Site: "
                f"{site[:20]!r}; cross-site guard)")
    return None
