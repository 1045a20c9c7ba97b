"""``ragpulse collector``: the OTLP collector alone, in front of an external Kafka.

Configuration comes from ``RAGPULSE_*`` environment variables (see
:class:`~ragpulse.collector.config.CollectorSettings`); flags given on the command line win.
Invalid settings and an unreachable Kafka fail at start-up with exit status 2 and 1. Runs until
SIGINT/SIGTERM, then stops accepting, drains requests in progress and flushes Kafka.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading
from typing import Annotated, Any

import typer
from pydantic import ValidationError

__all__ = ["collector"]


def _host_port(value: str, flag: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise typer.BadParameter(f"{value!r} is not host:port", param_hint=flag)
    return host, int(port)


def collector(
    kafka: Annotated[str | None, typer.Option("--kafka", help="Bootstrap servers, host:port[,host:port]. Env: RAGPULSE_KAFKA__BOOTSTRAP_SERVERS.")] = None,
    topic: Annotated[str | None, typer.Option("--topic", help="Topic for per-trace records (default otlp_spans).")] = None,
    http: Annotated[str | None, typer.Option("--http", help="OTLP/HTTP listen address (default 127.0.0.1:4318).")] = None,
    grpc: Annotated[str | None, typer.Option("--grpc", help="OTLP/gRPC listen address (default 127.0.0.1:4317).")] = None,
    no_grpc: Annotated[bool, typer.Option("--no-grpc", help="Do not serve OTLP/gRPC.")] = False,
    no_http: Annotated[bool, typer.Option("--no-http", help="Do not serve OTLP/HTTP.")] = False,
    pass_all: Annotated[bool, typer.Option("--pass-all", help="Produce every trace, not only those with RAG spans.")] = False,
    partitions: Annotated[int | None, typer.Option("--partitions", min=1, help="Partitions if the topic is created.")] = None,
    queue_max_spans: Annotated[int | None, typer.Option("--queue-max-spans", min=1, help="Spans in flight before 429.")] = None,
    confirm: Annotated[str | None, typer.Option("--confirm", help="Answer after 'enqueue' (default) or Kafka 'ack'.")] = None,
    workers: Annotated[int | None, typer.Option("--workers", min=1, max=64, help="Processes sharing the ports (SO_REUSEPORT); needs fixed ports.")] = None,
    status_interval_s: Annotated[float, typer.Option("--status-interval", min=0, help="Seconds between status lines; 0: none.")] = 10.0,
    worker: Annotated[bool, typer.Option("--worker", hidden=True, help="Internal: run as a spawned worker.")] = False,
    log_level: Annotated[str, typer.Option("--log-level", help="Python logging level.")] = "INFO",
    health_port: Annotated[int | None, typer.Option("--health-port", min=0, max=65535, help="Serve /healthz /readyz /metrics on this port. Env: RAGPULSE_HEALTH__ENABLED, RAGPULSE_HEALTH__PORT.")] = None,
) -> None:
    """Receive OTLP traces, keep RAG traces and produce them to Kafka, one record per trace."""
    from ragpulse.deploy.logs import configure_logging

    configure_logging(log_level)
    from ragpulse.collector.config import CollectorSettings
    from ragpulse.collector.service import build_collector

    overrides: dict[str, dict[str, Any]] = {"otlp": {}, "kafka": {}, "producer": {}, "queue": {}, "filter": {}}
    if kafka:
        overrides["kafka"]["bootstrap_servers"] = kafka
    if topic:
        overrides["kafka"]["topic"] = topic
    if http:
        overrides["otlp"]["http_host"], overrides["otlp"]["http_port"] = _host_port(http, "--http")
    if grpc:
        overrides["otlp"]["grpc_host"], overrides["otlp"]["grpc_port"] = _host_port(grpc, "--grpc")
    if no_grpc:
        overrides["otlp"]["grpc_enabled"] = False
    if no_http:
        overrides["otlp"]["http_enabled"] = False
    if pass_all:
        overrides["filter"]["mode"] = "all"
    if partitions is not None:
        overrides["producer"]["partitions"] = partitions
    if confirm is not None:
        overrides["producer"]["confirm"] = confirm
    if queue_max_spans is not None:
        overrides["queue"]["max_spans"] = queue_max_spans
    if workers is not None:
        overrides["otlp"]["workers"] = workers
    try:
        # Flags are init arguments: pydantic-settings merges them over RAGPULSE_* per field.
        settings = CollectorSettings(**{k: v for k, v in overrides.items() if v})
    except ValidationError as exc:
        typer.echo("ragpulse collector: invalid settings:", err=True)
        for err in exc.errors():
            where = ".".join(str(p) for p in err["loc"])
            typer.echo(f"  {where}: {err['msg']} (RAGPULSE_{where.upper().replace('.', '__')})", err=True)
        raise typer.Exit(2) from None

    service = build_collector(settings)
    try:
        service.start()
    except Exception as exc:
        from kafka.errors import KafkaError

        typer.echo(f"ragpulse collector: cannot start: {type(exc).__name__}: {exc}", err=True)
        if isinstance(exc, KafkaError):
            typer.echo(f"  is Kafka reachable at {settings.kafka.bootstrap_servers}?", err=True)
        raise typer.Exit(1) from None

    obs = None
    if not worker:  # spawned workers share the ports, not the health endpoint
        from ragpulse.deploy.health import kafka_probe, start_observability

        try:
            obs = start_observability("collector", service.stats, port=health_port,
                                      ready={"kafka": kafka_probe(settings.kafka)})
        except Exception as exc:
            service.shutdown()
            typer.echo(f"ragpulse collector: cannot start the health endpoint: {exc}", err=True)
            raise typer.Exit(2) from None
    stop = threading.Event()

    def _on_signal(signum: int, _frame: Any) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, _on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    if worker:
        # A spawned worker: serve until the parent's SIGTERM (or its death, see _spawn_workers).
        stop.wait()
        service.shutdown()
        return
    children = _spawn_workers(settings.otlp.workers - 1)
    typer.echo(f"OTLP/HTTP  {service.http_endpoint or 'off'}")
    typer.echo(f"OTLP/gRPC  {service.grpc_endpoint or 'off'}")
    typer.echo(f"Kafka      {settings.kafka.bootstrap_servers} topic {settings.kafka.topic} "
               f"({'all traces' if settings.filter.mode == 'all' else 'RAG traces'})")
    if children:
        typer.echo(f"workers    {len(children) + 1} processes (status lines count this process only)")
    try:
        while not stop.wait(status_interval_s or None):
            s = service.stats()
            typer.echo(
                f"spans received {s['spans_received']} accepted {s['spans_accepted']} "
                f"acked {s['spans_acked']} dropped(non-RAG) {s['spans_dropped_non_rag']} "
                f"refused {s['spans_refused']} failed {s['spans_failed']} queue {s['queue_spans']}"
            )
    finally:
        typer.echo("draining ...")
        if obs is not None:
            obs.drain()
        for child in children:
            child.send_signal(signal.SIGTERM)
        service.shutdown()
        for child in children:
            try:
                child.wait(timeout=settings.producer.ack_timeout_s + 30)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if obs is not None:
            obs.shutdown()
        s = service.stats()
        typer.echo(f"stopped: {s['spans_acked']} spans acknowledged by Kafka, {s['spans_failed']} failed")


def _spawn_workers(count: int) -> list[subprocess.Popen[bytes]]:
    """Start ``count`` more collector processes with this process's arguments and environment.

    They bind the same ports with SO_REUSEPORT. Each asks the kernel to SIGTERM it when this
    process dies (PR_SET_PDEATHSIG), so a killed parent leaves no orphan holding the ports.
    """
    if count <= 0:
        return []
    args = sys.argv[1:]
    if args[:1] != ["collector"]:
        args = ["collector", *args]

    def _die_with_parent() -> None:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG

    cmd = [sys.executable, "-c", "from ragpulse.cli import main; main()", *args, "--worker"]
    return [
        subprocess.Popen(cmd, env=dict(os.environ), stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent)
        for _ in range(count)
    ]
