"""Grafana's ClickHouse plugin against `ragpulse up`'s read-only facade: every panel, variable
and alert query, and the plugin's own metadata queries, through real HTTP with the settings the
plugin's driver (clickhouse-go) sends. Grafana cannot run here; its requests can."""

from __future__ import annotations

import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import clickhouse_connect
import pytest

from ragpulse.dashboards.alerts import rule_specs
from ragpulse.dashboards.dashboard import variables
from ragpulse.dashboards.frames import context, run_panel
from ragpulse.dashboards.macros import QueryContext, expand
from ragpulse.dashboards.queries import panels
from ragpulse.deploy.facade import ClickHouseHttpFacade, FacadeSettings, build_facade

from .data import NOW, score_rows


@pytest.fixture(scope="module")
def facade(chdb_dir: Path, settings: Any) -> Iterator[ClickHouseHttpFacade]:
    f = build_facade(str(chdb_dir), FacadeSettings(database=settings.database, username="grafana",
                                                   password="pw", advertise=False))
    f.start()
    yield f
    f.shutdown()


@pytest.fixture(scope="module")
def http_client(facade: ClickHouseHttpFacade) -> Iterator[Any]:
    c = clickhouse_connect.get_client(host="127.0.0.1", port=facade.port, username="grafana",
                                      password="pw", settings={"max_execution_time": 35})
    yield c
    c.close()


def plugin_request(facade: ClickHouseHttpFacade, sql: str, database: str) -> tuple[int, bytes]:
    """A request shaped like clickhouse-go's HTTP transport: query in the body, settings and
    the database as URL parameters, X-ClickHouse-User/-Key headers."""
    params = urllib.parse.urlencode({"database": database, "default_format": "TabSeparated",
                                     "client_protocol_version": "54460", "max_execution_time": "35",
                                     "query_id": "grafana-1"})
    req = urllib.request.Request(f"{facade.url}/?{params}", data=sql.encode(), method="POST",
                                 headers={"X-ClickHouse-User": "grafana", "X-ClickHouse-Key": "pw",
                                          "User-Agent": "clickhouse-go/2 (grafana-datasource)"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def test_every_panel_query_runs_through_the_facade(http_client: Any, settings: Any) -> None:
    ctx = context(NOW - timedelta(hours=24), NOW)
    for panel in panels(settings):
        frame = run_panel(http_client, panel, ctx)
        assert frame.error is None, f"{panel.key}: {frame.error}"


def test_variable_and_alert_queries_run_through_the_facade(http_client: Any, settings: Any) -> None:
    ctx = QueryContext(NOW - timedelta(hours=6), NOW, 60, {})
    # Each variable lists, sorted, the distinct values its dimension has in the generated rows
    # of the last 6 hours.
    recent = [r for r in score_rows() if ctx.time_from <= r.ts <= ctx.time_to]
    for v in variables(settings):
        if v.get("type") == "query":
            dim = v["name"]
            rows = http_client.query(expand(v["query"]["rawSql"], ctx)).result_rows
            assert [r[0] for r in rows] == sorted({getattr(r, dim) for r in recent}), dim
    def answered(s: Any) -> set[str]:
        out = set()
        for spec in rule_specs(s):
            c = QueryContext(NOW - timedelta(seconds=spec.range_s), NOW, 60, {})
            if http_client.query(expand(spec.sql, c)).result_rows:
                out.add(spec.uid)
        return out

    # The generated faithfulness rows are the fast judge's (stored as local, its old name): the
    # absolute rules of the other judges run and find none of theirs; with one level for every
    # judge, the generic rule does.
    uids = {r.uid for r in rule_specs(settings)}
    assert answered(settings) == uids - {"ragpulse-faithfulness-low", "ragpulse-faithfulness-low-model"}
    one = settings.model_copy(update={"alerts": settings.alerts.model_copy(
        update={"faithfulness_min_by_judge": {}})})
    assert "ragpulse-faithfulness-low" in answered(one)


def test_the_plugins_metadata_queries(facade: ClickHouseHttpFacade, settings: Any) -> None:
    db = settings.database
    # From grafana/clickhouse-datasource src/data/CHDatasource.ts and CHVariableSupport.tsx, and
    # clickhouse-go's HTTP hello (conn_http.go queryHello).
    for sql in ("SELECT displayName(), version(), revision(), timezone()",
                "SELECT 1",
                "SHOW DATABASES",
                f'SHOW TABLES FROM "{db}"',
                "SHOW TABLES",
                f'DESC TABLE "{db}"."scores"',
                "SELECT name FROM system.databases ORDER BY name",
                f"SELECT name FROM system.tables WHERE database = '{db}' ORDER BY name",
                f"SELECT name, type, table FROM system.columns WHERE database IN ('{db}')",
                f"SELECT name FROM system.columns WHERE database = '{db}' AND table = 'scores' "
                "ORDER BY name",
                "SELECT name, is_aggregate, case_insensitive, alias_to, origin, description, "
                "syntax, arguments, returned_value, examples, categories FROM system.functions "
                "LIMIT 10000"):
        status, body = plugin_request(facade, sql, db)
        assert status == 200, (sql, body[:300])
    status, body = plugin_request(facade, "SHOW TABLES", db)
    assert b"scores" in body
