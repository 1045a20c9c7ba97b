"""`ragpulse db init|status` in-process (typer's runner) on the session chDB directory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from ragpulse.deploy.commands import db
from ragpulse.scorer.store import SchemaSettings, init_schema, latest_version

runner = CliRunner()


def test_init_twice_then_status(chdb_dsn: str, chdb_client: Any, rag_database: str) -> None:
    r = runner.invoke(db, ["init", "--clickhouse", chdb_dsn, "--database", rag_database])
    assert r.exit_code == 0, r.output
    assert f"migrated `{rag_database}` from version 0 to {latest_version()}" in r.output
    r = runner.invoke(db, ["init", "--clickhouse", chdb_dsn, "--database", rag_database])
    assert r.exit_code == 0 and f"is up to date (version {latest_version()})" in r.output
    r = runner.invoke(db, ["status", "--clickhouse", chdb_dsn, "--database", rag_database])
    assert r.exit_code == 0 and f"schema version {latest_version()}" in r.output and "scores_1m" in r.output


def test_status_reports_pending_migrations(chdb_dsn: str, chdb_client: Any, rag_database: str) -> None:
    init_schema(chdb_client, SchemaSettings(database=rag_database), target=2)
    r = runner.invoke(db, ["status", "--clickhouse", chdb_dsn, "--database", rag_database])
    assert r.exit_code == 3 and "migrations pending" in r.output
    assert "pipeline_health  absent" in r.output


def test_print_sql_and_bad_options() -> None:
    r = runner.invoke(db, ["init", "--print-sql", "--database", "analytics", "--ttl-days", "7"])
    assert r.exit_code == 0
    assert "CREATE TABLE IF NOT EXISTS `analytics`.`scores`" in r.output
    assert "INTERVAL 7 DAY" in r.output and "{db}" not in r.output
    r = runner.invoke(db, ["init", "--database", "x;y"])
    assert r.exit_code == 2 and "invalid schema settings" in r.output
    r = runner.invoke(db, ["init", "--clickhouse", "mysql://h", "--database", "ok"])
    assert r.exit_code == 1 and "unsupported ClickHouse DSN" in r.output
    r = runner.invoke(db, ["init", "--ttl-days", "0"])
    assert r.exit_code == 2


def test_commands_show_a_dsn_without_its_password() -> None:
    from ragpulse.deploy.commands.dashboards import _describe

    shown = _describe("http://reader:s3cret@127.0.0.1:9/")
    assert "s3cret" not in shown and "reader:***@127.0.0.1:9" in shown


def test_every_command_defaults_to_the_store_of_ragpulse_up(monkeypatch, tmp_path) -> None:
    """`up`, `status`, `report`, `db` and the standalone scorer default to one store
    (.ragpulse/chdb): `db init` used to create ./ragpulse-data/chdb, where `status` never looks."""
    import inspect

    from ragpulse.deploy.commands import report
    from ragpulse.deploy.commands import status as ragpulse_status
    from ragpulse.deploy.commands.db import init, status
    from ragpulse.deploy.embedded import EmbeddedSettings
    from ragpulse.scorer.pipeline.settings import ScorerSettings
    from ragpulse.scorer.store import DEFAULT_DSN, StoreSettings, chdb_path

    monkeypatch.chdir(tmp_path)
    want = chdb_path(DEFAULT_DSN)
    assert want == str((EmbeddedSettings().data_dir / "chdb").resolve())
    for command in (ragpulse_status, report):
        assert inspect.signature(command).parameters["data_dir"].default.resolve() / "chdb" == \
            Path(want)
    for command in (init, status):
        assert chdb_path(inspect.signature(command).parameters["clickhouse"].default.default) == want
    assert chdb_path(StoreSettings().dsn) == want
    assert chdb_path(ScorerSettings.model_fields["clickhouse"].default) == want


def test_read_only_commands_create_no_store(monkeypatch, tmp_path) -> None:
    from ragpulse.deploy import cli

    if not cli.app.registered_commands:
        cli._register()
    app = cli.app
    monkeypatch.chdir(tmp_path)
    for args in (["db", "status"], ["status"], ["report", "--out", str(tmp_path / "r.html")]):
        r = runner.invoke(app, args)
        assert r.exit_code == 1, (args, r.output)
        flat = " ".join(r.output.split())
        assert "no ragpulse store at" in flat and "`ragpulse up` creates one there" in flat, flat
    assert list(tmp_path.iterdir()) == []  # no .ragpulse/, no ragpulse-data/, no report


def test_a_store_at_the_old_default_is_pointed_out(monkeypatch, tmp_path) -> None:
    """`db` used to default to ./ragpulse-data/chdb: a user with scores there is told where the
    command now looks and how to reach the old store."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ragpulse-data" / "chdb").mkdir(parents=True)
    r = runner.invoke(db, ["status"])
    flat = " ".join(r.output.split())
    assert r.exit_code == 1 and "note: ./ragpulse-data/chdb exists" in flat, flat
    assert "--clickhouse chdb://ragpulse-data/chdb" in flat
    r = runner.invoke(db, ["status", "--clickhouse", "chdb://elsewhere/chdb"])
    assert "note:" not in r.output  # only for the default
