"""Health and metrics endpoints for ``ragpulse collector`` and ``ragpulse scorer`` in containers.

A small threaded HTTP server (stdlib, one port, ``RAGPULSE_HEALTH__*``):

* ``GET /healthz``: liveness. 200 while the process serves and its ``live`` callable (if any)
  does not raise; 503 otherwise, so an orchestrator restarts a wedged or failed component.
* ``GET /readyz``: readiness. 200 only when every readiness check passed (Kafka answers an
  ``ApiVersions`` request, ClickHouse answers ``SELECT 1``) and the component is not draining;
  503 with a JSON body naming the failing check otherwise. Checks run on their own threads with
  a timeout and their results are cached for ``check_interval_s``, so scrapes never pile up
  probes against a slow dependency.
* ``GET /metrics``: Prometheus text (:func:`ragpulse.deploy.telemetry.render_prometheus`).

:func:`start_observability` wires the server and the optional OTLP metrics push for one
component; the CLIs call it after their service started and ``drain()``/``shutdown()`` it when
they stop.
"""

from __future__ import annotations

import base64
import json
import logging
import socket
import ssl
import struct
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from .telemetry import (
    OtlpMetricsExporter,
    StatsSource,
    TelemetrySettings,
    pipeline_health_recorder,
    render_prometheus,
)

__all__ = [
    "CheckResult",
    "HealthServer",
    "HealthSettings",
    "Observability",
    "ObservabilitySettings",
    "ProbeError",
    "clickhouse_probe",
    "kafka_probe",
    "start_observability",
]

log = logging.getLogger(__name__)

Check = Callable[[], None]
"""A readiness check: returns when the dependency answers, raises (any exception) when not."""


class ProbeError(RuntimeError):
    """A dependency did not answer a readiness probe as expected."""


