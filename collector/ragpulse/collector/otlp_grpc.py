"""OTLP/gRPC receiver: ``opentelemetry.proto.collector.trace.v1.TraceService/Export``.

Registered as a generic handler without a request deserializer, so the handler receives the raw
request bytes and shares the byte-level path of :class:`~ragpulse.collector.ingest.Ingest` with
OTLP/HTTP (no Python message objects per span). Status codes follow
https://opentelemetry.io/docs/specs/otlp/#otlpgrpc-response : INVALID_ARGUMENT for undecodable
data (not retryable), RESOURCE_EXHAUSTED when the export queue is full and UNAVAILABLE when Kafka
is, both carrying a ``google.rpc.RetryInfo`` detail (the ``grpc-status-details-bin`` trailer, as
grpcio-status would send it) so OTLP exporters back off for the suggested delay.

Calls beyond the concurrency limit are refused the same way. grpcio's own
``maximum_concurrent_rpcs`` refusal is a bare RESOURCE_EXHAUSTED, which the OTLP spec makes
non-retryable (the Go SDK and otelcol drop the data), so the limit is applied here instead, by
:class:`_Admission`, on grpcio's serving thread before a handler thread is taken or the message
read; grpcio's limit stays only as a backstop far above it.
"""

from __future__ import annotations

import itertools
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

import grpc
from google.protobuf import any_pb2, duration_pb2
from google.rpc import error_details_pb2, status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from ragpulse.collector.config import OtlpSettings
from ragpulse.collector.ingest import Ingest
from ragpulse.collector.refusals import Busy, Refusal, ShuttingDown, Unauthenticated, refusal_for
from ragpulse.common import bearer_ok

__all__ = ["GrpcReceiver"]


SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"
EXPORT = f"/{SERVICE}/Export"

# Calls grpcio may hold beyond the admission limit before it refuses on its own (no RetryInfo).
# A refused call's message is never read (the refusing handler takes the request stream and
# never iterates it), so each holds grpcio's call state plus what HTTP/2 flow control let the
# client send ahead: one stream window.
_REFUSAL_BACKLOG = 1024


class _Status(NamedTuple):  # implements grpc.Status for abort_with_status
    code: grpc.StatusCode
    details: str
    trailing_metadata: tuple[tuple[str, bytes], ...]


_GRPC_STATUS = {s.value[0]: s for s in grpc.StatusCode}  # google.rpc.Code number -> grpc status


def _abort(context: grpc.ServicerContext, refusal: Refusal) -> None:
    """End the call with ``refusal``'s status (raises, as ``context.abort`` does). A retryable
    refusal carries a ``google.rpc.RetryInfo`` detail in ``grpc-status-details-bin``, as
    grpcio-status would send it, so OTLP exporters back off for the suggested delay."""
    code = _GRPC_STATUS[refusal.rpc_code]
    if refusal.retry_after_s is None:
        context.abort(code, refusal.message)
    detail = any_pb2.Any()
    detail.Pack(error_details_pb2.RetryInfo(
        retry_delay=duration_pb2.Duration(seconds=refusal.retry_after_s)))
    rich = status_pb2.Status(code=refusal.rpc_code, message=refusal.message, details=[detail])
    context.abort_with_status(_Status(code, refusal.message,
                                      (("grpc-status-details-bin", rich.SerializeToString()),)))


class _Admission(grpc.GenericRpcHandler):
    """Admits at most ``limit`` Export calls at once (running or waiting for a handler thread).

    grpcio calls :meth:`service` on its serving thread for every new call, before the call takes
    a pool thread or its message is read; a call over the limit gets the ``refuse`` handler
    instead (RESOURCE_EXHAUSTED with RetryInfo), run on its own small thread pool so refusals
    do not queue behind exports. Both handlers are request-streaming: grpcio then always runs
    them (also when the client has gone), which is where an admitted call's slot is released.

    The login is checked here, from the call's metadata, before a slot is taken: a caller
    without the token gets the ``unauthenticated`` handler (same pool as refusals), so calls
    that never send a message cannot hold the slots of those that have the token."""

    def __init__(self, limit: int, export: Any, refuse: Any, unauthenticated: Any,
                 authorized: Any) -> None:
        self._limit = limit
        self._lock = threading.Lock()
        self._admitted = 0
        self.refused = 0
        self._export = grpc.stream_unary_rpc_method_handler(export)
        self._refuse = grpc.stream_unary_rpc_method_handler(refuse)
        self._unauthenticated = grpc.stream_unary_rpc_method_handler(unauthenticated)
        self._authorized = authorized

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        if handler_call_details.method != EXPORT:  # type: ignore[attr-defined]
            return None
        if not self._authorized(handler_call_details.invocation_metadata):  # type: ignore[attr-defined]
            return self._unauthenticated
        with self._lock:
            if self._admitted >= self._limit:
                self.refused += 1
                return self._refuse
            self._admitted += 1
        return self._export

    def release(self) -> None:
        with self._lock:
            self._admitted -= 1


