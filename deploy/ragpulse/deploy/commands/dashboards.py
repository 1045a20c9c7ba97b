"""``ragpulse dashboards export|push``, ``ragpulse report`` and ``ragpulse status``.

Settings come from ``--settings FILE`` (YAML or JSON with the fields of
:class:`~ragpulse.dashboards.settings.DashboardsSettings`, thresholds under ``alerts:``, the drift
test under ``drift:``), overridden by the few flags below. ``report``/``status`` read through
``ragpulse up``'s facade when it owns the chDB directory (``open_store(..., follow_owner=True)``).
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError

from ragpulse.dashboards import DashboardsSettings
from ragpulse.deploy.logs import mask_secrets
from ragpulse.deploy.options import ENV_EPILOG

__all__ = ["dashboards", "report", "status"]

dashboards = typer.Typer(
    name="dashboards",
    help="Grafana dashboards and alert rules: export provisioning files or push them to Grafana.",
    no_args_is_help=True,
    add_completion=False,
)

_SETTINGS_HELP = "YAML/JSON file with dashboard settings (thresholds under alerts:, drift:)."
_DSN_HELP = ("chdb:///path or http(s)://host:port (a ClickHouse server or the facade of "
             "`ragpulse up`); default: DATA_DIR/chdb, followed to its owner's facade")


def _fail(msg: str, code: int = 1) -> typer.Exit:
    typer.echo(f"error: {msg}", err=True)
    return typer.Exit(code)


def load_settings(path: Path | None, **overrides: Any) -> DashboardsSettings:
    """Settings from ``path`` (optional) with non-None ``overrides``. Raises ``typer.Exit(2)``
    with a readable message on invalid settings."""
    data: dict[str, Any] = {}
    if path is not None:
        import yaml

        try:
            loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as exc:
            raise _fail(f"cannot read settings {path}: {exc}", 2) from None
        if not isinstance(loaded, dict):
            raise _fail(f"settings {path} must be a mapping", 2)
        data.update(loaded)
    data.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return DashboardsSettings(**data)
    except ValidationError as exc:
        msgs = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise _fail(f"invalid dashboard settings: {msgs}", 2) from None


@dashboards.command("export", epilog=ENV_EPILOG)
def export_cmd(
    directory: Annotated[Path, typer.Argument(help="Output directory (created if missing).")],
    settings: Annotated[Path | None, typer.Option("--settings", help=_SETTINGS_HELP)] = None,
    database: Annotated[str | None, typer.Option(help="ClickHouse database.")] = None,
    datasource_uid: Annotated[str | None, typer.Option(help="Grafana datasource uid.")] = None,
    trace_url: Annotated[str | None, typer.Option(
        "--trace-url", help="Tracing-UI link template with {trace_id}.")] = None,
) -> None:
    """Write provisioning-ready files: datasource, dashboard provider and JSON, alert rules, an
    example contact point."""
    from ragpulse.dashboards import export

    s = load_settings(settings, database=database, datasource_uid=datasource_uid,
                      trace_url_template=trace_url)
    try:
        written = export(directory, s)
    except OSError as exc:
        raise _fail(f"cannot write {directory}: {exc}") from None
    for p in written:
        typer.echo(str(p))


@dashboards.command("push", epilog=ENV_EPILOG)
def push_cmd(
    grafana_url: Annotated[str, typer.Option("--grafana-url", envvar="GRAFANA_URL",
                                             help="Grafana root URL, e.g. http://grafana:3000")],
    token: Annotated[str | None, typer.Option(
        "--token", envvar="GRAFANA_TOKEN", show_envvar=True,
        help="Service-account token (or user:password in the URL).")] = None,
    settings: Annotated[Path | None, typer.Option("--settings", help=_SETTINGS_HELP)] = None,
    database: Annotated[str | None, typer.Option(help="ClickHouse database.")] = None,
    datasource_uid: Annotated[str | None, typer.Option(help="Grafana datasource uid.")] = None,
    trace_url: Annotated[str | None, typer.Option(
        "--trace-url", help="Tracing-UI link template with {trace_id}.")] = None,
    timeout: Annotated[float, typer.Option(help="Seconds per HTTP request.", min=0.1)] = 10.0,
) -> None:
    """Create or update the folder, dashboard and alert rules in Grafana (idempotent)."""
    from ragpulse.dashboards import GrafanaPushError, push

    s = load_settings(settings, database=database, datasource_uid=datasource_uid,
                      trace_url_template=trace_url)
    try:
        rep = push(grafana_url, s, token=token, timeout_s=timeout)
    except GrafanaPushError as exc:
        raise _fail(str(exc), 1 if exc.permanent else 75) from None
    for line in rep.lines():
        typer.echo(line)


def _client(clickhouse: str | None, data_dir: Path, database: str) -> tuple[Any, str]:
    """A client (through the owner's facade when one runs) on a database that has the ragpulse
    schema. Raises ``typer.Exit(1)`` with the reason otherwise."""
    from ragpulse.scorer.store import StoreError, applied_versions, credentials_from_env, open_store

    dsn = clickhouse or f"chdb://{(data_dir / 'chdb').resolve()}"
    try:
        client = open_store(dsn, follow_owner=True, must_exist=True, **credentials_from_env())
    except (StoreError, ValueError) as exc:
        raise _fail(str(exc)) from None
    try:
        applied = applied_versions(client, database)
    except Exception as exc:
        client.close()
        raise _fail(f"cannot read ClickHouse at {mask_secrets(dsn)}: {exc}") from None
    if not applied:
        client.close()
        raise _fail(f"database `{database}` at {mask_secrets(dsn)} has no ragpulse schema: check "
                    "--database, or create it with `ragpulse db init` (or run `ragpulse up`)")
    return client, _describe(dsn)


def _describe(dsn: str) -> str:
    """The DSN, plus the facade URL when a running owner (``ragpulse up``) was followed."""
    import os

    from ragpulse.scorer.store import chdb_path, read_owner

    shown = mask_secrets(dsn)
    if dsn.startswith("chdb://"):
        owner = read_owner(chdb_path(dsn))
        if owner is not None and owner.pid != os.getpid() and owner.alive():
            shown += f" via {owner.url} (pid {owner.pid})"
    return shown


def _until(value: str | None) -> datetime:
    if not value:
        return datetime.now(UTC)
    try:
        t = datetime.fromisoformat(value)
    except ValueError:
        raise _fail(f"--until {value!r} is not an ISO time", 2) from None
    return t if t.tzinfo else t.replace(tzinfo=UTC)


def _range(since: str, until: str | None) -> tuple[datetime, datetime]:
    from ragpulse.dashboards import since as parse_since

    t1 = _until(until)
    try:
        return t1 - parse_since(since), t1
    except ValueError as exc:
        raise _fail(f"--since: {exc}", 2) from None


_DATA_DIR = typer.Option("--data-dir", help="Where `ragpulse up` keeps chDB (DATA_DIR/chdb).")


def report(
    since: Annotated[str, typer.Option("--since", help="Range ending now (or --until): 30m, 24h, 7d.")] = "24h",
    out: Annotated[str, typer.Option(
        "--out", help="HTML file to write (an existing directory, or a path ending in /: "
                      "DIR/report.html).")] = "report.html",
    clickhouse: Annotated[str | None, typer.Option(
        "--clickhouse", envvar="RAGPULSE_CLICKHOUSE__DSN", help=_DSN_HELP)] = None,
    data_dir: Annotated[Path, _DATA_DIR] = Path(".ragpulse"),
    database: Annotated[str | None, typer.Option(
        envvar="RAGPULSE_CLICKHOUSE__DATABASE", help="ClickHouse database.")] = None,
    service: Annotated[list[str] | None, typer.Option(
        "--service", help="Only these services (repeatable).")] = None,
    until: Annotated[str | None, typer.Option(
        "--until", help="End of the range (ISO time, UTC); default now.")] = None,
    settings: Annotated[Path | None, typer.Option("--settings", help=_SETTINGS_HELP)] = None,
    trace_url: Annotated[str | None, typer.Option(
        "--trace-url", envvar="RAGPULSE_TRACE_URL",
        help="Tracing-UI link template with {trace_id} (Jaeger, Tempo, Grafana Explore); "
             "unset: trace ids are not linked.")] = None,
) -> None:
    """Render the dashboard's panels and the alert rules into one self-contained HTML file."""
    from ragpulse.dashboards import build_report, write_atomic

    s = load_settings(settings, database=database, trace_url_template=trace_url)
    t0, t1 = _range(since, until)
    target = Path(out)
    if out.endswith(("/", os.sep)) or target.is_dir():
        target = target / "report.html"
    client, dsn = _client(clickhouse, data_dir, s.database)
    try:
        text = build_report(client, s, t0, t1, selection={"service": service} if service else None,
                            source=dsn)
    finally:
        client.close()
    try:
        write_atomic(target, text)
    except OSError as exc:
        raise _fail(f"cannot write {target}: {exc}") from None
    typer.echo(f"wrote {target} ({len(text) // 1024} KiB, {t0:%Y-%m-%d %H:%M} – {t1:%Y-%m-%d %H:%M} UTC)")


def status(
    since: Annotated[str, typer.Option("--since", help="Range for the trend: 30m, 24h, 7d.")] = "24h",
    clickhouse: Annotated[str | None, typer.Option(
        "--clickhouse", envvar="RAGPULSE_CLICKHOUSE__DSN", help=_DSN_HELP)] = None,
    data_dir: Annotated[Path, _DATA_DIR] = Path(".ragpulse"),
    database: Annotated[str | None, typer.Option(
        envvar="RAGPULSE_CLICKHOUSE__DATABASE", help="ClickHouse database.")] = None,
    until: Annotated[str | None, typer.Option(
        "--until", help="End of the range (ISO time, UTC); default now.")] = None,
    settings: Annotated[Path | None, typer.Option("--settings", help=_SETTINGS_HELP)] = None,
    why: Annotated[str | None, typer.Option(
        "--why", metavar="METRIC",
        help="Instead of the summary: which segment drove METRIC's change from the baseline "
             "window to the recent one (rate: it got worse; mix: it got more traffic), ranked "
             "(docs/dashboards.md).")] = None,
    now: Annotated[str, typer.Option(
        "--now", help="With --why: the recent window, ending at --until: 5m, 1h.")] = "5m",
    baseline: Annotated[str | None, typer.Option(
        "--baseline", help="With --why: the baseline window, right before the recent one "
                           "(default: as long as --now).")] = None,
    service: Annotated[list[str] | None, typer.Option(
        "--service", help="With --why: only these services (repeatable).")] = None,
) -> None:
    """Per metric and service: mean and samples over --since, the last interval's value, band
    and samples, trend; and the alerts firing. Exit code 3 when an alert fires (scriptable
    health check). With --why METRIC: the segments that drove METRIC's change instead."""
    from rich.console import Console

    from ragpulse.dashboards import (
        collect_status,
        render_status,
        status_interval,
        status_judges,
        unscorable_traces,
    )

    s = load_settings(settings, database=database)
    if why is not None:
        _why(s, why, now, baseline, until, service, clickhouse, data_dir)
        return
    t0, t1 = _range(since, until)
    client, dsn = _client(clickhouse, data_dir, s.database)
    try:
        lines, results, errors = collect_status(client, s, t0, t1)
        reasons, reason_errors = unscorable_traces(client, s, t0, t1)
        judges = status_judges(client, s, t0, t1)
    finally:
        client.close()
    # Wide enough for metric names and alert lists even when piped (rich assumes 80 then).
    console = Console(width=max(132, Console().width))
    render_status(console, lines, results, errors + reason_errors,
           f"ragpulse status · {t0:%Y-%m-%d %H:%M} – {t1:%Y-%m-%d %H:%M} UTC · {dsn}",
           reasons=reasons, since=since.strip().lower(), interval_s=status_interval(t0, t1),
           judges=judges)
    if any(r.firing for r in results):
        raise typer.Exit(3)


def _why(s: DashboardsSettings, metric: str, now: str, baseline: str | None, until: str | None,
         service: list[str] | None, clickhouse: str | None, data_dir: Path) -> None:
    """``status --why METRIC``: run the decomposition and print it. Exit 1 when the query fails."""
    from rich.console import Console

    from ragpulse.dashboards import explain_change, render_why, why_windows
    from ragpulse.dashboards import since as parse_since

    try:
        now_len = parse_since(now)
        base_len = parse_since(baseline) if baseline else None
    except ValueError as exc:
        raise _fail(f"--now/--baseline: {exc}", 2) from None
    b, n = why_windows(_until(until), now_len, base_len)
    client, dsn = _client(clickhouse, data_dir, s.database)
    try:
        result = explain_change(client, s, metric, b, n,
                                selection={"service": service} if service else None)
    except ValueError as exc:
        raise _fail(f"--why: {exc}", 2) from None
    finally:
        client.close()
    console = Console(width=max(132, Console().width))
    render_why(console, result, f"ragpulse status --why {metric} · {dsn}")
    if result.error:
        raise typer.Exit(1)
