"""``ragpulse db``: create, migrate and inspect the ClickHouse schema."""

from __future__ import annotations

import typer
from pydantic import ValidationError

from ragpulse.deploy.options import ENV_EPILOG
from ragpulse.scorer.store import (
    DEFAULT_DSN,
    MIGRATIONS,
    SchemaError,
    SchemaSettings,
    StoreError,
    applied_versions,
    credentials_from_env,
    init_schema,
    latest_version,
    legacy_store_note,
    open_store,
)

__all__ = ["db"]

db = typer.Typer(
    name="db",
    help="ClickHouse schema: create or migrate (idempotent), show its version.",
    no_args_is_help=True,
    add_completion=False,
)

_DSN_HELP = ("chdb:///path (in-process engine) or http(s)://[user:pass@]host:port "
             "(a ClickHouse server, or the facade of a running `ragpulse up`)")


def _settings(database: str, ttl_days: int, rollup_ttl_days: int, health_ttl_days: int,
              cluster: str | None = None) -> SchemaSettings:
    try:
        return SchemaSettings(database=database, ttl_days=ttl_days, rollup_ttl_days=rollup_ttl_days,
                              health_ttl_days=health_ttl_days, cluster=cluster)
    except ValidationError as exc:
        msgs = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        typer.echo(f"error: invalid schema settings: {msgs}", err=True)
        raise typer.Exit(2) from None


@db.command("init", epilog=ENV_EPILOG)
def init(
    clickhouse: str = typer.Option(DEFAULT_DSN, "--clickhouse",
                                   envvar="RAGPULSE_CLICKHOUSE__DSN", help=_DSN_HELP),
    database: str = typer.Option("rag", envvar="RAGPULSE_CLICKHOUSE__DATABASE"),
    ttl_days: int = typer.Option(90, help="delete raw score rows older than this"),
    rollup_ttl_days: int = typer.Option(400, help="delete per-minute rollup rows older than this"),
    health_ttl_days: int = typer.Option(30, help="delete pipeline-health rows older than this"),
    target: int | None = typer.Option(None, help="migrate up to this version (default: latest)"),
    print_sql: bool = typer.Option(False, "--print-sql", help="print the DDL instead of running it"),
    cluster: str | None = typer.Option(
        None, "--cluster", envvar="RAGPULSE_CLICKHOUSE__CLUSTER",
        help="ClickHouse cluster name: ON CLUSTER DDL, Replicated*MergeTree <table>_local + Distributed <table>"),
) -> None:
    """Create the schema or migrate it to the latest version. Safe to run any number of times."""
    settings = _settings(database, ttl_days, rollup_ttl_days, health_ttl_days, cluster)
    if print_sql:
        for m in MIGRATIONS:
            if target is not None and m.version > target:
                break
            typer.echo(f"-- migration {m.version}: {m.name}")
            for stmt in m.render(settings):
                typer.echo(stmt.rstrip() + ";\n")
        return
    if note := legacy_store_note(clickhouse):
        typer.echo(note, err=True)
    try:
        client = open_store(clickhouse)
        report = init_schema(client, settings, target=target)
    except (StoreError, SchemaError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    for line in report.lines():
        typer.echo(line)


@db.command("status", epilog=ENV_EPILOG)
def status(
    clickhouse: str = typer.Option(DEFAULT_DSN, "--clickhouse",
                                   envvar="RAGPULSE_CLICKHOUSE__DSN", help=_DSN_HELP),
    database: str = typer.Option("rag", envvar="RAGPULSE_CLICKHOUSE__DATABASE"),
) -> None:
    """Show the applied schema version and row counts. Exit code 3 when migrations are pending."""
    settings = _settings(database, 90, 400, 30)
    if note := legacy_store_note(clickhouse):
        typer.echo(note, err=True)
    try:
        client = open_store(clickhouse, follow_owner=True, must_exist=True,
                            **credentials_from_env())
        applied = applied_versions(client, settings.database)
        counts = {}
        if applied:
            for t in ("scores", "scores_1m", "pipeline_health"):
                try:
                    counts[t] = client.command(f"SELECT count() FROM `{settings.database}`.`{t}`")
                except Exception:  # a table from a migration not applied yet
                    counts[t] = "absent"
    except (StoreError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    current = max(applied, default=0)
    typer.echo(f"database `{settings.database}`: schema version {current} "
               f"(this ragpulse: {latest_version()})")
    for t, n in counts.items():
        typer.echo(f"  {t:<16} {n} rows")
    if current < latest_version():
        typer.echo("migrations pending: run `ragpulse db init`")
        raise typer.Exit(3)