class _ReadDeadlines:
    """Cancels admitted calls that have not sent their message by their deadline. One thread
    checks every call ``tick_s`` (a ``threading.Timer`` per call cost 0.1-0.2 ms of each export);
    adding and removing a call is a dict operation under a lock."""

    def __init__(self, tick_s: float = 0.5) -> None:
        self._tick_s = tick_s
        self._lock = threading.Lock()
        self._calls: dict[int, tuple[float, grpc.ServicerContext]] = {}
        self._keys = itertools.count()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="otlp-grpc-deadlines", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._stop.set()

    def add(self, context: grpc.ServicerContext, timeout_s: float) -> int:
        with self._lock:
            key = next(self._keys)
            self._calls[key] = (time.monotonic() + timeout_s, context)
        return key

    def remove(self, key: int) -> None:
        with self._lock:
            self._calls.pop(key, None)

    def _run(self) -> None:
        while not self._stop.wait(self._tick_s):
            now = time.monotonic()
            with self._lock:
                late = [k for k, (due, _) in self._calls.items() if due <= now]
                contexts = [self._calls.pop(k)[1] for k in late]
            for context in contexts:
                context.cancel()


class GrpcReceiver:
    """Serves OTLP/gRPC on ``settings.grpc_host:grpc_port`` (port 0: a free one).

    ``start()`` binds (raises ``RuntimeError`` if the address cannot be bound) and returns.
    ``shutdown()`` is idempotent and safe without ``start()``: new RPCs are refused at once,
    RPCs in progress get up to ``drain_timeout_s`` to finish.
    """

    def __init__(self, settings: OtlpSettings, ingest: Ingest) -> None:
        self._settings = settings
        self._ingest = ingest
        self._server: grpc.Server | None = None
        self._port = 0
        self._closed = False
        self._lock = threading.Lock()
        self._requests = 0
        self._unauthenticated = 0
        self._admission: _Admission | None = None
        self._refusing: ThreadPoolExecutor | None = None
        self._deadlines = _ReadDeadlines()

    @property
    def port(self) -> int:
        """The bound port; 0 before :meth:`start`."""
        return self._port

    @property
    def endpoint(self) -> str:
        """``host:port`` to point an OTLP/gRPC exporter at."""
        return f"{self._settings.grpc_host}:{self._port}"

    def start(self) -> None:
        """Bind and start grpcio's server (its own threads serve the calls) and return. Raises
        ``RuntimeError`` when the address cannot be bound or on a second start."""
        if self._server is not None or self._closed:
            raise RuntimeError("gRPC receiver already started or shut down")
        s = self._settings
        # Beyond this many Export calls in progress (running or waiting for a handler thread) a
        # call is refused with RetryInfo; with max_receive_message_length this bounds the memory
        # held by received requests to about 2 * grpc_workers * max_body_bytes.
        limit = min(s.max_concurrent_requests, 2 * s.grpc_workers)
        self._refusing = ThreadPoolExecutor(max_workers=1, thread_name_prefix="otlp-grpc-refuse")

        def refuse(requests: Any, context: grpc.ServicerContext) -> bytes:
            self._refuse_busy(context)
            return b""

        def unauthenticated(requests: Any, context: grpc.ServicerContext) -> bytes:
            with self._lock:
                self._requests += 1
                self._unauthenticated += 1
            _abort(context, refusal_for(Unauthenticated(), s.retry_after_s))
            return b""

        refuse.experimental_thread_pool = self._refusing  # type: ignore[attr-defined]
        unauthenticated.experimental_thread_pool = self._refusing  # type: ignore[attr-defined]
        self._admission = _Admission(limit, self._export_call, refuse, unauthenticated,
                                     self._authorized)
        server = grpc.server(
            ThreadPoolExecutor(max_workers=s.grpc_workers, thread_name_prefix="otlp-grpc"),
            # grpcio's own limit, a backstop only: its refusal carries no RetryInfo.
            maximum_concurrent_rpcs=limit + _REFUSAL_BACKLOG,
            options=[
                # Applies to the decompressed message, so it also bounds grpc-encoding: gzip.
                ("grpc.max_receive_message_length", s.max_body_bytes),
                # Shared only between the workers of one collector; otherwise a second collector
                # on the same port must fail to start instead of silently splitting the traffic.
                ("grpc.so_reuseport", 1 if s.workers > 1 else 0),
                # GOAWAY after about this long (grpcio adds +-10 % jitter), so a client's
                # reconnection can land on another worker; calls in progress get the grace.
                *((("grpc.max_connection_age_ms", round(s.max_connection_age_s * 1000)),
                   ("grpc.max_connection_age_grace_ms",
                    round(s.max_connection_age_grace_s * 1000)))
                  if s.max_connection_age_s else ()),
            ],
        )
        server.add_generic_rpc_handlers((self._admission,))
        try:
            address = f"{s.grpc_host}:{s.grpc_port}"
            if s.tls_cert_file and s.tls_key_file:
                with open(s.tls_key_file, "rb") as key, open(s.tls_cert_file, "rb") as cert:
                    creds = grpc.ssl_server_credentials([(key.read(), cert.read())])
                self._port = server.add_secure_port(address, creds)
            else:
                self._port = server.add_insecure_port(address)
        except RuntimeError as exc:
            raise RuntimeError(f"cannot bind OTLP/gRPC on {s.grpc_host}:{s.grpc_port}: {exc}") from exc
        if self._port == 0:
            raise RuntimeError(f"cannot bind OTLP/gRPC on {s.grpc_host}:{s.grpc_port}")
        self._deadlines.start()
        server.start()
        self._server = server

    def shutdown(self, drain_timeout_s: float = 10.0) -> None:
        """Refuse new calls and wait up to ``drain_timeout_s`` (plus 1 s) for those in progress.
        Idempotent; any thread."""
        if self._closed:
            return
        self._closed = True
        server, self._server = self._server, None
        if server is not None:
            server.stop(grace=drain_timeout_s).wait(drain_timeout_s + 1)
        if self._refusing is not None:
            self._refusing.shutdown(wait=False)
        self._deadlines.close()

    def _refuse_busy(self, context: grpc.ServicerContext) -> None:
        with self._lock:
            self._requests += 1
        _abort(context, refusal_for(Busy("too many concurrent export calls"),
                                    self._settings.retry_after_s))

    def _authorized(self, metadata: Any) -> bool:
        token = self._settings.auth_token
        if token is None:
            return True
        header = dict(metadata or ()).get("authorization")
        return bearer_ok(header if isinstance(header, str) else None, token.get_secret_value())

    def _export_call(self, requests: Any, context: grpc.ServicerContext) -> bytes:
        """An admitted call: read its one message within the time an HTTP body of the largest
        size gets (``body_timeout_s`` + ``max_body_bytes`` at ``body_min_bytes_per_s``; then
        the call is cancelled, so a client that never sends cannot keep its slot), export it,
        give the slot back."""
        s = self._settings
        key = self._deadlines.add(context, s.body_timeout_s + s.max_body_bytes / s.body_min_bytes_per_s)
        try:
            try:
                request = next(requests, None)
            finally:
                self._deadlines.remove(key)
            if request is None:  # the client went away, sent no message or ran out of time
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, "no request message")
            return self._export(request, context)
        finally:
            assert self._admission is not None
            self._admission.release()

    def _export(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        retry = self._settings.retry_after_s
        with self._lock:
            self._requests += 1
        if self._closed:
            _abort(context, refusal_for(ShuttingDown(), retry))
        try:
            result = self._ingest.consume_proto(request)
        except Exception as exc:  # the table answers; a bug is a logged INTERNAL
            _abort(context, refusal_for(exc, retry))
        response = ExportTraceServiceResponse()
        if result.rejected_spans or result.message:  # a message alone is a warning
            response.partial_success.rejected_spans = result.rejected_spans
            response.partial_success.error_message = result.message
        return response.SerializeToString()

    def stats(self) -> dict[str, int]:
        """A snapshot of the gRPC counters. Thread-safe."""
        with self._lock:
            out = {"grpc_requests": self._requests, "grpc_unauthenticated": self._unauthenticated}
        out["grpc_refused_busy"] = self._admission.refused if self._admission is not None else 0
        return out
