"""``ragpulse collector``: the OTLP collector alone, in front of an external Kafka.

Configuration comes from ``RAGPULSE_*`` environment variables (see
:class:`~ragpulse.collector.CollectorSettings`); flags given on the command line win.
Invalid settings and an unreachable Kafka fail at start-up with exit status 2 and 1. Runs until
SIGINT/SIGTERM, then stops accepting, drains requests in progress and flushes Kafka.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Annotated, Any

import typer

from ragpulse.common import self_metrics
from ragpulse.deploy.options import HEALTH, Options, Sets
from ragpulse.deploy.signals import StopSignals

__all__ = ["collector"]


def _host_port(value: str, flag: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise typer.BadParameter(f"{value!r} is not host:port", param_hint=flag)
    return host, int(port)


# The CollectorSettings field each option sets (its variable, RAGPULSE_<FIELD> with "__" for
# ".", is named in --help); --status-interval and --log-level set none.
OPTIONS = Options({
    "kafka": "kafka.bootstrap_servers", "topic": "kafka.topic",
    "http": Sets(("otlp.http_host", "otlp.http_port"), lambda v: _host_port(v, "--http")),
    "grpc": Sets(("otlp.grpc_host", "otlp.grpc_port"), lambda v: _host_port(v, "--grpc")),
    "no_grpc": Sets(("otlp.grpc_enabled",), lambda _: False),
    "no_http": Sets(("otlp.http_enabled",), lambda _: False),
    "pass_all": Sets(("filter.mode",), lambda _: "all"), "partitions": "producer.partitions",
    "queue_max_spans": "queue.max_spans", "confirm": "producer.confirm",
    "records": Sets(("producer.records",), lambda v: v.replace("-", "_")),
    "workers": "otlp.workers", "allow_anonymous_ingest": "otlp.allow_anonymous_ingest",
    "cors_origin": "otlp.cors_allowed_origins",
})
_h = OPTIONS.help


def collector(
    ctx: typer.Context,
    kafka: Annotated[str | None, typer.Option("--kafka", help=_h("Bootstrap servers, host:port[,host:port].", "kafka"))] = None,
    topic: Annotated[str | None, typer.Option("--topic", help=_h("Topic for the trace records (default otlp_spans).", "topic"))] = None,
    http: Annotated[str | None, typer.Option("--http", help=_h("OTLP/HTTP listen address (default 127.0.0.1:4318).", "http"))] = None,
    grpc: Annotated[str | None, typer.Option("--grpc", help=_h("OTLP/gRPC listen address (default 127.0.0.1:4317).", "grpc"))] = None,
    no_grpc: Annotated[bool, typer.Option("--no-grpc", help=_h("Do not serve OTLP/gRPC (the variable: false).", "no_grpc"))] = False,
    no_http: Annotated[bool, typer.Option("--no-http", help=_h("Do not serve OTLP/HTTP (the variable: false).", "no_http"))] = False,
    pass_all: Annotated[bool, typer.Option("--pass-all", help=_h("Produce every trace, not only those with RAG spans (the variable: all).", "pass_all"))] = False,
    partitions: Annotated[int | None, typer.Option("--partitions", min=1, help=_h("Partitions if the topic is created.", "partitions"))] = None,
    queue_max_spans: Annotated[int | None, typer.Option("--queue-max-spans", min=1, help=_h("Spans in flight before 429.", "queue_max_spans"))] = None,
    confirm: Annotated[str | None, typer.Option("--confirm", help=_h("Answer after 'enqueue' (default) or Kafka 'ack'.", "confirm"))] = None,
    records: Annotated[str | None, typer.Option("--records", help=_h("What one Kafka record holds: 'per-partition' (default: a request's traces of one partition, unkeyed) or 'per-trace' (keyed by trace id, otelcol's partition_traces_by_id format); the variable takes per_partition or per_trace.", "records"))] = None,
    workers: Annotated[int | None, typer.Option("--workers", min=1, max=64, help=_h("Processes sharing the ports (one HTTP listening socket, gRPC with SO_REUSEPORT); needs fixed ports. Default: one per usable core (at most 8) with fixed ports, else 1.", "workers"))] = None,
    status_interval_s: Annotated[float, typer.Option("--status-interval", min=0, help="Seconds between status lines; 0: none.")] = 10.0,
    worker: Annotated[bool, typer.Option("--worker", hidden=True, help="Internal: run as a spawned worker.")] = False,
    http_shared: Annotated[str | None, typer.Option("--http-shared", hidden=True, help="Internal: a spawned worker's inherited OTLP/HTTP listening socket.")] = None,
    parent_pid: Annotated[int | None, typer.Option("--parent-pid", hidden=True, help="Internal: a spawned worker's parent, whose death stops it.")] = None,
    log_level: Annotated[str, typer.Option("--log-level", help="Python logging level.")] = "INFO",
    health_port: Annotated[int | None, typer.Option("--health-port", min=0, max=65535, help=HEALTH.help("Serve /healthz /readyz /metrics on this port.", "health_port"))] = None,
    allow_anonymous_ingest: Annotated[bool, typer.Option("--allow-anonymous-ingest", help=_h("Off loopback, accept OTLP without a bearer token (otherwise set RAGPULSE_OTLP__AUTH_TOKEN).", "allow_anonymous_ingest"))] = False,
    cors_origin: Annotated[list[str] | None, typer.Option("--cors-origin", help=_h("Origin of a web page whose browser OTLP exporter may send (repeatable; 'https://*.example.com' patterns; the variable takes a JSON list).", "cors_origin"))] = None,
) -> None:
    """Receive OTLP traces, keep RAG traces and produce them to Kafka, each trace in the
    partition otelcol-contrib picks for its trace id."""
    from ragpulse.collector import CollectorSettings
    from ragpulse.deploy.health import ObservabilitySettings
    from ragpulse.deploy.logs import configure_logging, protect_std_streams

    protect_std_streams()  # a dead stderr pipe must not stop the drain

    configure_logging(log_level)
    settings = OPTIONS.settings(ctx, CollectorSettings)
    observability = HEALTH.settings(ctx, ObservabilitySettings)
    _require_auth_off_loopback(settings)
    if worker:
        # A spawned worker: serve until the parent's SIGTERM (or its death), reporting its
        # counters to the parent on stdout.
        _die_with_parent(parent_pid)
        from ragpulse.collector import SharedListener

        shared = SharedListener.from_argument(http_shared) if http_shared is not None else None
        _serve_as_worker(_start(settings, shared))
        return
    _serve(settings, observability, status_interval_s)


def _require_auth_off_loopback(settings: Any) -> None:
    """Exit with status 2 when a receiver listens off loopback without a bearer token and
    anonymous ingest was not asked for, as ``ragpulse up`` does: anyone who reaches the port
    could send spans (and with them the memory and judge work they cost)."""
    from ragpulse.deploy.facade import is_loopback

    otlp = settings.otlp
    exposed = [host for enabled, host in ((otlp.http_enabled, otlp.http_host),
                                          (otlp.grpc_enabled, otlp.grpc_host))
               if enabled and not is_loopback(host)]
    if exposed and otlp.auth_token is None and not otlp.allow_anonymous_ingest:
        typer.echo(
            f"ragpulse collector: refusing to serve OTLP on {exposed[0]} without authentication: "
            "anyone who reaches it could send spans; set RAGPULSE_OTLP__AUTH_TOKEN (or "
            "RAGPULSE_OTLP__AUTH_TOKEN_FILE) and send 'Authorization: Bearer <token>' from your "
            "exporters, or pass --allow-anonymous-ingest (RAGPULSE_OTLP__ALLOW_ANONYMOUS_INGEST="
            "true), or listen on 127.0.0.1", err=True)
        raise typer.Exit(2)


def _start(settings: Any, shared: Any = None) -> Any:
    """A started collector (with ``workers > 1``: serving ``shared``, the OTLP/HTTP listening
    socket every process serves); exits with status 1 (and a hint when Kafka is unreachable)."""
    from ragpulse.collector import build_collector

    service = build_collector(settings, http_shared=shared)
    try:
        service.start()
    except Exception as exc:
        from ragpulse.common import KafkaUnavailable

        typer.echo(f"ragpulse collector: cannot start: {type(exc).__name__}: {exc}", err=True)
        if isinstance(exc, KafkaUnavailable):
            typer.echo(f"  is Kafka reachable at {settings.kafka.bootstrap_servers}?", err=True)
        raise typer.Exit(1) from None
    return service


def _serve(settings: Any, observability: Any, status_interval_s: float) -> None:
    """The parent process: spawn the extra workers, then start its own collector, serve
    /healthz /readyz /metrics with every worker's counters summed in, print status lines until
    SIGINT/SIGTERM, then drain all.

    The workers are spawned first, before this process starts a thread of its own: no gRPC
    server or channel (gRPC is not even loaded), no librdkafka producer, no health endpoint
    yet (only a native pool an import may start, such as OpenBLAS's, which handles fork). Spawned after gRPC
    started (as they were), a fork ran gRPC's fork handlers while its threads were busy ("Other
    threads are currently calling into gRPC, skipping fork() handlers"); gRPC's poller then ran
    on in the child, before its exec, on an epoll descriptor that ``subprocess`` closes there
    ("epoll_wait error: Bad file descriptor"), and aborted: "worker N exited with status -6
    before serving" (5 of 8 starts of ``--workers 8`` under gRPC clients retrying). And
    :class:`_Workers` runs no code in the child between fork and exec (no ``preexec_fn``), so
    ``subprocess`` uses vfork, which runs no fork handlers at all.

    Long because: the start order above and the unwinding of each started part when a later
    one fails are one sequence, read best in one place.
    """
    shared = _bind_shared_http(settings)
    workers_group = _Workers(settings.otlp.workers - 1, shared)
    with StopSignals() as signals:
        workers_group.start()
        try:
            service = _start(settings, shared)
        except BaseException:
            workers_group.terminate()
            workers_group.wait(5)
            raise
        workers_group.own_stats = service.stats
        # Spawned workers share the ports, not the health endpoint: this process serves it, with
        # every worker's counters summed in (and each worker's request counts by its index).
        from ragpulse.deploy.health import kafka_probe, start_observability

        ready: dict[str, Any] = {"kafka": kafka_probe(settings.kafka)}
        if workers_group.count:
            ready["workers"] = lambda: workers_group.check(service.is_open)
        try:
            obs = start_observability("collector", workers_group.stats, settings=observability,
                                      ready=ready)
        except Exception as exc:
            workers_group.terminate()
            service.shutdown()
            workers_group.wait(5)
            typer.echo(f"ragpulse collector: cannot start the health endpoint: {exc}", err=True)
            raise typer.Exit(2) from None

        def print_stats() -> None:
            s = workers_group.stats()
            typer.echo(f"spans received {s['spans_received']} accepted {s['spans_accepted']} "
                       f"acked {s['spans_acked']} dropped(non-RAG) {s['spans_dropped_non_rag']} "
                       f"refused {s['spans_refused']} failed {s['spans_failed']} "
                       f"queue {s['queue_spans']}")

        try:
            # The OTLP/HTTP port opens once every worker serves (issue 41): a client connecting
            # earlier would stay on the first process for as long as its connection lives.
            failed = workers_group.wait_serving(
                settings.kafka.bootstrap_timeout_ms / 1000 + _WORKER_START_S, signals.stop)
            if failed is not None:
                typer.echo(f"ragpulse collector: cannot start: {failed}", err=True)
                raise typer.Exit(1)
        except BaseException:
            workers_group.terminate()
            service.shutdown(drain_timeout_s=1.0)
            workers_group.wait(5)
            if obs is not None:
                obs.shutdown()
            raise
        if not signals.stop.is_set():
            service.open()
        typer.echo(f"OTLP/HTTP  {service.http_endpoint or 'off'}")
        typer.echo(f"OTLP/gRPC  {service.grpc_endpoint or 'off'}")
        typer.echo(f"Kafka      {settings.kafka.bootstrap_servers} topic {settings.kafka.topic} "
                   f"({'all traces' if settings.filter.mode == 'all' else 'RAG traces'})")
        if workers_group.count:
            typer.echo(f"workers    {workers_group.count + 1} processes (counters and /metrics are "
                       "their sums)")
        try:
            signals.every(status_interval_s, print_stats)
        finally:
            typer.echo("draining ...")
            if obs is not None:
                obs.drain()
            workers_group.terminate()
            service.shutdown()
            workers_group.wait(settings.producer.ack_timeout_s + 30)
    if obs is not None:
        obs.shutdown()
    s = workers_group.stats()
    typer.echo(f"stopped: {s['spans_acked']} spans acknowledged by Kafka, {s['spans_failed']} failed")


def _bind_shared_http(settings: Any) -> Any:
    """With ``workers > 1`` and OTLP/HTTP on: the listening socket every process serves, bound
    (exit 1 when the port is taken) and not listening yet; else ``None``."""
    otlp = settings.otlp
    if otlp.workers <= 1 or not otlp.http_enabled:
        return None
    from ragpulse.collector import SharedListener

    try:
        return SharedListener.bind((otlp.http_host, otlp.http_port), otlp.workers)
    except OSError as exc:
        typer.echo(f"ragpulse collector: cannot start: OTLP/HTTP {otlp.http_host}:"
                   f"{otlp.http_port}: {exc}", err=True)
        raise typer.Exit(1) from None


def _die_with_parent(parent_pid: int | None) -> None:
    """A spawned worker asks the kernel for SIGTERM when its parent dies (PR_SET_PDEATHSIG), so a
    killed parent leaves no orphan holding the ports; exits at once when the parent is already
    gone. Done here, after exec, rather than in a ``preexec_fn``: that would make ``subprocess``
    fork (not vfork) and run Python in the child of a process with threads."""
    if parent_pid is None:
        return
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    if os.getppid() != parent_pid:  # the parent died before the prctl
        raise typer.Exit(1)


# Worker values merged by their maximum (the others are summed), and the counters also reported
# per worker (``worker_<name>``, by the worker's index; 0: the first): both as declared.
_MAX_GAUGES = frozenset(m.name for m in self_metrics("collector").values() if m.merge == "max")
_PER_WORKER = tuple(m.name.removeprefix("worker_") for m in self_metrics("collector").values()
                    if m.label == "worker" and m.kind == "counter")
# Seconds a worker may take to start beyond Kafka's bootstrap timeout (an interpreter, imports,
# the exporter and the receivers: 1-3 s on a loaded machine).
_WORKER_START_S = 60.0


def _serve_as_worker(service: Any) -> None:
    """A spawned worker's life: a JSON line of its counters on stdout every second (the parent
    sums them), until SIGTERM; then drain, and a last line with the final counters."""
    def report() -> None:
        sys.stdout.write(json.dumps(service.stats()) + "\n")
        sys.stdout.flush()

    with StopSignals() as signals:
        report()  # the first line says this worker serves (the parent waits for it)
        try:
            signals.every(1.0, report)
        finally:
            service.shutdown()
            report()


class _Workers:
    """The extra worker processes of ``ragpulse collector --workers N`` and their counters.

    ``stats()`` (thread-safe) is this process's :attr:`own_stats` (set once its collector runs)
    plus each worker's latest report: counters and most gauges summed, ``kafka_unavailable`` the
    maximum. Workers inherit this process's OTLP/HTTP listening socket (``http_shared``: the
    process with the fewest connections accepts the next one) and bind the gRPC port with
    SO_REUSEPORT; each asks the kernel to SIGTERM it when this process dies (PR_SET_PDEATHSIG,
    :func:`_die_with_parent`), so a killed parent leaves no orphan holding the ports.
    """

    def __init__(self, count: int, http_shared: Any = None) -> None:
        self.count = max(0, count)
        self.own_stats: Any = dict  # this process's Collector.stats, once it runs
        self._http_shared = http_shared  # a ragpulse.collector.SharedListener, or None
        self._procs: list[subprocess.Popen[bytes]] = []
        self._latest: list[dict[str, Any]] = [{} for _ in range(self.count)]
        self._reported = [False] * self.count
        self._readers: list[threading.Thread] = []
        self._lock = threading.Lock()

    def start(self) -> None:
        """Spawn the workers with this process's arguments and environment. Does not wait.

        Call it before this process starts gRPC (see :func:`_serve`). Nothing runs in the child
        between fork and exec (no ``preexec_fn``: the worker sets its own parent-death signal),
        so ``subprocess`` uses vfork, which runs no ``pthread_atfork`` handlers (gRPC's)."""
        if not self.count:
            return
        args = sys.argv[1:]
        if args[:1] != ["collector"]:
            args = ["collector", *args]
        cmd = [sys.executable, "-c", "from ragpulse.deploy.cli import main; main()", *args,
               "--worker", "--parent-pid", str(os.getpid())]
        shared = self._http_shared
        for i in range(self.count):
            extra = ["--http-shared", shared.argument(i + 1)] if shared is not None else []
            proc = subprocess.Popen([*cmd, *extra], env=dict(os.environ), stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE,
                                    pass_fds=shared.fds if shared is not None else ())
            self._procs.append(proc)
            reader = threading.Thread(target=self._read, args=(i, proc), daemon=True,
                                      name=f"collector-worker-{i + 1}-stats")
            reader.start()
            self._readers.append(reader)

    def _read(self, i: int, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            try:
                stats = json.loads(line)
            except ValueError:
                continue
            with self._lock:
                self._latest[i] = stats
                self._reported[i] = True

    def wait_serving(self, timeout_s: float, stop: threading.Event) -> str | None:
        """Block until every worker serves (its first report came: it started its exporter and
        receivers), ``stop`` is set or ``timeout_s`` passed (a warning: the port opens with the
        workers that serve, ``/readyz`` says which do not). Returns why the start failed when a
        worker exited first, else ``None``."""
        deadline = time.monotonic() + timeout_s
        while not stop.is_set():
            with self._lock:
                waiting = [i for i, done in enumerate(self._reported) if not done]
            if not waiting:
                return None
            for i in waiting:
                code = self._procs[i].poll()
                if code is not None:
                    return f"worker {i + 1} exited with status {code} before serving"
            if time.monotonic() > deadline:
                typer.echo(f"ragpulse collector: workers {[i + 1 for i in waiting]} did not "
                           f"start within {timeout_s:g} s; opening the port without them "
                           "(/readyz answers 503 until they serve)", err=True)
                return None
            stop.wait(0.01)
        return None

    def check(self, port_open: bool) -> None:
        """The ``workers`` readiness check: raises unless every worker serves and the port is
        open."""
        with self._lock:
            reported = list(self._reported)
        problems = []
        for i, proc in enumerate(self._procs):
            code = proc.poll()
            if code is not None:
                problems.append(f"worker {i + 1} exited with status {code}")
            elif not reported[i]:
                problems.append(f"worker {i + 1} is starting")
        if not port_open and not problems:
            problems.append("the OTLP/HTTP port is not open yet")
        if problems:
            raise RuntimeError("; ".join(problems))

    def stats(self) -> dict[str, Any]:
        own = self.own_stats()
        out = dict(own)
        with self._lock:
            reports = list(self._latest)
        for report in reports:
            for key, value in report.items():
                if not isinstance(value, int | float):
                    continue
                out[key] = max(out.get(key, 0), value) if key in _MAX_GAUGES \
                    else out.get(key, 0) + value
        if self.count:
            for key in _PER_WORKER:
                out[f"worker_{key}"] = {str(i): report.get(key, 0)
                                        for i, report in enumerate([own, *reports])}
            shared = self._http_shared
            if shared is not None:
                out["worker_http_connections"] = {
                    str(i): n for i, n in enumerate(shared.connections()) if n is not None}
        return out

    def terminate(self) -> None:
        for proc in self._procs:
            proc.send_signal(signal.SIGTERM)

    def wait(self, timeout_s: float) -> None:
        """Wait for the workers to drain and exit (SIGKILL after ``timeout_s``), and for their
        last reports."""
        for proc in self._procs:
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for reader in self._readers:
            reader.join(timeout=5)
