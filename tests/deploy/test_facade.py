"""The read-only ClickHouse-HTTP facade, driven by the real clickhouse-connect HTTP client and raw
HTTP. The attacks it refuses are in tests/security/test_facade_attacks.py."""

from __future__ import annotations

import base64
import gzip
import json
import urllib.error
import urllib.request
import uuid
import zlib
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import clickhouse_connect
import pytest
from clickhouse_connect.driver.exceptions import DatabaseError

from ragpulse.deploy.facade import ClickHouseHttpFacade, FacadeSettings, build_facade
from ragpulse.scorer.store import (
    ScoreWriter,
    WriterSettings,
    init_schema,
    latest_version,
    read_owner,
)
from testkit.clickhouse_server import writable_server
from tests.scorer.store.helpers import rows


@pytest.fixture
def facade(chdb_dir: Path, chdb_client: Any, rag_schema: Any) -> Iterator[ClickHouseHttpFacade]:
    f = build_facade(str(chdb_dir), FacadeSettings(database=rag_schema.database, advertise=False))
    f.start()
    yield f
    f.shutdown()


@pytest.fixture
def writable(chdb_dir: Path, chdb_client: Any) -> Iterator[Any]:
    """A writable ClickHouse HTTP server on the same engine (testkit/clickhouse_server.py), for
    data set-up over HTTP and for the write path of clickhouse-connect itself."""
    w = writable_server(str(chdb_dir))
    w.start()
    yield clickhouse_connect.get_client(host="127.0.0.1", port=w.port)
    w.shutdown()


@pytest.fixture
def http_client(facade: ClickHouseHttpFacade) -> Iterator[Any]:
    c = clickhouse_connect.get_client(host="127.0.0.1", port=facade.port)
    yield c
    c.close()


