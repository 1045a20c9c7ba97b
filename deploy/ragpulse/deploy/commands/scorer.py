"""``ragpulse scorer``: run the live scorer alone against an external Kafka and ClickHouse.

Flags override ``RAGPULSE_*`` environment variables, which override the defaults; everything is
validated before anything connects, and a bad value exits with status 2 and the field's name.
SIGINT/SIGTERM drain: buffered and in-flight traces are scored and written and the offsets
committed within ``--drain-timeout``; a second signal stops at once (what was not committed is
replayed by the next run). A status line is printed every ``--status-interval`` seconds.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from typing import Annotated, Any

import typer

from ragpulse.deploy.logs import mask_secrets
from ragpulse.deploy.options import HEALTH, Options, Sets
from ragpulse.deploy.signals import StopSignals
from ragpulse.deploy.statusline import scorer_stats, status_line
from ragpulse.scorer import DEFAULT_JUDGE, judge_help

__all__ = ["scorer"]

log = logging.getLogger("ragpulse.deploy.commands.scorer")


# The ScorerSettings field each option sets (its variable, RAGPULSE_<FIELD> with "__" for
# ".", is named in --help); --log-level sets none.
OPTIONS = Options({
    "kafka": "kafka.bootstrap_servers", "topic": "kafka.topic", "clickhouse": "clickhouse",
    "database": "database", "group": "consumer.group_id", "judge": "judge",
    "model": "judge_model", "base_url": "judge_base_url", "model_dir": "nli.model_dir",
    "positive_label": "nli.positive_label", "metrics": "evaluate.metrics",
    "sample_rate": "sampling.default_rate",
    "service_rate": Sets(("sampling.service_rates",), lambda items: _service_rates(items)),
    "grace": "assembly.grace_s", "max_in_flight": "evaluate.max_in_flight",
    "drain_timeout": "drain_timeout_s", "status_interval": "status_interval_s",
})
_h = OPTIONS.help


def scorer(
    ctx: typer.Context,
    kafka: Annotated[
        str | None, typer.Option("--kafka", help=_h("bootstrap servers host:port[,host:port]", "kafka"))
    ] = None,
    topic: Annotated[str | None, typer.Option(help=_h("spans topic (default otlp_spans)", "topic"))] = None,
    clickhouse: Annotated[
        str | None,
        typer.Option(
            "--clickhouse", help=_h("chdb:///path (owned by this process) or http(s)://host:8123",
                                   "clickhouse"),
        ),
    ] = None,
    database: Annotated[str | None, typer.Option(help=_h("ClickHouse database (default rag)", "database"))] = None,
    group: Annotated[str | None, typer.Option("--group", help=_h("consumer group id", "group"))] = None,
    judge: Annotated[str | None, typer.Option("--judge", help=_h(judge_help() + " Default: " + DEFAULT_JUDGE + ".", "judge"))] = None,
    model_dir: Annotated[
        str | None,
        typer.Option("--model-dir", help=_h("NLI judge: directory with model.onnx, tokenizer.json, "
                                        "config.json", "model_dir")),
    ] = None,
    positive_label: Annotated[
        str | None,
        typer.Option("--positive-label", help=_h("NLI judge: label name or index meaning "
                                             "'supported' (default: detected)", "positive_label")),
    ] = None,
    model: Annotated[str | None, typer.Option("--model", help=_h("LLM judge model", "model"))] = None,
    base_url: Annotated[
        str | None, typer.Option("--base-url", help=_h("OpenAI-compatible base URL", "base_url"))
    ] = None,
    metrics: Annotated[str | None, typer.Option(help=_h("comma-separated metric names", "metrics"))] = None,
    sample_rate: Annotated[
        float | None,
        typer.Option(
            "--sampling-rate", "--sample-rate",
            help=_h("share of traces judged (0..1; errors and negative feedback always); "
                    "--sample-rate is its old name", "sample_rate"),
        ),
    ] = None,
    service_rate: Annotated[
        list[str] | None,
        typer.Option(
            "--service-rate",
            help=_h("per-service rate SERVICE=RATE (glob patterns allowed); repeatable; the "
                    'variable takes a JSON object, {"SERVICE": RATE}', "service_rate"),
        ),
    ] = None,
    grace: Annotated[
        float | None, typer.Option("--grace", help=_h("seconds to wait after a root span", "grace"))
    ] = None,
    max_in_flight: Annotated[
        int | None, typer.Option(help=_h("traces evaluating/writing at once", "max_in_flight"))
    ] = None,
    drain_timeout: Annotated[
        float | None, typer.Option(help=_h("seconds to drain on SIGINT/SIGTERM", "drain_timeout"))
    ] = None,
    status_interval: Annotated[
        float | None, typer.Option(help=_h("seconds between status lines", "status_interval"))
    ] = None,
    log_level: Annotated[str, typer.Option(help="logging level")] = "WARNING",
    health_port: Annotated[
        int | None,
        typer.Option(
            "--health-port",
            min=0,
            max=65535,
            help=HEALTH.help("serve /healthz /readyz /metrics here", "health_port"),
        ),
    ] = None,
) -> None:
    """Consume OTLP spans from Kafka, score RAG traces and write the scores to ClickHouse.

    Blocks until SIGINT/SIGTERM, then drains; exits 2 on invalid settings.
    Long because: typer reads the options from this signature (70 lines); the body is 10.
    """
    from ragpulse.deploy.health import ObservabilitySettings
    from ragpulse.deploy.logs import configure_logging, protect_std_streams
    from ragpulse.scorer.pipeline import ScorerSettings

    protect_std_streams()  # a dead stderr pipe must not stop the drain

    configure_logging(log_level)
    settings = OPTIONS.settings(ctx, ScorerSettings)
    observability = HEALTH.settings(ctx, ObservabilitySettings)
    svc = _start_unless_interrupted(settings)
    obs = _start_observability(svc, settings, observability)
    _serve_until_signalled(svc, obs, settings)


def _service_rates(items: list[str]) -> dict[str, float]:
    """``--service-rate SERVICE=RATE`` options as a dict; a bad one is a usage error (exit 2)."""
    rates: dict[str, float] = {}
    for item in items:
        name, sep, value = item.rpartition("=")
        try:
            rates[name] = float(value)
        except ValueError:
            sep = ""
        if not sep or not name:
            raise typer.BadParameter(f"{item!r}: expected SERVICE=RATE", param_hint="--service-rate")
    return rates


def _start_unless_interrupted(settings: Any) -> Any:
    """Wait for Kafka (saying so), then start the scorer. A SIGINT/SIGTERM meanwhile stops the
    wait at once (or the start once it returns) and exits with status 130 and one line, as
    ``ragpulse up`` interrupted while starting: the handler only sets a flag, so no exception is raised inside the Kafka
    client, whose own handling turned Ctrl-C into "Bootstrap failed: weakly-referenced object
    no longer exists"."""
    with StopSignals() as signals:
        _wait_for_kafka(settings.kafka, signals.stop)
        svc = None if signals.stop.is_set() else _start_scorer(settings)
        if signals.stop.is_set():
            if svc is not None:
                svc.shutdown(0)
            typer.echo("ragpulse scorer: interrupted while starting; stopped.", err=True)
            raise typer.Exit(130)  # as `ragpulse up` interrupted while starting
    return svc


