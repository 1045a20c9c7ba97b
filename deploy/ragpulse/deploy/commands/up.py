"""``ragpulse up``: the embedded single-machine default."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape

from ragpulse.deploy.options import Options
from ragpulse.scorer import DEFAULT_JUDGE, judge_help

__all__ = ["up"]


# The EmbeddedSettings field each option sets (its variable RAGPULSE_UP__<FIELD>, named in
# --help); --verbose sets none. RAGPULSE_NLI__MODEL_DIR is read by the scorer for --model-dir's.
OPTIONS = Options({
    "data_dir": "data_dir", "demo": "demo", "demo_rate": "demo_rate", "demo_limit": "demo_limit",
    "host": "host", "http_port": "http_port", "grpc_port": "grpc_port",
    "clickhouse_port": "clickhouse_port", "kafka_port": "kafka_port",
    "s3_base_port": "s3_base_port", "judge": "judge", "model_dir": "judge_model_dir",
    "model": "judge_model", "base_url": "judge_base_url", "sampling_rate": "sampling_rate",
    "grace": "grace_s", "status_interval": "status_interval_s",
    "drain_timeout": "drain_timeout_s", "clickhouse_user": "clickhouse_user",
    "clickhouse_password": "clickhouse_password", "clickhouse_token": "clickhouse_token",
    "allow_anonymous_ingest": "allow_anonymous_ingest", "durable": "durable",
}, prefix="RAGPULSE_UP__", also_env={"model_dir": ("RAGPULSE_NLI__MODEL_DIR",)})
_h = OPTIONS.help


def up(
    ctx: typer.Context,
    data_dir: Annotated[Path, typer.Option("--data-dir", help=_h("Where chDB keeps the scores (DATA_DIR/chdb).", 'data_dir'))] = Path(".ragpulse"),
    demo: Annotated[bool, typer.Option("--demo", help=_h("Drive realistic RAG traffic through the OpenTelemetry SDK.", 'demo'))] = False,
    demo_rate: Annotated[float, typer.Option("--demo-rate", help=_h("Demo traces per second.", 'demo_rate'))] = 2.0,
    demo_limit: Annotated[int | None, typer.Option("--demo-limit", help=_h("Stop the demo after N traces.", 'demo_limit'))] = None,
    host: Annotated[str, typer.Option("--host", help=_h("Interface for every listener.", 'host'))] = "127.0.0.1",
    http_port: Annotated[int, typer.Option("--http-port", help=_h("OTLP/HTTP port (0: free port).", 'http_port'))] = 4318,
    grpc_port: Annotated[int, typer.Option("--grpc-port", help=_h("OTLP/gRPC port (0: free port).", 'grpc_port'))] = 4317,
    clickhouse_port: Annotated[int, typer.Option("--clickhouse-port", help=_h("ClickHouse-HTTP facade port (0: free port).", 'clickhouse_port'))] = 8123,
    kafka_port: Annotated[int, typer.Option("--kafka-port", help=_h("Embedded broker port (0: free port).", 'kafka_port'))] = 0,
    s3_base_port: Annotated[int, typer.Option("--s3-base-port", help=_h("Durable storage (SeaweedFS): first of its ten consecutive ports on 127.0.0.1, BASE..BASE+9 (0: free ports).", 's3_base_port'))] = 0,
    judge: Annotated[str, typer.Option("--judge", help=_h(judge_help() + " docs/judges.md.", 'judge'))] = DEFAULT_JUDGE,
    model_dir: Annotated[Path | None, typer.Option("--model-dir", help=_h("NLI judge: directory with model.onnx, tokenizer.json, config.json.", 'model_dir'))] = None,
    model: Annotated[str | None, typer.Option("--model", help=_h("LLM judge model.", 'model'))] = None,
    base_url: Annotated[str | None, typer.Option("--base-url", help=_h("LLM judge base URL.", 'base_url'))] = None,
    sampling_rate: Annotated[float | None, typer.Option("--sampling-rate", help=_h("Share of traces judged, by trace id (default: what the judge keeps up with at 2 traces/s, or at --demo-rate: with the default rate 1.0 for both local judges; docs/benchmarks.md).", 'sampling_rate'))] = None,
    grace: Annotated[float, typer.Option("--grace", help=_h("Seconds to wait after a trace's root span ends before scoring it.", 'grace'))] = 2.0,
    status_interval: Annotated[float, typer.Option("--status-interval", help=_h("Seconds between status lines.", 'status_interval'))] = 5.0,
    drain_timeout: Annotated[float, typer.Option("--drain-timeout", help=_h("Ctrl-C: seconds allowed to score what was accepted.", 'drain_timeout'))] = 60.0,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log component details.")] = False,
    clickhouse_user: Annotated[str | None, typer.Option("--clickhouse-user", help=_h("Login of the ClickHouse facade (required off loopback).", 'clickhouse_user'))] = None,
    clickhouse_password: Annotated[str | None, typer.Option("--clickhouse-password", help=_h("Its password; prefer RAGPULSE_UP__CLICKHOUSE_PASSWORD(_FILE): flags show in `ps`.", 'clickhouse_password'))] = None,
    clickhouse_token: Annotated[str | None, typer.Option("--clickhouse-token", help=_h("Bearer token the facade also accepts; prefer RAGPULSE_UP__CLICKHOUSE_TOKEN(_FILE).", 'clickhouse_token'))] = None,
    allow_anonymous_ingest: Annotated[bool, typer.Option("--allow-anonymous-ingest", help=_h("Off loopback, accept OTLP without a bearer token (otherwise set RAGPULSE_OTLP__AUTH_TOKEN).", 'allow_anonymous_ingest'))] = False,
    durable: Annotated[bool, typer.Option("--durable/--in-memory", help=_h("Durable (default): broker on S3 storage (SeaweedFS, DATA_DIR/s3) and requests acknowledged once Kafka has them, so every acknowledged trace survives a crash. --in-memory: lighter, but a crash loses what the broker holds.", 'durable'))] = True,
) -> None:
    """Run broker, collector, scorer and ClickHouse (chDB) on this machine, on loopback."""
    from ..embedded import EmbeddedSettings, run_embedded
    from ..logs import configure_logging, protect_std_streams

    protect_std_streams()  # a dead stderr pipe (Ctrl-C on `| tee`) must not stop the drain
    console = Console(stderr=True)

    configure_logging(logging.INFO if verbose else logging.WARNING)
    settings = OPTIONS.settings(ctx, EmbeddedSettings)
    try:
        code = run_embedded(settings, console)
    except KeyboardInterrupt:  # a second Ctrl-C while starting: what had started is stopped
        console.print("ragpulse up: interrupted while starting; stopped.")
        raise typer.Exit(130) from None
    except ValidationError as exc:  # a part's settings (RAGPULSE_*, up's flags in them)
        OPTIONS.exit_invalid(ctx, exc)
    except Exception as exc:  # start-up failures: one clear line, not a traceback
        console.print(f"[red]ragpulse up failed:[/red] {type(exc).__name__}: {escape(str(exc))}")
        if verbose:
            console.print_exception()
        raise typer.Exit(1) from exc
    raise typer.Exit(code)
