"""The ClickHouse-HTTP facade of `ragpulse up`, attacked over real sockets (issue 10, part 1).

chDB is the whole ClickHouse engine inside the facade's process: without the guard, these
requests read /etc/passwd, fetched arbitrary URLs (SSRF), wrote files as the process's user and
created, filled and dropped tables. Each must now be refused with a ClickHouse-style error and
change nothing. What clients legitimately send keeps working (tests/deploy/test_facade.py,
tests/dashboards/test_facade_grafana.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ragpulse.deploy.facade import ClickHouseHttpFacade
from tests.security.facade_http import post, recording_listener, running_facade


@pytest.fixture
def facade(chdb_dir: Path, rag_schema: Any) -> Iterator[ClickHouseHttpFacade]:
    with running_facade(chdb_dir, rag_schema.database) as f:
        yield f


@pytest.fixture
def ssrf_target() -> Iterator[tuple[str, list[str]]]:
    """An HTTP server that records every request: an SSRF probe must never reach it."""
    with recording_listener(b"secret-internal-page\n", "/internal") as target:
        yield target


def refused(url: str, sql: str, code: str, **params: str) -> str:
    status, got, body = post(url, sql, **params)
    assert status in (400, 403) and got == code, (sql, status, got, body)
    assert body.startswith(f"Code: {code}. DB::Exception:"), body
    assert "(version " in body
    return body


def test_local_files_are_not_readable(facade: ClickHouseHttpFacade) -> None:
    u = facade.url
    for sql in ("SELECT * FROM file('/etc/passwd', 'LineAsString')",
                "select * from FILE('/etc/passwd','LineAsString')",
                "SELECT file('/etc/passwd')",
                "SELECT line FROM (SELECT * FROM file('/etc/passwd', 'LineAsString', 'line String'))",
                "DESCRIBE TABLE file('/etc/passwd', 'LineAsString')",
                "SELECT * FROM fileCluster('c', '/etc/passwd')",
                "SELECT * FROM filesystem('/etc')"):
        body = refused(u, sql, "497")
        assert "root:" not in body and "not allowed" in body


def test_urls_are_not_fetched(facade: ClickHouseHttpFacade, ssrf_target: tuple[str, list[str]]) -> None:
    target, hits = ssrf_target
    for sql in (f"SELECT * FROM url('{target}', 'LineAsString')",
                f"SELECT * FROM urlCluster('default', '{target}', 'LineAsString')",
                f"SELECT * FROM s3('{target}/b/k', 'LineAsString')",
                f"SELECT * FROM remote('127.0.0.1:{target.split(':')[2].split('/')[0]}', system.one)",
                f"SELECT 1 WHERE 1 IN (SELECT 1 FROM url('{target}', 'LineAsString'))"):
        refused(facade.url, sql, "497")
    assert hits == []


def test_no_file_is_written(facade: ClickHouseHttpFacade, tmp_path: Path) -> None:
    out = tmp_path / "owned.csv"
    refused(facade.url, f"INSERT INTO FUNCTION file('{out}', 'CSV', 'x String') VALUES ('owned')", "164")
    refused(facade.url, f"SELECT 'owned' INTO OUTFILE '{out}'", "164")
    refused(facade.url, f"SELECT 'owned' INTO OUTFILE '{out}' FORMAT CSV", "164")
    assert not out.exists()


@pytest.mark.parametrize("statement", [
    # DESCRIBE writes a column name of the client's choosing at the start of a line: appended
    # to ~/.ssh/authorized_keys or ~/.bashrc it was code execution (a helper's attack, 2026-11-27)
    "DESCRIBE (SELECT 1 AS `ssh-ed25519 AAAA attacker`) INTO OUTFILE '{out}' APPEND FORMAT TSVRaw",
    "DESCRIBE TABLE {db}.scores INTO OUTFILE '{out}'",
    "EXISTS TABLE {db}.nothing INTO OUTFILE '{out}' TRUNCATE",
    "EXISTS DATABASE {db} INTO OUTFILE '{out}'",
    "SHOW TABLES INTO OUTFILE '{out}'",
    "SHOW TABLES FROM {db} LIKE 'x%' INTO OUTFILE '{out}' COMPRESSION 'gzip'",
    "SHOW CREATE TABLE {db}.scores INTO OUTFILE '{out}'",
])
def test_no_statement_kind_writes_a_file(facade: ClickHouseHttpFacade, rag_schema: Any,
                                         tmp_path: Path, statement: str) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep me\n")
    for out in (tmp_path / "new.txt", victim):
        refused(facade.url, statement.format(out=out, db=rag_schema.database), "164")
    assert not (tmp_path / "new.txt").exists() and victim.read_text() == "keep me\n"
    # the same statements without the clause still answer
    plain = statement.split(" INTO OUTFILE")[0].format(db=rag_schema.database)
    status, _, body = post(facade.url, plain)
    assert status == 200, (plain, body)


def test_no_process_or_other_source_is_reached(facade: ClickHouseHttpFacade) -> None:
    for sql in ("SELECT * FROM executable('id', 'TSV', 'x String')",
                "SELECT * FROM python('print(1)')",
                "SELECT * FROM input('x String')",
                "SELECT * FROM mysql('127.0.0.1:3306', 'db', 't', 'u', 'p')",
                "SELECT * FROM postgresql('127.0.0.1:5432', 'db', 't', 'u', 'p')",
                "SELECT * FROM sqlite('/tmp/x.db', 't')",
                "SELECT * FROM merge('system', '.*')",
                "SELECT * FROM dictionary('d')",
                "SELECT * FROM view(SELECT * FROM system.users)",
                "SELECT sleepEachRow(1) FROM numbers(100)",
                "SELECT getServerSetting('path')"):  # the server's directories
        refused(facade.url, sql, "497")


def test_tables_and_databases_cannot_be_changed(facade: ClickHouseHttpFacade, rag_schema: Any,
                                                chdb_client: Any) -> None:
    db = rag_schema.database
    for sql in (f"CREATE TABLE {db}.x (a UInt8) ENGINE = Memory",
                f"CREATE TABLE {db}.f (a String) ENGINE = File(CSV)",
                f"INSERT INTO {db}.scores (trace_id) VALUES ('forged')",
                f"DROP TABLE {db}.scores",
                f"ALTER TABLE {db}.scores DELETE WHERE 1",
                f"RENAME TABLE {db}.scores TO {db}.gone",
                "CREATE DATABASE evil",
                f"CREATE DICTIONARY {db}.d (k UInt64, v String) PRIMARY KEY k "
                "SOURCE(FILE(path '/etc/passwd' format 'TSV')) LAYOUT(FLAT()) LIFETIME(0)",
                "CREATE FUNCTION f AS x -> x",
                "SET allow_ddl = 1",
                "GRANT ALL ON *.* TO default",
                "SYSTEM SHUTDOWN"):
        refused(facade.url, sql, "164")
    assert chdb_client.command(f"SELECT count() FROM `{db}`.scores") == 0
    assert chdb_client.command(f"EXISTS TABLE `{db}`.scores") == 1
    assert chdb_client.command("EXISTS DATABASE evil") == 0


def test_a_second_statement_never_runs(facade: ClickHouseHttpFacade, rag_schema: Any,
                                       chdb_client: Any) -> None:
    db = rag_schema.database
    for sql in (f"SELECT 1; DROP TABLE {db}.scores",
                f"SELECT 1;\nINSERT INTO {db}.scores (trace_id) VALUES ('x')",
                f"SELECT 1 /* ; */ ; DROP TABLE {db}.scores -- ;",
                f"SELECT ';' AS s; DROP TABLE {db}.scores"):
        refused(facade.url, sql, "62")
    assert chdb_client.command(f"EXISTS TABLE `{db}`.scores") == 1
    assert chdb_client.command(f"SELECT count() FROM `{db}`.scores") == 0


def test_readonly_cannot_be_lifted(facade: ClickHouseHttpFacade, rag_schema: Any,
                                   chdb_client: Any) -> None:
    db = rag_schema.database
    insert = f"INSERT INTO {db}.scores (trace_id) VALUES ('x')"
    for value in ("0", "2"):
        body = refused(facade.url, insert, "164", readonly=value)
        assert "readonly" in body
        refused(facade.url, "SELECT 1", "164", readonly=value)
    refused(facade.url, "SELECT 1 SETTINGS readonly = 0", "164")
    refused(facade.url, "SELECT 1", "164", allow_ddl="1")
    refused(facade.url, "SELECT 1", "164", allow_introspection_functions="1")
    refused(facade.url, "SELECT 1", "164", user_files_path="/")
    # readonly=1 is what the facade enforces anyway: asking for it is fine.
    assert post(facade.url, "SELECT 1", readonly="1")[2] == "1\n"
    assert chdb_client.command(f"SELECT count() FROM `{db}`.scores") == 0


def test_only_the_ragpulse_database_and_needed_system_tables(facade: ClickHouseHttpFacade,
                                                            rag_schema: Any) -> None:
    u = facade.url
    for sql in ("SELECT * FROM system.users", "SELECT * FROM system.processes",
                "SELECT * FROM system.query_log", "SELECT * FROM system.named_collections",
                "SELECT * FROM system.stack_trace", "SELECT * FROM system.disks",
                "SELECT * FROM information_schema.tables", "SELECT * FROM default.t",
                "SELECT 1 WHERE 1 IN system.users", "SHOW TABLES FROM default",
                "SHOW CREATE TABLE system.users", "EXISTS TABLE default.t"):
        refused(u, sql, "497")
    refused(u, "SELECT * FROM {t:Identifier}", "497", param_t="system.users")
    refused(u, "SELECT 1", "497", database="default")
    for sql in ("SHOW USERS", "SHOW GRANTS", "SHOW PROCESSLIST", "SHOW ACCESS",
                "EXPLAIN SELECT * FROM file('/etc/passwd')", "USE system"):
        refused(u, sql, "164")
    # ...while what the clients need is served.
    db = rag_schema.database
    assert post(u, f"SELECT count() FROM {db}.scores")[0] == 200
    assert post(u, "SELECT count() FROM scores")[0] == 200  # the ragpulse database is current
    assert post(u, "SELECT count() > 0 FROM system.settings")[0] == 200
    assert post(u, f"SELECT name FROM system.tables WHERE database = '{db}' LIMIT 1")[0] == 200
    assert post(u, f"SHOW TABLES FROM {db}")[0] == 200
    assert post(u, "SELECT count() FROM tables", database="system")[0] == 200
    assert post(u, "SELECT * FROM {t:Identifier} LIMIT 0", param_t="scores")[0] == 200


def test_refusals_are_counted(facade: ClickHouseHttpFacade) -> None:
    refused(facade.url, "SELECT file('/etc/passwd')", "497")
    refused(facade.url, "DROP TABLE x", "164")
    st = facade.stats()
    assert st["refused_access"] == 1 and st["refused_readonly"] == 1