def _bootstrap_addresses(servers: str) -> list[tuple[str, int]]:
    """``host:port[,host:port]`` (``[v6]:port`` too) as (host, port) pairs; a missing port is
    Kafka's 9092."""
    out = []
    for item in filter(None, (x.strip() for x in servers.split(","))):
        host, sep, port = item.rpartition(":")
        if not sep or not port.isdigit() or (":" in host and not host.startswith("[")):
            host, port = item, "9092"
        out.append((host.strip("[]"), int(port)))
    return out


def _wait_for_kafka(kafka: Any, stop: threading.Event, interval_s: float = 10.0) -> None:
    """Return once a bootstrap server accepts a TCP connection, or once ``stop`` is set. Says
    ``waiting for Kafka at HOST:PORT: <reason>; retrying`` at the first refusal (the
    collector's line) and again every ``interval_s``; exits with status 1 when none answered
    within ``kafka.bootstrap_timeout_ms``. Blocks; polls twice a second."""
    addresses = _bootstrap_addresses(kafka.bootstrap_servers)
    deadline = time.monotonic() + kafka.bootstrap_timeout_ms / 1000
    next_line, attempts, where = 0.0, 0, kafka.bootstrap_servers
    while not stop.is_set():
        reason = ""
        for host, port in addresses:
            try:
                socket.create_connection((host, port), timeout=1.0).close()
                return
            except OSError as exc:
                reason = _refusal(exc)
                where = f"{host}:{port}"
        attempts += 1
        now = time.monotonic()
        if now >= deadline:
            typer.echo(f"error: cannot start the scorer: Kafka at {kafka.bootstrap_servers} did "
                       f"not answer within {kafka.bootstrap_timeout_ms / 1000:g} s ({reason}); is "
                       "it running? (RAGPULSE_KAFKA__BOOTSTRAP_TIMEOUT_MS sets the wait)", err=True)
            raise typer.Exit(1)
        if now >= next_line:
            more = f" ({attempts - 1} more attempts since the last line)" if next_line else ""
            log.warning("waiting for Kafka at %s: %s; retrying%s", where, reason, more)
            next_line, attempts = now + interval_s, 0
        stop.wait(0.5)


