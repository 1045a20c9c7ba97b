"""The ClickHouse-HTTP facade's URL settings, attacked over real sockets (issue 17).

chDB takes file paths, schemas and even queries in some of its settings:
``format_template_resultset=/etc/passwd`` put the file into the error text,
``output_format_schema=/path`` wrote a file, ``format_schema_source=query`` with
``format_schema=<SELECT>`` ran a second query the guard never saw (``file()``, ``url()``), and
each left schema-cache files behind. The facade now admits URL settings by exact name only
(:attr:`ragpulse.deploy.sqlguard.GuardPolicy.settings`), and every setting chDB knows is checked
against that list here.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ragpulse.deploy import sqlguard
from ragpulse.deploy.facade import ClickHouseHttpFacade
from tests.security.facade_http import post, recording_listener, running_facade

SECRET = "ragpulse-secret-17-do-not-leak"


@pytest.fixture
def facade(chdb_dir: Path, rag_schema: Any) -> Iterator[ClickHouseHttpFacade]:
    with running_facade(chdb_dir, rag_schema.database) as f:
        yield f


@pytest.fixture
def listener() -> Iterator[tuple[str, list[str]]]:
    """An HTTP server that records every request: no attack may reach it."""
    with recording_listener(b'syntax = "proto3"; message M { uint32 x = 1; }\n') as target:
        yield target


def files_under(*dirs: Path) -> set[str]:
    return {str(Path(root) / name) for d in dirs for root, subdirs, names in os.walk(d)
            for name in names + subdirs}


def test_settings_naming_files_schemas_or_queries_are_refused(
        facade: ClickHouseHttpFacade, chdb_dir: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, listener: tuple[str, list[str]]) -> None:
    target, hits = listener
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)  # where chDB puts relative schema paths and its schema cache
    secret = tmp_path / "secret.txt"
    secret.write_text(f"{SECRET}\n${{data}}\n")
    written = tmp_path / "written.proto"
    # The chDB directory's own parts merge in the background: its top level is compared.
    before = files_under(cwd, tmp_path), set(os.listdir(chdb_dir))
    attacks = [
        ("SELECT 1 FORMAT Template", {"format_template_resultset": str(secret)}),
        ("SELECT 1 FORMAT Template", {"format_template_row": str(secret)}),
        ("SELECT 1 AS x FORMAT Protobuf", {"output_format_schema": str(written)}),
        ("SELECT 1 AS x FORMAT CapnProto", {"output_format_schema": str(written)}),
        ("SELECT 1 AS x FORMAT Protobuf", {"format_schema": f"{secret}:M"}),
        ("SELECT 1 AS x FORMAT Protobuf",
         {"format_schema_source": "query", "format_schema_message_name": "M",
          "format_schema": f"SELECT * FROM url('{target}/schema', 'RawBLOB')"}),
        ("SELECT 1 AS x FORMAT Protobuf",
         {"format_schema_source": "query", "format_schema_message_name": "M",
          "format_schema": f"SELECT * FROM file('{secret}', 'RawBLOB')"}),
        ("SELECT 1 AS x FORMAT Protobuf", {"format_schema_source": "file"}),
        ("SELECT 1", {"format_regexp": f"{SECRET}"}),
        ("SELECT 1", {"format_display_secrets_in_show_and_select": "1"}),
        ("SELECT 1", {"url_base": target}),
    ]
    for sql, params in attacks:
        status, code, body = post(facade.url, sql, **params)
        assert status == 403 and code == "164", (params, status, code, body)
        assert body.startswith("Code: 164. DB::Exception: Cannot modify"), body
        assert SECRET not in body and str(tmp_path) not in body, body
    assert hits == []
    assert not written.exists()
    # No schema cache (it went to <cwd>/__cache__), no written file.
    assert (files_under(cwd, tmp_path), set(os.listdir(chdb_dir))) == before


def test_every_setting_chdb_knows_is_checked_against_the_allow_list(chdb_client: Any) -> None:
    """Every name in ``system.settings`` is refused unless it is on the exact allow-list, and
    nothing on the list can carry a path, schema, URL or query."""
    rows = chdb_client.query("SELECT name, type, description FROM system.settings").result_rows
    assert len(rows) > 1000
    allowed = sqlguard.DEFAULT_POLICY.settings
    let_through = []
    for name, _, _ in rows:
        try:
            sqlguard.filter_settings({name: "1"})
        except sqlguard.Refused:
            continue
        let_through.append(name)
    # `readonly` passes only as "1" (what the facade enforces anyway); any other value is refused.
    assert sorted(let_through) == sorted(n for n, _, _ in rows if n in allowed or n == "readonly")
    with pytest.raises(sqlguard.Refused):
        sqlguard.filter_settings({"readonly": "0"})
    types = {name: (type_, description) for name, type_, description in rows}
    assert allowed <= types.keys(), sorted(allowed - types.keys())
    for name in allowed:
        type_, description = types[name]
        # Free text is where a path, a schema or a query can hide; every allowed setting is a
        # number, a flag, an enum or a time zone.
        assert type_ not in ("String", "URI", "Map"), (name, type_)
        for word in ("path", "file", "schema", "url", "uri", "query", "template", "regexp",
                     "secret", "director"):
            assert word not in name, (name, word)
    # A prefix would let a future chDB setting through unseen: the guard names settings exactly.
    assert not any(n.endswith("_") for n in allowed)
    assert not hasattr(sqlguard.GuardPolicy(), "setting_prefixes")


def test_settings_with_paths_or_queries_are_refused_over_http(facade: ClickHouseHttpFacade,
                                                              chdb_client: Any) -> None:
    from ragpulse.deploy.facade import _TRANSPORT_PARAMS  # steer the exchange; never applied

    risky = [n for (n,) in chdb_client.query(
        "SELECT name FROM system.settings WHERE type IN ('String', 'URI', 'Map') "
        "OR match(name, 'path|file|schema|url|query|template|regexp|secret')").result_rows]
    assert len(risky) > 50
    for name in risky:
        if name in _TRANSPORT_PARAMS:
            continue
        status, code, body = post(facade.url, "SELECT 1", **{name: "/etc/passwd"})
        assert (status, code) == (403, "164"), (name, status, code, body)


def test_clients_settings_are_still_admitted(facade: ClickHouseHttpFacade) -> None:
    # clickhouse-connect, clickhouse-go (the Grafana plugin) and curl users send these.
    for params in ({"max_execution_time": "35", "max_result_rows": "10"},
                   {"output_format_arrow_string_as_string": "1"},
                   {"date_time_input_format": "best_effort",
                    "cast_string_to_dynamic_use_inference": "1"},
                   {"output_format_json_quote_64bit_integers": "0",
                    "output_format_native_write_json_as_string": "1"},
                   {"limit": "5", "session_timezone": "UTC", "readonly": "1"}):
        status, _, body = post(facade.url, "SELECT 1", **params)
        assert (status, body) == (200, "1\n"), (params, body)


def test_show_forms_reading_other_system_tables_are_refused(facade: ClickHouseHttpFacade,
                                                           rag_schema: Any) -> None:
    for sql in ("SHOW CLUSTERS", "SHOW MERGES", "SHOW DICTIONARIES",
                f"SHOW DICTIONARIES FROM {rag_schema.database}", "SHOW FILESYSTEM CACHES",
                "SHOW TEMPORARY TABLES", "SHOW FUNCTIONS", "SHOW ENGINES", "SHOW SETTING max_threads",
                "SHOW CREATE DATABASE system", "SHOW PRIVILEGES", "SHOW INDEXES FROM scores"):
        status, code, body = post(facade.url, sql)
        assert status in (403,) and code in ("164", "497"), (sql, status, code, body)
    # What Grafana's ClickHouse plugin sends keeps working.
    for sql in ("SHOW DATABASES", "SHOW TABLES", f"SHOW TABLES FROM {rag_schema.database}",
                "SHOW FULL TABLES", "SHOW TABLES LIKE 'sc%'", "SHOW DATABASES LIKE 'r%'",
                f"SHOW CREATE TABLE {rag_schema.database}.scores"):
        status, _, body = post(facade.url, sql)
        assert status == 200, (sql, body)


def test_error_bodies_never_echo_files_or_server_paths(facade: ClickHouseHttpFacade,
                                                      tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text(f"{SECRET}\n")
    # The guard loosened as a future chDB setting might slip past it: the error text still
    # carries neither the file's content nor its path, only the code and its name.
    facade.policy = dataclasses.replace(
        facade.policy, settings=facade.policy.settings | {"format_template_resultset"})
    status, code, body = post(facade.url, "SELECT 1 FORMAT Template",
                              format_template_resultset=str(secret))
    assert status == 500 and code == "474", body
    assert body.startswith("Code: 474. DB::Exception: ") and "(INVALID_TEMPLATE_FORMAT)" in body
    assert SECRET not in body and str(tmp_path) not in body, body
    # Errors that only restate the client's statement stay useful, minus absolute paths.
    status, code, body = post(facade.url, f"SELECT `{secret}` FROM system.one")
    assert (status, code) == (400, "47"), body
    assert "Unknown expression identifier" in body and "(UNKNOWN_IDENTIFIER)" in body
    assert str(tmp_path) not in body, body