def _raw(url: str, data: bytes | None = None, headers: dict[str, str] | None = None,
         method: str | None = None) -> tuple[int, dict[str, str], bytes]:
    req = urllib.request.Request(url, data=data, headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def test_client_connects_and_gets_typed_results(http_client: Any, chdb_client: Any) -> None:
    assert http_client.server_version == chdb_client.server_version
    res = http_client.query(
        "SELECT toUInt64(42) AS n, 'x''y' AS s, toDateTime64('2026-11-20 12:00:00.250', 3, 'UTC') AS t, "
        "[1.5, 2.5] AS arr, map('a', toUInt32(1)) AS m, toLowCardinality('lc') AS lc, "
        "CAST(NULL AS Nullable(Float64)) AS nul, toFixedString('ab', 2) AS fs")
    assert res.column_names == ("n", "s", "t", "arr", "m", "lc", "nul", "fs")
    n, s, t, arr, m, lc, nul, fs = res.result_rows[0]
    assert (n, s, arr, m, lc, nul) == (42, "x'y", [1.5, 2.5], {"a": 1}, "lc", None)
    assert t.replace(tzinfo=UTC) == datetime(2026, 11, 20, 12, 0, 0, 250000, tzinfo=UTC)
    assert fs in (b"ab", "ab")
    assert http_client.command("SELECT 1 + 1") == 2


def test_parameters_server_and_client_side(http_client: Any) -> None:
    hostile = "'; DROP TABLE x; -- \\ \" {y}"
    assert http_client.query("SELECT {a:String}", parameters={"a": hostile}).result_rows == [(hostile,)]
    assert http_client.query("SELECT %(a)s", parameters={"a": hostile}).result_rows == [(hostile,)]


def test_reads_scores_written_in_process(facade: ClickHouseHttpFacade, http_client: Any,
                                         rag_schema: Any, chdb_client: Any) -> None:
    db = rag_schema.database
    w = ScoreWriter(chdb_client, db, WriterSettings(flush_interval_s=0.01))
    w.start()
    w.write(rows(3))
    w.shutdown()
    got = http_client.query(
        f"SELECT metric, count(), avg(value) FROM `{db}`.scores FINAL GROUP BY metric ORDER BY metric"
    ).result_rows
    assert got == [("answer_relevancy", 3, None), ("faithfulness", 3, 0.75)]
    # The database parameter works too, as for a server.
    c = clickhouse_connect.get_client(host="127.0.0.1", port=facade.port, database=db)
    assert c.command("SELECT count() FROM scores") == 6
    df_rows = c.query("SELECT trace_id, ts FROM scores_dedup ORDER BY trace_id LIMIT 1").result_rows
    assert df_rows[0][0] == f"{0:032x}"
    c.close()


def test_writes_are_refused_and_change_nothing(http_client: Any, rag_schema: Any,
                                               chdb_client: Any) -> None:
    db = rag_schema.database
    w = ScoreWriter(http_client, db, WriterSettings(flush_interval_s=0.01, retry={"deadline_s": 1}))
    w.start()
    try:
        with pytest.raises(Exception, match="READONLY|readonly"):
            w.write(rows(2), timeout_s=30)
    finally:
        w.shutdown()
    for sql in (f"INSERT INTO `{db}`.scores (trace_id) VALUES ('x')", f"DROP TABLE `{db}`.scores",
                f"TRUNCATE TABLE `{db}`.scores", f"ALTER TABLE `{db}`.scores DELETE WHERE 1",
                f"CREATE TABLE `{db}`.t (a UInt8) ENGINE = Memory", "SYSTEM FLUSH LOGS",
                f"OPTIMIZE TABLE `{db}`.scores FINAL", "KILL QUERY WHERE 1", "SET readonly = 0"):
        with pytest.raises(DatabaseError, match="Code: 164|READONLY") as ei:
            http_client.command(sql)
        assert "reads only" in str(ei.value) or "readonly" in str(ei.value)
    with pytest.raises(DatabaseError, match="Code: 164"):
        http_client.insert("scores", [["x"]], column_names=["trace_id"], database=db)
    assert chdb_client.command(f"SELECT count() FROM `{db}`.scores") == 0
    assert chdb_client.command(f"EXISTS TABLE `{db}`.scores") == 1


def test_errors_look_like_clickhouse(http_client: Any, facade: ClickHouseHttpFacade,
                                     rag_schema: Any) -> None:
    with pytest.raises(DatabaseError, match="ACCESS_DENIED|Code: 497"):
        http_client.query("SELECT * FROM no_such_db.t")
    status, headers, body = _raw(
        f"{facade.url}/?query=SELECT%20*%20FROM%20{rag_schema.database}.no_such_table")
    assert status == 404 and headers["X-ClickHouse-Exception-Code"] == "60"
    assert body.startswith(b"Code: 60. DB::Exception:")
    status, headers, _ = _raw(f"{facade.url}/?query=SELEC%201")
    assert status == 400 and headers["X-ClickHouse-Exception-Code"] == "62"


def test_raw_http_surface(facade: ClickHouseHttpFacade) -> None:
    u = facade.url
    assert _raw(f"{u}/ping")[2] == b"Ok.\n" and _raw(f"{u}/")[2] == b"Ok.\n"
    status, headers, body = _raw(f"{u}/?query=SELECT%201%2C%20%27a%27")
    assert (status, body) == (200, b"1\ta\n")  # TabSeparated by default
    assert headers["X-ClickHouse-Format"] == "TabSeparated" and "X-ClickHouse-Query-Id" in headers
    assert "read_rows" in json.loads(headers["X-ClickHouse-Summary"])
    # Query in the body, a FORMAT clause, default_format, settings and params as URL parameters.
    _, h, body = _raw(f"{u}/", b"SELECT number FROM numbers(3) FORMAT JSONEachRow")
    assert body.splitlines() == [b'{"number":"0"}', b'{"number":"1"}', b'{"number":"2"}'] or \
        body.splitlines() == [b'{"number":0}', b'{"number":1}', b'{"number":2}']
    assert h["X-ClickHouse-Format"] == "JSONEachRow"
    _, h, body = _raw(f"{u}/?default_format=JSONCompact&max_threads=1&param_x=7",
                      b"SELECT {x:UInt8} * 6 AS v")
    assert json.loads(body)["data"] == [[42]] and h["Content-Type"].startswith("application/json")
    # URL part first, then the body, as the server concatenates them.
    _, _, body = _raw(f"{u}/?query=SELECT", b" 5")
    assert body == b"5\n"
    # GET is read-only, as on the server.
    status, _, body = _raw(f"{u}/?query=CREATE%20DATABASE%20nope_ro")
    assert status != 200 and b"readonly" in body.lower()
    status, _, _ = _raw(f"{u}/?query=CREATE%20DATABASE%20nope_ro", method="HEAD")
    assert status != 200  # HEAD is read-only too
    # Settings as URL parameters reach the engine; a result cap stops runaway results.
    _, _, body = _raw(f"{u}/?max_threads=3", b"SELECT getSetting('max_threads')")
    assert body.strip() == b"3"
    status, _, body = _raw(f"{u}/?max_result_rows=5", b"SELECT number FROM numbers(100)")
    assert status != 200 and b"Limit for result exceeded" in body
    # Bodies can be compressed.
    _, _, body = _raw(f"{u}/", gzip.compress(b"SELECT 'zipped'"), {"Content-Encoding": "gzip"})
    assert body == b"zipped\n"
    two = gzip.compress(b"SELECT ") + gzip.compress(b"'two members'") + b"\x00" * 8  # + padding
    assert _raw(f"{u}/", two, {"Content-Encoding": "gzip"})[2] == b"two members\n"
    status, _, body = _raw(f"{u}/", zlib.compress(b"SELECT 1") + b"junk", {"Content-Encoding": "deflate"})
    assert status == 400 and b"cannot decode deflate" in body
    status, h, body = _raw(f"{u}/?query=SELECT%201", b"", {"Content-Encoding": "br"}, "POST")
    assert status == 200  # an empty body needs no decoding
    status, _, body = _raw(f"{u}/?compress=1&query=SELECT%201")
    assert status == 400 and b"not supported" in body


def test_body_and_result_limits(chdb_dir: Path, chdb_client: Any) -> None:
    f = build_facade(str(chdb_dir), FacadeSettings(max_body_bytes=1024, max_result_bytes=4096,
                                                    advertise=False))
    f.start()
    try:
        status, headers, body = _raw(f"{f.url}/", b"SELECT '" + b"x" * 5000 + b"'")
        assert status == 413 and b"exceeds 1024 bytes" in body
        zipped = gzip.compress(b"SELECT '" + b"x" * 5000 + b"'")  # small on the wire, big inside
        status, _, body = _raw(f"{f.url}/", zipped, {"Content-Encoding": "gzip"})
        assert len(zipped) < 1024 and status == 413 and b"decompressed" in body
        status, _, body = _raw(f"{f.url}/", b"SELECT number FROM numbers(1000000)")
        assert status == 500 and b"Limit for result exceeded" in body
        assert _raw(f"{f.url}/ping")[0] == 200  # the facade is fine afterwards
    finally:
        f.shutdown()


def test_auth(chdb_dir: Path, chdb_client: Any) -> None:
    f = build_facade(str(chdb_dir), FacadeSettings(username="ops", password="s3cr3t", token="tok",
                                                    advertise=False))
    f.start()
    try:
        q = f"{f.url}/?query=SELECT%201"
        assert _raw(q)[0] == 401
        assert _raw(f"{f.url}/", b"SELECT 1" + b" " * 100_000)[0] == 401  # body never buffered
        assert _raw(f"{f.url}/ping")[0] == 200  # health checks need no credentials
        basic = base64.b64encode(b"ops:s3cr3t").decode()
        assert _raw(q, headers={"Authorization": f"Basic {basic}"})[2] == b"1\n"
        wrong = base64.b64encode(b"ops:nope").decode()
        status, headers, _ = _raw(q, headers={"Authorization": f"Basic {wrong}"})
        assert status == 401 and headers["X-ClickHouse-Exception-Code"] == "516"
        assert _raw(q, headers={"Authorization": "Bearer tok"})[2] == b"1\n"
        # the scheme is case-insensitive (RFC 9110), as the OTLP receivers read it
        assert _raw(q, headers={"Authorization": "bearer tok"})[2] == b"1\n"
        assert _raw(q, headers={"Authorization": f"basic {basic}"})[2] == b"1\n"
        assert _raw(q, headers={"X-ClickHouse-User": "ops", "X-ClickHouse-Key": "s3cr3t"})[0] == 200
        c = clickhouse_connect.get_client(host="127.0.0.1", port=f.port, username="ops", password="s3cr3t")
        assert c.command("SELECT 3") == 3
        c.close()
        with pytest.raises(Exception, match="516|Authentication"):
            clickhouse_connect.get_client(host="127.0.0.1", port=f.port, username="ops", password="x")
        assert f.stats()["refused_auth"] >= 3
    finally:
        f.shutdown()


def test_a_login_is_required_off_loopback() -> None:
    with pytest.raises(ValueError, match="without a login"):
        FacadeSettings(host="0.0.0.0")
    with pytest.raises(ValueError, match="without a login"):
        FacadeSettings(host="192.168.1.10")
    assert FacadeSettings(host="0.0.0.0", token="t").auth_required
    assert FacadeSettings(host="::1").host == "::1"  # loopback needs none
    assert not FacadeSettings(host="localhost").auth_required


def test_lifecycle_and_owner_file(chdb_dir: Path, chdb_client: Any) -> None:
    f = build_facade(str(chdb_dir))
    f.shutdown()  # safe without start
    f.shutdown()
    with pytest.raises(RuntimeError):
        f.start()  # refuses new work after shutdown
    g = build_facade(str(chdb_dir))
    g.start()
    url = g.url
    try:
        owner = read_owner(str(chdb_dir))
        assert owner is not None and owner.url == g.url
        with pytest.raises(RuntimeError):
            g.start()
    finally:
        g.shutdown()
        g.shutdown()
    assert read_owner(str(chdb_dir)) is None
    with pytest.raises(OSError):
        _raw(f"{url}/ping")


def test_schema_init_over_http(writable: Any, chdb_client: Any) -> None:
    from ragpulse.scorer.store import SchemaSettings

    s = SchemaSettings(database="rag_h6_http_init")
    try:
        assert init_schema(writable, s).after == latest_version()
        assert init_schema(writable, s).applied == []
        assert chdb_client.command("SELECT count() FROM rag_h6_http_init.schema_migrations FINAL") == latest_version()
    finally:
        chdb_client.command("DROP DATABASE IF EXISTS rag_h6_http_init SYNC")


def test_dataframes_arrow_and_streams(http_client: Any, writable: Any, rag_schema: Any) -> None:
    import pandas as pd  # declared in the dev extra
    import pyarrow as pa
    db = rag_schema.database
    writable.command(f"CREATE TABLE `{db}`.frames (a UInt32, s String) ENGINE = MergeTree ORDER BY a")
    writable.insert_df("frames", pd.DataFrame({"a": [1, 2], "s": ["x", "y"]}), database=db)
    writable.insert_arrow("frames", pa.table({"a": pa.array([3], pa.uint32()), "s": ["z"]}),
                          database=db)
    df = http_client.query_df(f"SELECT * FROM `{db}`.frames ORDER BY a")
    assert df["a"].tolist() == [1, 2, 3] and df["s"].tolist() == ["x", "y", "z"]
    assert http_client.query_arrow(f"SELECT sum(a) AS t FROM `{db}`.frames").column("t").to_pylist() == [6]
    with http_client.query_row_block_stream("SELECT number FROM numbers(100000)") as stream:
        assert sum(len(block) for block in stream) == 100_000


def test_busy_facade_refuses_with_503(chdb_dir: Path, chdb_client: Any) -> None:
    f = build_facade(str(chdb_dir), FacadeSettings(max_concurrent_queries=1, advertise=False))
    f.start()
    try:
        assert f._slots.acquire(blocking=False)  # a query in progress holds the only slot
        status, headers, body = _raw(f"{f.url}/?query=SELECT%201")
        assert status == 503 and headers["X-ClickHouse-Exception-Code"] == "202"
        from ragpulse.scorer.store import is_retryable

        assert is_retryable(DatabaseError(body.decode()))  # clients will retry it
        f._slots.release()
        assert _raw(f"{f.url}/?query=SELECT%201")[2] == b"1\n"
        assert f.stats()["refused_busy"] == 1
    finally:
        f.shutdown()


def test_a_query_id_cannot_inject_headers(chdb_dir: Path) -> None:
    """Round 5: query_id was echoed in X-ClickHouse-Query-Id as given, so CR/LF in it ended the
    headers and the rest became the body: HTML served from the facade's origin (reflected XSS
    that read rag.scores same-origin); a query_id outside latin-1 raised in the handler."""
    import http.client

    f = build_facade(str(chdb_dir), FacadeSettings(advertise=False))
    f.start()
    try:
        evil = ("x%0d%0aContent-Type:%20text/html%0d%0aContent-Length:%2025%0d%0a%0d%0a"
                "%3Cscript%3Ealert(1)%3C/script%3E")
        for qid in (evil, "%E2%82%AC", "a" * 129, "a%20b"):
            conn = http.client.HTTPConnection("127.0.0.1", f.port, timeout=30)
            conn.request("GET", f"/?query=SELECT%201&query_id={qid}")
            r = conn.getresponse()
            body = r.read()
            conn.close()
            assert r.status == 400 and b"query_id must be" in body, (qid, r.status, body)
            assert r.getheader("Content-Type") == "text/plain; charset=UTF-8"
            assert b"<script>" not in body and "\r" not in str(r.msg)
            uuid.UUID(r.getheader("X-ClickHouse-Query-Id"))  # a fresh id, not the one asked
        ok = "0f8fad5b-d9cb-469f-a165-70867728950e"
        status, headers, body = _raw(f"{f.url}/?query=SELECT%201&query_id={ok}")
        assert status == 200 and body == b"1\n" and headers["X-ClickHouse-Query-Id"] == ok
        assert f.stats()["refused_query_id"] == 4
    finally:
        f.shutdown()


def test_without_a_login_only_this_machine_may_ask(chdb_client: Any, chdb_dir: Path) -> None:
    """On loopback the facade has no login, so a web page was a client: by DNS rebinding (its
    own name resolving to 127.0.0.1, `Host: evil.example`) it read every stored question and
    answer, and a cross-site POST needs no preflight. Loopback names only, no foreign Origin."""
    f = build_facade(str(chdb_dir), FacadeSettings(advertise=False))
    f.start()
    try:
        q = f"{f.url}/?query=SELECT%201"
        for host in ("rebind.evil.example", f"rebind.evil.example:{f.port}", "10.0.0.5:8123"):
            status, headers, body = _raw(q, headers={"Host": host})
            assert status == 403 and headers["X-ClickHouse-Exception-Code"] == "497", body
            assert b"DNS rebinding" in body
        status, headers, body = _raw(f"{f.url}/", b"SELECT 1",
                                     headers={"Origin": "https://evil.example", "Content-Type": "text/plain"})
        assert status == 403 and b"cross-site" in body
        for host in (f"127.0.0.1:{f.port}", f"localhost:{f.port}", "localhost", f"[::1]:{f.port}",
                     "grafana.localhost"):
            assert _raw(q, headers={"Host": host})[2] == b"1\n", host
        assert _raw(q, headers={"Origin": "http://localhost:3000"})[2] == b"1\n"
        # an iframe or no-cors GET of another site's page carries no Origin; the browser's
        # Sec-Fetch-Site says whose page made it (round 5: a blind timing oracle on the data)
        status, _, body = _raw(q, headers={"Sec-Fetch-Site": "cross-site"})
        assert status == 403 and b"Sec-Fetch-Site" in body
        # the facade's own origin, a typed-in URL, a local tool on another port of this machine
        for site in ("same-origin", "none", "same-site"):
            assert _raw(q, headers={"Sec-Fetch-Site": site})[2] == b"1\n", site
        assert _raw(q, headers={"Sec-Fetch-Site": "same-site",
                                "Origin": "http://localhost:3000"})[2] == b"1\n"
        assert f.stats()["refused_origin"] == 5
        c = clickhouse_connect.get_client(host="127.0.0.1", port=f.port)  # what clients send
        assert c.command("SELECT 3") == 3
        c.close()
    finally:
        f.shutdown()
    # with a login (off loopback) the login protects it: a proxy's or DNS name's Host is fine
    f = build_facade(str(chdb_dir), FacadeSettings(token="tok", advertise=False))
    f.start()
    try:
        assert _raw(f"{f.url}/?query=SELECT%201", headers={
            "Host": "clickhouse.internal:8123", "Authorization": "Bearer tok"})[2] == b"1\n"
    finally:
        f.shutdown()