def _refusal(exc: OSError) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, TimeoutError | socket.timeout):
        return "timed out"
    if isinstance(exc, socket.gaierror):
        return f"cannot resolve the host ({exc.strerror})"
    return (exc.strerror or str(exc)).lower()


def _start_scorer(settings: Any) -> Any:
    """Build and start the scorer (exit status 1 if it cannot start), then freeze the heap."""
    from ragpulse.deploy.logs import describe_error, quiet_logger
    from ragpulse.scorer.pipeline import build_scorer, freeze_startup_heap
    from ragpulse.scorer.store import legacy_store_note

    if note := legacy_store_note(settings.clickhouse):
        typer.echo(note, err=True)

    try:
        with quiet_logger("kafka"):
            svc = build_scorer(settings)
            svc.start()
        freeze_startup_heap()  # this process is the service: its start-up heap lives forever
    except Exception as exc:
        from kafka.errors import KafkaError

        hint = " (--log-level DEBUG shows each attempt)" if isinstance(exc, KafkaError) else ""
        typer.echo(f"error: cannot start the scorer: {describe_error(exc)}{hint}", err=True)
        raise typer.Exit(1) from None
    typer.echo(
        f"ragpulse scorer: {settings.kafka.bootstrap_servers} topic {settings.kafka.topic} "
        f"group {settings.consumer.group_id} -> {mask_secrets(settings.clickhouse)} "
        f"database {settings.database} (judge {settings.judge})",
        err=True,
    )
    return svc


def _start_observability(svc: Any, settings: Any, observability: Any) -> Any:
    """The /healthz, /readyz and /metrics endpoints and the OTLP metrics push, as configured by
    ``RAGPULSE_HEALTH__*`` and ``RAGPULSE_TELEMETRY__*``. The scorer's ``pipeline_health`` rows
    are written by the scorer itself (``build_scorer``), so none are asked for here. Shuts the
    scorer down and exits with status 2 if the endpoint cannot start."""
    from ragpulse.deploy.health import clickhouse_probe, kafka_probe, start_observability

    def live() -> None:
        if svc.error is not None:
            raise RuntimeError(f"scorer stopped: {svc.error}")

    try:
        if observability.telemetry.clickhouse:
            log.warning("RAGPULSE_TELEMETRY__CLICKHOUSE is ignored by the scorer: it writes its "
                        "pipeline_health rows to its own store (RAGPULSE_CLICKHOUSE)")
            observability = observability.model_copy(update={
                "telemetry": observability.telemetry.model_copy(update={"clickhouse": None})})
        return start_observability(
            "scorer",
            svc.stats,
            live=live,
            ready={
                "kafka": kafka_probe(settings.kafka),
                "clickhouse": clickhouse_probe(settings.clickhouse),
            },
            instance=settings.instance,
            settings=observability,
        )
    except Exception as exc:
        svc.shutdown()
        typer.echo(f"error: cannot start the health endpoint: {exc}", err=True)
        raise typer.Exit(2) from None


def _serve_until_signalled(svc: Any, obs: Any, settings: Any) -> None:
    """Print a status line every ``status_interval_s`` until SIGINT/SIGTERM (or the scorer
    stops), then drain: readiness off, the scorer drained within ``drain_timeout_s``, the
    endpoints stopped. A second signal exits at once with status 130. Exits with status 1 if
    the scorer stopped on an error. Blocks; main thread only (it installs signal handlers)."""
    def first(name: str) -> None:
        typer.echo(f"{name}: draining (up to {settings.drain_timeout_s:g}s)", err=True)

    def second(_name: str) -> None:
        typer.echo("second signal: stopping without draining", err=True)
        raise SystemExit(130)

    t0 = time.monotonic()

    def status() -> None:
        typer.echo(status_line(scorer_stats(svc), time.monotonic() - t0), err=True)

    with StopSignals(on_first=first, on_second=second) as signals:
        try:
            signals.every(settings.status_interval_s, status, until=lambda: svc.wait(0))
        finally:
            obs.drain()
            svc.shutdown()
            obs.shutdown()
    status()
    if svc.error is not None:
        typer.echo(f"error: the scorer stopped: {type(svc.error).__name__}: {svc.error}", err=True)
        raise typer.Exit(1)
