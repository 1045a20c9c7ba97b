"""OTLP/HTTP receiver: ``POST /v1/traces``, binary protobuf or JSON, optionally gzip-encoded.

Responses follow https://opentelemetry.io/docs/specs/otlp/#otlphttp-response : 200 with an
``ExportTraceServiceResponse`` (``partial_success`` when spans were rejected), 400 for a request
that cannot be decoded, 413 over the size limits, 415 for an unsupported content type or
encoding, 429/503 with ``Retry-After`` when the export queue is full or Kafka is unavailable.
Every 4xx/5xx body is a ``google.rpc.Status`` in the request's encoding (protobuf or JSON).

Served by the standard library's threading HTTP server (HTTP/1.1 keep-alive, one thread per
connection) with a hard cap on concurrent connections: at a few hundred spans per request the
per-request overhead is small next to decoding, and it needs no extra dependency.
"""

from __future__ import annotations

import json
import logging
import mmap
import os
import random
import socket
import ssl
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from google.protobuf import json_format
from google.rpc import code_pb2, status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from ragpulse.collector.config import OtlpSettings
from ragpulse.collector.exporter import ExportResult
from ragpulse.collector.ingest import Ingest
from ragpulse.collector.refusals import (
    Busy,
    ForeignOrigin,
    ShuttingDown,
    TooLarge,
    Unauthenticated,
    refusal_for,
)
from ragpulse.collector.split import MalformedRequest
from ragpulse.common import (
    BodyError,
    BodyTooLarge,
    ConnectionLimits,
    GuardedHTTPServer,
    GuardedRequestHandler,
    MalformedBody,
    bearer_ok,
    browser_refusal,
    inflate_bounded,
    is_loopback,
    origin_allowed,
    read_body,
    serve_in_thread,
)

__all__ = ["HttpReceiver", "SharedListener", "TooLarge"]

log = logging.getLogger(__name__)

TRACES_PATH = "/v1/traces"
PROTOBUF = "application/x-protobuf"
JSON = "application/json"
# Request headers a CORS preflight may always ask for (the CORS-safelisted ones, and the two an
# OTLP exporter sets), as otelcol's receiver allows them.
_CORS_HEADERS = frozenset({"accept", "accept-language", "content-language", "content-type",
                           "content-encoding"})


_DRAIN_MAX_BYTES = 8 << 20

# SharedListener: how long a process with more connections leaves a new one to a process with
# fewer (long against the scheduling delay of a loaded machine, short against a client's connect
# timeout), how often it looks, and the count a stopped process shows.
_ACCEPT_WAIT_S = 0.1
_ACCEPT_POLL_S = 0.001
_STOPPED = 1 << 30