class HealthSettings(BaseModel):
    """The health/metrics HTTP endpoint (``RAGPULSE_HEALTH__*``). Off unless enabled.

    Loopback by default like every ragpulse listener; the container image sets ``host=0.0.0.0``
    and ``enabled=true`` so the kubelet and Prometheus can reach it.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    enabled: bool = False
    host: str = "127.0.0.1"
    port: int = Field(
        9464,
        ge=0,
        le=65535,
        description="0 picks a free port (tests); 9464 is "
        "the OpenTelemetry Prometheus exporter's conventional port",
    )
    check_timeout_s: float = Field(2.0, gt=0.0, le=60.0, description="one readiness probe's budget")
    check_interval_s: float = Field(
        2.0, ge=0.0, le=300.0, description="reuse a probe result this long (bounds probe traffic)"
    )
    max_concurrent_requests: int = Field(16, ge=1, le=1024, description="more get 503 at once")


class ObservabilitySettings(BaseSettings):
    """Health endpoint and OTLP metrics of one component, from ``RAGPULSE_HEALTH__*`` and
    ``RAGPULSE_TELEMETRY__*`` (the component's own settings ignore these variables)."""

    model_config = SettingsConfigDict(
        env_prefix="RAGPULSE_", env_nested_delimiter="__", frozen=True, extra="ignore"
    )

    health: HealthSettings = Field(default_factory=HealthSettings)
    telemetry: TelemetrySettings = Field(default_factory=TelemetrySettings)


# --------------------------------------------------------------------------------------------
# Probes


def kafka_probe(kafka: Any, *, timeout_s: float = 2.0) -> Check:
    """A check that one of ``kafka``'s bootstrap servers answers a Kafka ``ApiVersions`` request.

    ``kafka`` is a :class:`ragpulse.common.kafka.KafkaSettings`. ApiVersions (v0) is the one
    request every broker answers before authentication (KIP-35, KIP-43), so the probe works on
    PLAINTEXT, SSL (over TLS with the configured CA and client certificate) and SASL listeners
    without credentials, and costs one round trip on a fresh connection: no client metadata,
    no group membership, nothing to leak when a probe times out.
    """
    servers = list(kafka.servers)
    use_tls = kafka.security_protocol in ("SSL", "SASL_SSL")
    tls: ssl.SSLContext | None = None
    if use_tls:
        tls = ssl.create_default_context(cafile=kafka.ssl_cafile)
        if kafka.ssl_certfile:
            tls.load_cert_chain(kafka.ssl_certfile, kafka.ssl_keyfile)

    def check() -> None:
        errors = []
        for server in servers:
            host, _, port = server.rpartition(":")
            try:
                _api_versions(host, int(port), timeout_s, tls)
                return
            except (OSError, ProbeError) as exc:
                errors.append(f"{server}: {exc}")
        raise ProbeError("no Kafka broker answered: " + "; ".join(errors))

    return check


def _api_versions(host: str, port: int, timeout_s: float, tls: ssl.SSLContext | None) -> None:
    # Request header v1: api_key=18 (ApiVersions), api_version=0, correlation id, client id.
    client_id = b"ragpulse-health"
    correlation = 0x5250
    body = struct.pack(">hhih", 18, 0, correlation, len(client_id)) + client_id
    with socket.create_connection((host, port), timeout=timeout_s) as raw:
        raw.settimeout(timeout_s)
        sock: socket.socket = tls.wrap_socket(raw, server_hostname=host) if tls else raw
        sock.sendall(struct.pack(">i", len(body)) + body)
        size = struct.unpack(">i", _read(sock, 4))[0]
        if not 6 <= size <= 1 << 20:
            raise ProbeError(f"implausible ApiVersions response size {size}")
        payload = _read(sock, size)
    got_correlation, error_code = struct.unpack(">ih", payload[:6])
    if got_correlation != correlation:
        raise ProbeError("ApiVersions response with a foreign correlation id")
    if error_code != 0:
        raise ProbeError(f"ApiVersions error code {error_code}")


def _read(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ProbeError("connection closed by the broker")
        buf += chunk
    return bytes(buf)


def clickhouse_probe(dsn: str, *, timeout_s: float = 2.0) -> Check | None:
    """A check that the ClickHouse server at ``dsn`` (``http(s)://[user:pass@]host:port``)
    answers ``SELECT 1`` over its HTTP interface, authenticated as the scorer is.

    Returns ``None`` for ``chdb://`` DSNs: the engine runs inside the scorer process, so there
    is no separate dependency to probe (a failed engine fails the scorer, which liveness sees).
    """
    if dsn.startswith("chdb://"):
        return None
    parts = urllib.parse.urlsplit(dsn)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{dsn!r}: expected http(s)://host:port")
    port = parts.port or (8443 if parts.scheme == "https" else 8123)
    url = f"{parts.scheme}://{parts.hostname}:{port}/?query=SELECT%201"
    headers = {}
    if parts.username:
        token = (
            f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
        )
        headers["Authorization"] = "Basic " + base64.b64encode(token.encode()).decode()

    def check() -> None:
        request = urllib.request.Request(url, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as resp:
                text = resp.read(64).decode(errors="replace").strip()
        except urllib.error.HTTPError as exc:
            raise ProbeError(f"ClickHouse answered HTTP {exc.code}") from None
        if text != "1":
            raise ProbeError(f"ClickHouse answered {text!r} to SELECT 1")

    return check


# --------------------------------------------------------------------------------------------
# The server


@dataclass(frozen=True)
class CheckResult:
    """One readiness probe's outcome and when it was taken (the clock of :class:`HealthServer`)."""

    ok: bool
    detail: str
    checked_at: float


class _Checks:
    """Runs readiness checks with a timeout and caches their results (thread-safe)."""

    def __init__(
        self,
        checks: Mapping[str, Check],
        timeout_s: float,
        interval_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._checks = dict(checks)
        self._timeout_s = timeout_s
        self._interval_s = interval_s
        self._clock = clock
        self._lock = threading.Lock()
        self._results: dict[str, CheckResult] = {}
        self._running: dict[str, Future[None]] = {}
        # One worker per check at most: a hung probe occupies its slot instead of piling up.
        self._pool = ThreadPoolExecutor(
            max_workers=max(1, len(self._checks)), thread_name_prefix="ragpulse-probe"
        )

    def run(self) -> dict[str, CheckResult]:
        now = self._clock()
        waits: dict[str, Future[None]] = {}
        with self._lock:
            for name, fn in self._checks.items():
                cached = self._results.get(name)
                if cached is not None and now - cached.checked_at < self._interval_s:
                    continue
                fut = self._running.get(name)
                if fut is None or fut.done():
                    fut = self._pool.submit(fn)
                    self._running[name] = fut
                waits[name] = fut
        for name, fut in waits.items():
            try:
                fut.result(timeout=self._timeout_s)
                result = CheckResult(True, "ok", self._clock())
            except FutureTimeout:
                result = CheckResult(False, f"no answer within {self._timeout_s:g}s", self._clock())
            except Exception as exc:
                result = CheckResult(False, f"{type(exc).__name__}: {exc}", self._clock())
            with self._lock:
                self._results[name] = result
        with self._lock:
            return {name: self._results[name] for name in self._checks if name in self._results}

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


class HealthServer:
    """Serves ``/healthz``, ``/readyz`` and ``/metrics`` on one port (see the module docstring).

    ``start()`` binds (raises ``OSError`` when the port is taken) and serves on a daemon thread;
    ``drain()`` makes ``/readyz`` answer 503 ``draining`` from then on (call it first on
    SIGTERM so load balancers stop sending work); ``shutdown()`` is idempotent, safe without
    ``start()``, and stops serving. All methods are thread-safe.
    """

    def __init__(
        self,
        settings: HealthSettings,
        *,
        sources: Sequence[StatsSource] = (),
        ready: Mapping[str, Check] | None = None,
        live: Check | None = None,
        build_version: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.sources = list(sources)
        self._checks = _Checks(
            ready or {}, settings.check_timeout_s, settings.check_interval_s, clock
        )
        self._live = live
        self._build_version = build_version
        self._draining = threading.Event()
        self._slots = threading.BoundedSemaphore(settings.max_concurrent_requests)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._state = "new"
        self._refused = 0
        self._refused_lock = threading.Lock()

    @property
    def requests_refused(self) -> int:
        """Requests answered 503 at once because ``max_concurrent_requests`` were in progress."""
        return self._refused

    @property
    def endpoint(self) -> str | None:
        """``http://host:port`` once started."""
        if self._server is None:
            return None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> HealthServer:
        """Bind and serve on a daemon thread; returns ``self``. Raises ``OSError`` when the port
        is taken, ``RuntimeError`` on a second start."""
        with self._lock:
            if self._state != "new":
                raise RuntimeError(f"health server cannot start from state {self._state}")
            server = ThreadingHTTPServer((self.settings.host, self.settings.port), self._handler())
            server.daemon_threads = True
            self._server = server
            self._thread = threading.Thread(
                target=server.serve_forever,
                name="ragpulse-health",
                kwargs={"poll_interval": 0.5},
                daemon=True,
            )
            self._thread.start()
            self._state = "running"
        log.info("health endpoints on %s (/healthz /readyz /metrics)", self.endpoint)
        return self

    def drain(self) -> None:
        """``/readyz`` answers 503 ``draining`` from now on. Any thread."""
        self._draining.set()

    def shutdown(self) -> None:
        """Stop serving and the probe pool. Blocks up to about 5 s; idempotent."""
        with self._lock:
            if self._state == "stopped":
                return
            self._state = "stopped"
            server, self._server = self._server, None
        self._draining.set()
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
        self._checks.close()

    # -- answers -------------------------------------------------------------------------------

    def liveness(self) -> tuple[int, dict[str, Any]]:
        """``(status, body)`` of ``/healthz``: 503 when the ``live`` check raises."""
        if self._live is not None:
            try:
                self._live()
            except Exception as exc:
                return 503, {"status": "dead", "detail": f"{type(exc).__name__}: {exc}"}
        return 200, {"status": "live"}

    def readiness(self) -> tuple[int, dict[str, Any]]:
        """``(status, body)`` of ``/readyz``: runs the checks that are due, each bounded by
        ``check_timeout_s`` (blocks up to that); results younger than ``check_interval_s`` are
        reused."""
        if self._draining.is_set():
            return 503, {"status": "draining", "checks": {}}
        code, live = self.liveness()
        if code != 200:
            return 503, {"status": "dead", "detail": live.get("detail"), "checks": {}}
        results = self._checks.run()
        checks = {n: {"ok": r.ok, "detail": r.detail} for n, r in results.items()}
        ok = all(r.ok for r in results.values())
        return (200 if ok else 503), {"status": "ready" if ok else "unready", "checks": checks}

    def metrics(self) -> str:
        """The ``/metrics`` text (Prometheus exposition) of every source's counters."""
        return render_prometheus(self.sources, build_version=self._build_version)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            server_version = "ragpulse-health"
            protocol_version = "HTTP/1.1"

            def log_message(self, fmt: str, *args: Any) -> None:  # probes every few seconds: quiet
                log.debug("health %s " + fmt, self.client_address[0], *args)

            def do_GET(self) -> None:
                self._answer(head=False)

            def do_HEAD(self) -> None:
                self._answer(head=True)

            def _answer(self, head: bool) -> None:
                if not owner._slots.acquire(blocking=False):
                    with owner._refused_lock:
                        owner._refused += 1
                    self._send(503, "text/plain; charset=utf-8", b"busy\n", head)
                    return
                try:
                    path = urllib.parse.urlsplit(self.path).path
                    if path == "/healthz":
                        code, body = owner.liveness()
                        self._json(code, body, head)
                    elif path == "/readyz":
                        code, body = owner.readiness()
                        self._json(code, body, head)
                    elif path == "/metrics":
                        text = owner.metrics().encode()
                        self._send(200, "text/plain; version=0.0.4; charset=utf-8", text, head)
                    else:
                        self._send(404, "text/plain; charset=utf-8", b"not found\n", head)
                finally:
                    owner._slots.release()

            def _json(self, code: int, body: dict[str, Any], head: bool) -> None:
                self._send(code, "application/json", json.dumps(body).encode() + b"\n", head)

            def _send(self, code: int, ctype: str, data: bytes, head: bool) -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                if not head:
                    self.wfile.write(data)

        return Handler


# --------------------------------------------------------------------------------------------
# One component's observability


class Observability:
    """The health server and the OTLP metrics push of one component (either may be off).

    Built and started by :func:`start_observability`. ``drain()`` turns readiness off;
    ``shutdown()`` (idempotent) pushes a last OTLP export and stops the server.
    """

    def __init__(
        self,
        server: HealthServer | None,
        exporter: OtlpMetricsExporter | None,
        recorder: Any = None,
    ) -> None:
        self.server = server
        self.exporter = exporter
        self.recorder = recorder

    @property
    def endpoint(self) -> str | None:
        """The health server's ``http://host:port``, or ``None`` when it is off."""
        return self.server.endpoint if self.server is not None else None

    def drain(self) -> None:
        """Turn readiness off (503 ``draining``); see :meth:`HealthServer.drain`."""
        if self.server is not None:
            self.server.drain()

    def shutdown(self) -> None:
        """Last ``pipeline_health`` write, last OTLP push, then stop the server. Blocks on each;
        logs their failures instead of raising."""
        if self.recorder is not None:
            try:
                self.recorder.shutdown()
            except Exception:  # a failed last write must not block the component's exit
                log.exception("final pipeline_health write failed")
        if self.exporter is not None:
            try:
                self.exporter.shutdown()
            except Exception:
                log.exception("final OTLP metrics export failed")
        if self.server is not None:
            self.server.shutdown()


def start_observability(
    component: str,
    stats: Callable[[], Mapping[str, Any]],
    *,
    ready: Mapping[str, Check | None] | None = None,
    live: Check | None = None,
    clickhouse: tuple[str, str] | None = None,
    instance: str | None = None,
    settings: ObservabilitySettings | None = None,
) -> Observability:
    """Start the endpoints of ``component`` (``collector`` or ``scorer``) as configured.

    ``settings`` default to ``ObservabilitySettings()`` (the environment; the commands build
    them with their ``--health-port``: :data:`ragpulse.deploy.options.HEALTH`). ``None`` checks
    in ``ready`` are skipped (e.g. :func:`clickhouse_probe` of an in-process chDB). ``clickhouse`` is a
    ``(dsn, database)`` for the component's ``pipeline_health`` rows;
    ``RAGPULSE_TELEMETRY__CLICKHOUSE`` overrides it. A component that writes its own rows (the
    scorer) passes neither: one writer per component and process. That ClickHouse is connected
    to lazily: an outage costs pipeline_health rows, never the component. Raises ``OSError`` when the port is
    taken and ``RuntimeError`` when OTLP export is configured but not installed; nothing is left
    running then.
    """
    from importlib.metadata import PackageNotFoundError, version

    settings = settings or ObservabilitySettings()
    health = settings.health
    sources = [StatsSource(component, stats)]  # type: ignore[arg-type]
    try:
        build = version("ragpulse")
    except PackageNotFoundError:
        build = None
    server = None
    if health.enabled:
        checks = {name: fn for name, fn in (ready or {}).items() if fn is not None}
        server = HealthServer(health, sources=sources, ready=checks, live=live, build_version=build)
        server.start()
    tel = settings.telemetry
    instance = tel.instance or instance
    obs = Observability(server, None)
    try:
        if tel.enabled:
            obs.exporter = OtlpMetricsExporter(tel, sources, instance=instance).start()
        target = (tel.clickhouse, tel.database) if tel.clickhouse else clickhouse
        if target is not None:
            from ragpulse.scorer.store import open_store

            dsn = target[0]
            obs.recorder = pipeline_health_recorder(
                sources[0],
                lambda: open_store(dsn),  # lazily, on the recorder's thread: never blocks start-up
                target[1],
                interval_s=tel.pipeline_health_interval_s,
                instance=instance,
            ).start()
    except BaseException:
        obs.shutdown()
        raise
    return obs