class SharedListener:
    """One OTLP/HTTP listening socket served by several collector processes (``--workers``),
    and their live connection counts in shared memory (a memfd of one int32 per process, then
    the port's state).

    **The port opens only once every process serves.** The first process (index 0,
    :meth:`create`) binds the socket without listening; each worker inherits it, starts its
    exporter and receivers, and publishes a connection count of 0 (until then it shows as
    stopped). The first process waits for all of them (``ragpulse collector`` does, with a
    deadline) and only then calls :meth:`open`, which listens; every process's accept loop
    waits for that (:meth:`wait_open`). Before, the first process listened at once and took
    every connection made while the workers were still starting (1-3 s), and keep-alive clients
    stayed on it: after every restart the collector ran on one core (issue 41). A connection
    attempt before :meth:`open` is refused, as by a port nobody listens on, and the client
    retries.

    Every process is woken by poll() for a new connection and accepts it without blocking; one
    holding more connections than another first waits, up to :data:`_ACCEPT_WAIT_S`, for that one
    to take it (:meth:`wait_turn`), so clients spread evenly over the processes (4 clients on 2
    workers: 2 and 2). SO_REUSEPORT, used before, hashed each connection to a process at
    random: 4 clients on 2 workers were split 3/1 or 4/0 in 10 of the 16 equally likely cases,
    leaving most of a core idle (docs/benchmarks.md). Each worker gets :meth:`argument` and the
    :attr:`fds` to inherit, and rebuilds it with :meth:`from_argument`.
    """

    def __init__(self, sock: socket.socket, counts_fd: int, index: int, processes: int) -> None:
        self.socket = sock
        self.counts_fd = counts_fd
        self.index = index
        self.processes = processes
        self._map = mmap.mmap(counts_fd, 4 * (processes + 1))
        cells = memoryview(self._map).cast("i")
        self._counts = cells[:processes]
        self._state = cells[processes:]  # [1] once the first process listens

    @classmethod
    def create(cls, sock: socket.socket, processes: int) -> SharedListener:
        """The first process's side, for ``sock`` bound (not yet listening: :meth:`open`)."""
        fd = os.memfd_create("ragpulse-http-connections", 0)  # not inheritable unless passed
        os.ftruncate(fd, 4 * (processes + 1))
        sock.setblocking(False)  # the open file is shared: a process that lost the race gets EAGAIN
        shared = cls(sock, fd, 0, processes)
        for i in range(1, processes):
            shared._counts[i] = _STOPPED  # until the worker serves (nobody waits for it)
        return shared

    @classmethod
    def bind(cls, address: tuple[str, int], processes: int) -> SharedListener:
        """The first process's side, bound to ``address`` (``OSError`` when it is taken) and not
        listening yet (:meth:`open`), before any receiver exists: ``ragpulse collector`` spawns its
        workers on it before this process starts gRPC, Kafka or any other thread, then serves it
        too (``build_collector(http_shared=...)``, index 0)."""
        sock = socket.socket(_Server.address_family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the HTTP server binds
            sock.bind(address)
        except BaseException:
            sock.close()
            raise
        return cls.create(sock, processes)

    @property
    def fds(self) -> tuple[int, int]:
        """The descriptors a worker process must inherit (``subprocess.Popen(pass_fds=...)``)."""
        return self.socket.fileno(), self.counts_fd

    def argument(self, index: int) -> str:
        """What worker ``index`` (1 ..) passes to :meth:`from_argument`."""
        return f"{self.socket.fileno()},{self.counts_fd},{index},{self.processes}"

    @classmethod
    def from_argument(cls, value: str) -> SharedListener:
        listen_fd, counts_fd, index, processes = (int(v) for v in value.split(","))
        if not 0 < index < processes:
            raise ValueError(f"worker index {index} outside 1..{processes - 1}")
        return cls(socket.socket(fileno=listen_fd), counts_fd, index, processes)

    @property
    def is_open(self) -> bool:
        """Whether the port listens (:meth:`open` was called, by any process)."""
        return self._state[0] == 1

    def serving(self) -> list[bool]:
        """For each process (index 0 first): whether it serves (published a count, not
        stopped). Any process, any thread."""
        return [count != _STOPPED for count in self._counts]

    def open(self, backlog: int) -> None:
        """Listen (the first process, once every process serves or its wait is over): from now
        on connections are accepted, by whichever process holds the fewest."""
        self.socket.listen(backlog)
        self._state[0] = 1

    def wait_open(self, give_up: Callable[[], bool], poll_s: float = 0.002) -> bool:
        """Block until the port is open (``True``) or ``give_up()`` (``False``). An accept loop
        must not poll a socket that does not listen yet (poll() reports it at once: a busy
        loop)."""
        while not self.is_open:
            if give_up():
                return False
            time.sleep(poll_s)
        return True

    def connections(self) -> list[int | None]:
        """Each process's live connections (``None``: not serving). Any process, any thread."""
        return [None if count == _STOPPED else count for count in self._counts]

    def publish(self, connections: int) -> None:
        """This process now holds ``connections`` connections."""
        self._counts[self.index] = connections

    def wait_turn(self, connections: int) -> None:
        """Before accepting: wait while another process holds fewer connections (it takes this
        one), at most _ACCEPT_WAIT_S (a stuck or stopped process does not block the port).

        This process's own count is read again while it waits: a connection of this process
        that closes meanwhile publishes the lower count (a client that closes and reconnects at
        once is still counted when its new connection arrives), and a process must not wait for
        itself (it did: 0.1 s per new connection under clients that reconnect per request)."""
        counts = self._counts
        me = self.index
        counts[me] = connections
        if connections <= min(counts):
            return
        deadline = time.monotonic() + _ACCEPT_WAIT_S
        while time.monotonic() < deadline:
            time.sleep(_ACCEPT_POLL_S)
            if counts[me] <= min(counts):
                return

    def close(self) -> None:
        """This process stops accepting: the others no longer wait for it."""
        self._counts[self.index] = _STOPPED


class _Server(GuardedHTTPServer):
    def __init__(self, address: tuple[str, int], receiver: HttpReceiver,
                 shared: SharedListener | None = None) -> None:
        self.receiver = receiver
        s = receiver._settings
        limits = ConnectionLimits(
            max_connections=s.max_concurrent_requests, idle_timeout_s=s.idle_timeout_s,
            header_timeout_s=s.header_timeout_s, body_timeout_s=s.body_timeout_s,
            body_min_bytes_per_s=s.body_min_bytes_per_s, retry_after_s=s.retry_after_s)
        # The first process of several binds now and listens once every worker serves
        # (SharedListener.open); a worker serves the socket it inherited.
        self._defer_listen = shared is None and s.workers > 1
        super().__init__(address, _Handler, limits,
                         listen_socket=shared.socket if shared is not None else None)
        if self._defer_listen:
            shared = SharedListener.create(self.socket, s.workers)
        self.shared = shared
        if shared is not None:
            shared.publish(0)  # serving from now on

    def server_activate(self) -> None:
        if not self._defer_listen:
            super().server_activate()

    def get_request(self) -> tuple[socket.socket, Any]:
        if self.shared is not None:
            self.shared.wait_turn(self.connections())
        # Taken by another process meanwhile: BlockingIOError, which the accept loop ignores.
        return super().get_request()

    def process_request(self, request: Any, client_address: Any) -> None:
        super().process_request(request, client_address)
        if self.shared is not None:
            self.shared.publish(self.connections())

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            if self.shared is not None:
                self.shared.publish(self.connections())

    def wrap_connection(self, sock: socket.socket, client_address: Any) -> socket.socket | None:
        tls = self.receiver._tls
        if tls is None:
            return sock
        # The TLS handshake runs on the connection's own thread (never in the accept loop) and
        # within the head deadline: a slow or silent client cannot stall other connections.
        sock.settimeout(self.limits.header_timeout_s)
        try:
            return tls.wrap_socket(sock, server_side=True)
        except (ssl.SSLError, OSError) as exc:
            self.receiver._count("http_tls_failed")
            log.debug("http %s: TLS handshake failed: %s", client_address, exc)
            return None


class _Handler(GuardedRequestHandler):
    server_version = "ragpulse-collector"
    sys_version = ""
    lean_head = True
    no_cors = False  # set on a refused preflight (its connection is then closed)
    server: _Server
    # When this connection is retired (max_connection_age_s, max_connection_requests): the
    # answer that passes either limit says 'Connection: close'.
    _retire_at = float("inf")
    _requests_left = -1  # -1: no limit

    def setup(self) -> None:
        super().setup()
        s = self.server.receiver._settings
        if s.max_connection_age_s:
            self._retire_at = time.monotonic() + s.max_connection_age_s * random.uniform(0.9, 1.1)
        if s.max_connection_requests:
            self._requests_left = max(1, round(s.max_connection_requests * random.uniform(0.9, 1.1)))

    def retire(self) -> bool:
        """Whether the answer being sent is this connection's last (its age or request count
        passed its limit); counts one request."""
        self._requests_left -= 1
        return self._requests_left == 0 or time.monotonic() >= self._retire_at

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("http %s " + format, self.address_string(), *args)

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        # One line per request at DEBUG: skip formatting it otherwise (3 us a request).
        if log.isEnabledFor(logging.DEBUG):
            super().log_request(code, size)

    def do_POST(self) -> None:
        self.server.receiver._handle(self)

    def do_OPTIONS(self) -> None:
        self.server.receiver._preflight(self)

    def end_headers(self) -> None:
        # Every answer to a request from an allowed web page's origin lets that page read it.
        headers = getattr(self, "headers", None)
        origin = headers.get("Origin") if headers is not None and not self.no_cors else None
        if origin and origin_allowed(origin, self.server.receiver._settings.cors_allowed_origins):
            self.send_header("Access-Control-Allow-Origin", origin)
            self.send_header("Vary", "Origin")
        super().end_headers()

    def do_GET(self) -> None:
        self._reply_plain(405, b"POST OTLP traces to /v1/traces\n", extra={"Allow": "POST"})

    do_PUT = do_DELETE = do_PATCH = do_GET

    def _reply_plain(self, code: int, body: bytes, extra: dict[str, str] | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)


class HttpReceiver:
    """Serves OTLP/HTTP on ``settings.http_host:http_port`` (port 0: a free one), or, in a
    worker process, on the listening socket of the process that bound it (``shared``).

    ``start()`` binds and returns once the socket listens (raises ``OSError`` if the address is
    taken). ``shutdown()`` is idempotent and safe without ``start()``: it stops accepting, waits
    up to ``drain_timeout_s`` for requests in progress, then closes idle keep-alive connections.
    Requests arriving during shutdown get 503.
    """

    def __init__(self, settings: OtlpSettings, ingest: Ingest, *,
                 shared: SharedListener | None = None) -> None:
        self._settings = settings
        self._ingest = ingest
        self._shared = shared
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Condition()
        self._active_requests = 0
        self._inflight_bytes = 0
        self._closing = False
        self._stats = {
            "http_requests": 0,
            "http_refused_busy": 0,
            "http_too_large": 0,
            "http_unsupported": 0,
            "http_unauthenticated": 0,
            "http_refused_origin": 0,
            "http_tls_failed": 0,
            "http_connections_retired": 0,
        }
        # A loopback listener no token protects is what DNS rebinding reaches: check Host there.
        self._check_host = is_loopback(settings.http_host)
        self._stopped_server: _Server | None = None
        self._tls: ssl.SSLContext | None = None
        if settings.tls_cert_file and settings.tls_key_file:
            # Built here so a bad certificate or key fails at start-up, with the file named.
            self._tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            self._tls.load_cert_chain(settings.tls_cert_file, settings.tls_key_file)

    @property
    def port(self) -> int:
        """The bound port. Only after :meth:`start` (asserts it)."""
        assert self._server is not None, "not started"
        return int(self._server.server_address[1])

    @property
    def shared(self) -> SharedListener | None:
        """The listening socket worker processes serve too (``workers > 1``), once started."""
        assert self._server is not None, "not started"
        return self._server.shared

    @property
    def endpoint(self) -> str:
        """``http(s)://host:port/v1/traces`` to point an OTLP/HTTP exporter at."""
        scheme = "https" if self._tls is not None else "http"
        return f"{scheme}://{self._settings.http_host}:{self.port}{TRACES_PATH}"

    def start(self) -> None:
        """Bind (``OSError`` when the port is taken; ``RuntimeError`` on a second start) and serve
        on a daemon thread, one thread per connection. Returns at once. The first process of
        ``workers > 1`` binds without listening: its port opens with :meth:`open`."""
        if self._server is not None or self._closing:
            raise RuntimeError("HTTP receiver already started or shut down")
        self._server = server = _Server((self._settings.http_host, self._settings.http_port),
                                        self, self._shared)
        shared = server.shared
        if shared is None or shared.is_open:
            self._thread = serve_in_thread(server, "otlp-http", poll_interval_s=0.5)
            return

        def serve_once_open() -> None:
            # Until the port listens, poll() would report the socket at once (a busy loop);
            # shutdown() before that still finds serve_forever to stop.
            shared.wait_open(lambda: self._closing)
            server.serve_forever(poll_interval=0.5)

        self._thread = threading.Thread(target=serve_once_open, name="otlp-http", daemon=True)
        self._thread.start()

    def open(self) -> None:
        """Let the port accept connections (the first of several processes, once its workers
        serve: :class:`SharedListener`); a no-op where it already listens. Any thread."""
        server = self._server
        if server is not None and server.shared is not None and not server.shared.is_open:
            server.shared.open(server.request_queue_size)

    @property
    def is_open(self) -> bool:
        """Whether the port accepts connections (started, and opened where it was deferred)."""
        server = self._server
        return server is not None and (server.shared is None or server.shared.is_open)

    def shutdown(self, drain_timeout_s: float = 10.0) -> None:
        """Stop accepting, wait up to ``drain_timeout_s`` for requests in progress, then close idle
        keep-alive connections. Blocks; idempotent; any thread but a handler's."""
        with self._lock:
            if self._closing:
                return
            self._closing = True
        server, self._server = self._server, None
        if server is None:
            return
        server.stop_accepting()
        if server.shared is not None:
            server.shared.close()
        server.shutdown()  # stop the accept loop (blocks up to poll_interval)
        server.server_close()
        with self._lock:
            self._lock.wait_for(lambda: self._active_requests == 0, timeout=drain_timeout_s)
        # Wake handler threads blocked reading the next keep-alive request.
        server.close_idle()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._stopped_server = server

    def stats(self) -> dict[str, int]:
        """A snapshot of the HTTP counters, connection guard included (kept after shutdown).
        Thread-safe."""
        server = self._server or self._stopped_server
        guard = server.stats() if server is not None else {}
        with self._lock:
            return {**self._stats, "http_inflight_bytes": self._inflight_bytes,
                    "http_connections_refused": guard.get("connections_refused", 0),
                    "http_connections_evicted": guard.get("connections_evicted", 0),
                    "http_requests_timed_out": guard.get("requests_timed_out", 0)}

    # request handling ---------------------------------------------------------------------------

    def _handle(self, h: _Handler) -> None:
        with self._lock:
            self._active_requests += 1
            self._stats["http_requests"] += 1
        try:
            self._handle_request(h)
        finally:
            with self._lock:
                self._active_requests -= 1
                if self._closing:
                    h.close_connection = True
                self._lock.notify_all()

    def _handle_request(self, h: _Handler) -> None:
        settings = self._settings
        content_type = (h.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        as_json = content_type == JSON
        why = browser_refusal(h.headers, check_host=self._check_host,
                              allowed_origins=settings.cors_allowed_origins)
        if why is not None:  # before the token and the body: a web page costs nothing
            self._count("http_refused_origin")
            h.close_connection = True
            self._refuse(h, ForeignOrigin(why), as_json)
            return
        if settings.auth_token is not None and not bearer_ok(
                h.headers.get("Authorization"), settings.auth_token.get_secret_value()):
            # Before reading the body: an unauthenticated client costs no receive budget.
            self._count("http_unauthenticated")
            h.close_connection = True
            self._refuse(h, Unauthenticated(), as_json, extra={"WWW-Authenticate": 'Bearer realm="otlp"'})
            return
        path = h.path.split("?", 1)[0]
        if path != TRACES_PATH:
            self._discard_body(h)
            self._reply_status(h, 404, code_pb2.NOT_FOUND, f"no such path {path}; use {TRACES_PATH}", as_json)
            return
        if content_type == "application/protobuf":  # seen from some clients; same encoding
            content_type = PROTOBUF
        if content_type not in (PROTOBUF, JSON):
            self._count("http_unsupported")
            self._discard_body(h)
            self._reply_status(
                h, 415, code_pb2.INVALID_ARGUMENT,
                f"unsupported Content-Type {content_type or '(none)'!r}; use {PROTOBUF} or {JSON}", False,
            )
            return
        encoding = (h.headers.get("Content-Encoding") or "identity").strip().lower()
        if encoding not in ("identity", "gzip"):
            self._count("http_unsupported")
            self._discard_body(h)
            self._reply_status(h, 415, code_pb2.INVALID_ARGUMENT, f"unsupported Content-Encoding {encoding!r}", as_json)
            return
        # Reserve the declared body size in the receive budget before reading it: concurrent
        # large requests cannot together hold more than max_inflight_bytes.
        raw_length = h.headers.get("Content-Length") or ""
        declared = int(raw_length) if raw_length.strip().isdigit() else settings.max_body_bytes
        declared = min(declared, settings.max_body_bytes)
        if not self._reserve(declared):
            self._discard_body(h)
            self._refuse(h, Busy("receive buffer full: too many large requests in progress"), as_json)
            return
        held = [declared]
        try:
            answer = self._process(h, encoding, as_json, held)
        finally:
            # Given back before answering: a client that sends its next request as soon as it
            # reads the answer must find the budget free.
            self._release(sum(held))
        answer()

    def _preflight(self, h: _Handler) -> None:
        """A CORS preflight (``OPTIONS``): 204 with the CORS headers for an allowed origin asking
        for POST and allowed headers, as otelcol's receiver answers (no token: a preflight never
        carries one); 403 otherwise, counted. An OPTIONS without an Origin is not a preflight."""
        settings = self._settings
        with self._lock:
            self._stats["http_requests"] += 1
        self._discard_body(h)
        origin = h.headers.get("Origin")
        if origin is None:
            h._reply_plain(204, b"", extra={"Allow": "POST, OPTIONS"})
            return
        asked = {name.strip().lower() for name in
                 (h.headers.get("Access-Control-Request-Headers") or "").split(",") if name.strip()}
        allowed_headers = {name.lower() for name in settings.cors_allowed_headers}
        why = browser_refusal(h.headers, check_host=self._check_host,
                              allowed_origins=settings.cors_allowed_origins)
        if why is None and not origin_allowed(origin, settings.cors_allowed_origins):
            why = f"origin {origin[:100]!r} is not in otlp.cors_allowed_origins"
        method = (h.headers.get("Access-Control-Request-Method") or "").strip().upper()
        if why is None and method != "POST":
            why = f"method {method[:20]!r} is not allowed (POST only)"
        if why is None and "*" not in allowed_headers and not asked <= _CORS_HEADERS | allowed_headers:
            why = (f"headers {sorted(asked - _CORS_HEADERS - allowed_headers)!r} are not in "
                   "otlp.cors_allowed_headers")
        if why is not None:
            self._count("http_refused_origin")
            h.no_cors = h.close_connection = True
            h._reply_plain(403, f"CORS preflight refused: {why}\n".encode())
            return
        extra = {"Access-Control-Allow-Methods": "POST"}
        if asked:
            extra["Access-Control-Allow-Headers"] = ", ".join(sorted(asked))
        if settings.cors_max_age_s:
            extra["Access-Control-Max-Age"] = str(settings.cors_max_age_s)
        h._reply_plain(204, b"", extra=extra)

    def _reserve(self, size: int) -> bool:
        with self._lock:
            # Always admit a request when nothing else is buffered (it fits by validation).
            if self._inflight_bytes and self._inflight_bytes + size > self._settings.max_inflight_bytes:
                self._stats["http_refused_busy"] += 1
                return False
            self._inflight_bytes += size
            return True

    def _grow(self, held: list[int], size: int) -> None:
        """Reserve ``size`` more bytes for the request holding ``held`` (its decompressed body,
        as it is inflated); :class:`Busy` (429) when others hold the rest of the budget. A
        request alone may grow past it (one request always fits, as in :meth:`_reserve`)."""
        with self._lock:
            others = self._inflight_bytes - sum(held)
            if others and self._inflight_bytes + size > self._settings.max_inflight_bytes:
                self._stats["http_refused_busy"] += 1
                raise Busy("receive buffer full: too many large decompressed requests in progress")
            self._inflight_bytes += size
            held.append(size)

    def _release(self, size: int) -> None:
        with self._lock:
            self._inflight_bytes -= size

    def _process(self, h: _Handler, encoding: str, as_json: bool,
                 held: list[int]) -> Callable[[], None]:
        """Read, decode and ingest the body; returns the answer to write once the caller has
        released everything in ``held`` (the declared size, and the decompressed copy)."""
        settings = self._settings
        try:
            body = self._read_body(h, settings.max_body_bytes)
            if encoding == "gzip":
                # The decompressed copy is reserved as it is produced, 1 MiB at a time: a few KB
                # of gzip can hold the full max_decompressed_bytes.
                body = self._gunzip(body, settings.max_decompressed_bytes, partial(self._grow, held))
        except Busy as exc:  # the body was read: the connection stays usable
            return partial(self._refuse, h, exc, as_json)
        except TooLarge as exc:
            self._count("http_too_large")
            if not exc.body_consumed:
                h.close_connection = True  # the rest of the body was not read
            return partial(self._refuse, h, exc, as_json)
        except MalformedRequest as exc:
            self._ingest._count(requests_received=1, requests_malformed=1)
            return partial(self._refuse, h, exc, as_json)
        if self._closing:
            return partial(self._refuse, h, ShuttingDown(), as_json)
        try:
            result = self._ingest.consume_json(body) if as_json else self._ingest.consume_proto(body)
        except Exception as exc:  # the table answers; a bug is a logged, non-retryable 500
            return partial(self._refuse, h, exc, as_json)
        return partial(self._reply_ok, h, result, as_json)

    def _refuse(self, h: _Handler, exc: BaseException, as_json: bool,
                extra: dict[str, str] | None = None) -> None:
        """Answer ``exc`` as the shared table says (:func:`refusal_for`)."""
        r = refusal_for(exc, self._settings.retry_after_s)
        self._reply_status(h, r.http_status, r.rpc_code, r.message, as_json,
                           retry_after=r.retry_after_s, extra=extra)

    def _count(self, name: str) -> None:
        with self._lock:
            self._stats[name] += 1

    @staticmethod
    def _read_body(h: _Handler, limit: int) -> bytes:
        """The body (``Content-Length`` or chunked), as :class:`TooLarge` / ``MalformedRequest``.
        A moderately oversized body is read and dropped so the client sees the 413 instead of
        a connection reset; beyond that the connection is closed unread."""
        try:
            return read_body(h, limit, drain_up_to=_DRAIN_MAX_BYTES)
        except BodyTooLarge as exc:
            raise TooLarge(str(exc), exc.consumed) from None
        except MalformedBody as exc:
            h.close_connection = True
            raise MalformedRequest(str(exc)) from None

    @staticmethod
    def _gunzip(body: bytes, limit: int, reserve: Callable[[int], None]) -> bytes:
        """The gzip body inflated within ``limit`` (:func:`inflate_bounded`, ``reserve`` told
        of each step of output), as :class:`TooLarge` (413) / ``MalformedRequest`` (400); the
        connection stays usable."""
        try:
            return inflate_bounded(body, limit, "gzip", reserve)
        except BodyTooLarge as exc:
            raise TooLarge(str(exc), exc.consumed) from None
        except MalformedBody as exc:
            raise MalformedRequest(str(exc)) from None

    @staticmethod
    def _discard_body(h: _Handler) -> None:
        # Keep the connection usable for the next request when the body is small enough to skip.
        try:
            read_body(h, 1 << 20, require_length=False)
        except BodyError:
            h.close_connection = True

    @staticmethod
    def _reply_ok(h: _Handler, result: ExportResult, as_json: bool) -> None:
        if not (result.rejected_spans or result.message):  # the usual answer: all accepted
            _send(h, 200, JSON if as_json else PROTOBUF, _ALL_ACCEPTED_JSON if as_json else _ALL_ACCEPTED)
            return
        response = ExportTraceServiceResponse()
        response.partial_success.rejected_spans = result.rejected_spans  # a message alone is a warning
        response.partial_success.error_message = result.message
        if as_json:
            body = json.dumps(json_format.MessageToDict(response)).encode()
        else:
            body = response.SerializeToString()
        _send(h, 200, JSON if as_json else PROTOBUF, body)

    @staticmethod
    def _reply_status(
        h: _Handler, http_code: int, rpc_code: int, message: str, as_json: bool, retry_after: int | None = None,
        extra: dict[str, str] | None = None,
    ) -> None:
        status = status_pb2.Status(code=rpc_code, message=message)
        if as_json:
            body = json.dumps(json_format.MessageToDict(status)).encode()
        else:
            body = status.SerializeToString()
        headers = dict(extra or {})
        if retry_after is not None:
            headers["Retry-After"] = str(retry_after)
        _send(h, http_code, JSON if as_json else PROTOBUF, body, headers)


# An ExportTraceServiceResponse without partial success, serialized once.
_ALL_ACCEPTED = ExportTraceServiceResponse().SerializeToString()
_ALL_ACCEPTED_JSON = json.dumps(json_format.MessageToDict(ExportTraceServiceResponse())).encode()


def _send(h: _Handler, code: int, content_type: str, body: bytes, extra: dict[str, str] | None = None) -> None:
    h.send_response(code)
    h.send_header("Content-Type", content_type)
    h.send_header("Content-Length", str(len(body)))
    for k, v in (extra or {}).items():
        h.send_header(k, v)
    if not h.close_connection and h.retire():
        # Old enough: the client reconnects, to the process with the fewest connections.
        h.close_connection = True
        h.server.receiver._count("http_connections_retired")
    if h.close_connection:
        h.send_header("Connection", "close")
    h.end_headers()
    h.wfile.write(body)
