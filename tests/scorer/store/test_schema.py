"""Schema and migrations on a real chDB engine (the session directory, one database per test)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from ragpulse.common.schema.clickhouse import SCORES, TABLES, applied_versions, create_table_sql
from ragpulse.scorer.store import (
    MIGRATIONS,
    SchemaError,
    SchemaSettings,
    init_schema,
    latest_version,
    rows_from_scores,
)

from .helpers import T0, meta, rows, scores, trace_id, write_rows


def _tables(client: Any, db: str) -> set[str]:
    return {r[0] for r in client.query(
        "SELECT name FROM system.tables WHERE database = {d:String}", parameters={"d": db}).result_rows}



def test_init_creates_everything_and_is_idempotent(chdb_client: Any, rag_database: str) -> None:
    s = SchemaSettings(database=rag_database)
    first = init_schema(chdb_client, s)
    assert (first.before, first.after) == (0, latest_version())
    assert [v for v, _ in first.applied] == [m.version for m in MIGRATIONS]
    assert _tables(chdb_client, rag_database) >= {
        "scores", "scores_1m", "scores_1m_mv", "pipeline_health", "schema_migrations", "scores_dedup",
        "scores_1m_exact"}
    second = init_schema(chdb_client, s)
    assert second.applied == [] and second.after == latest_version()
    assert "up to date" in second.lines()[0]
    # Bookkeeping is not duplicated either.
    n = chdb_client.command(f"SELECT count() FROM `{rag_database}`.schema_migrations FINAL")
    assert n == len(MIGRATIONS)


def test_migrates_from_version_1_keeping_rows(chdb_client: Any, rag_database: str) -> None:
    s = SchemaSettings(database=rag_database)
    assert init_schema(chdb_client, s, target=1).after == 1
    cols = {r[0] for r in chdb_client.query(f"DESCRIBE TABLE `{rag_database}`.scores").result_rows}
    assert "question" not in cols and "scores_1m" not in _tables(chdb_client, rag_database)
    # A version-1 row, inserted the way a version-1 writer would (its own column list).
    chdb_client.command(
        f"INSERT INTO `{rag_database}`.scores (trace_id, ts, scored_at, service, metric, value, "
        "status, sampling_rate, version) VALUES ({t:String}, {ts:DateTime64(3)}, {ts:DateTime64(3)}, "
        "'svc', 'faithfulness', 0.25, 'ok', 0.5, 1)",
        parameters={"t": "a" * 32, "ts": T0})
    report = init_schema(chdb_client, s)
    assert (report.before, report.after) == (1, latest_version())
    assert [v for v, _ in report.applied] == [m.version for m in MIGRATIONS if m.version > 1]
    got = chdb_client.query(
        f"SELECT trace_id, value, weight, question, explanation FROM `{rag_database}`.scores").result_rows
    assert got == [("a" * 32, 0.25, 2.0, "", "")]
    # The migrated table has exactly the current definition's columns, in order.
    described = [r[0] for r in chdb_client.query(f"DESCRIBE TABLE `{rag_database}`.scores").result_rows]
    assert described == [c.name for c in SCORES.columns]
    # And the current writer works on it.
    write_rows(chdb_client, rag_database, rows(1))
    assert chdb_client.command(f"SELECT count() FROM `{rag_database}`.scores") == 3


def test_edited_released_migration_is_refused(chdb_client: Any, rag_database: str) -> None:
    s = SchemaSettings(database=rag_database)
    init_schema(chdb_client, s, target=2)
    chdb_client.command(
        f"INSERT INTO `{rag_database}`.schema_migrations VALUES (2, 'x', 'deadbeef', now64(3) + 1)")
    with pytest.raises(SchemaError, match="checksum"):
        init_schema(chdb_client, s)


def test_database_from_a_newer_ragpulse_is_refused(chdb_client: Any, rag_database: str) -> None:
    s = SchemaSettings(database=rag_database)
    init_schema(chdb_client, s)
    chdb_client.command(
        f"INSERT INTO `{rag_database}`.schema_migrations VALUES (999, 'future', 'x', now64(3))")
    with pytest.raises(SchemaError, match="upgrade ragpulse"):
        init_schema(chdb_client, s)
    assert 999 in applied_versions(chdb_client, rag_database)


def test_failed_statement_names_the_migration(chdb_client: Any) -> None:
    class Failing:
        def query(self, *a: Any, **k: Any) -> Any:
            return chdb_client.query(*a, **k)

        def command(self, cmd: str, *a: Any, **k: Any) -> Any:
            if "scores_1m" in cmd:
                raise RuntimeError("Code: 241. DB::Exception: Memory limit exceeded")
            return chdb_client.command(cmd, *a, **k)

    db = "rag_fail_" + SchemaSettings().database
    try:
        with pytest.raises(SchemaError, match=r"migration 2 .* failed at statement 1"):
            init_schema(Failing(), SchemaSettings(database=db))
        # Resuming with a healthy client completes it.
        assert init_schema(chdb_client, SchemaSettings(database=db)).before == 1
    finally:
        chdb_client.command(f"DROP DATABASE IF EXISTS `{db}` SYNC")


def test_ttl_and_keys_are_in_the_created_tables(chdb_client: Any, rag_database: str) -> None:
    init_schema(chdb_client, SchemaSettings(database=rag_database, ttl_days=7, rollup_ttl_days=30,
                                            health_ttl_days=3))
    ddl = dict(chdb_client.query(
        "SELECT name, create_table_query FROM system.tables WHERE database = {d:String}",
        parameters={"d": rag_database}).result_rows)
    assert "TTL toDateTime(ts) + toIntervalDay(7)" in ddl["scores"]
    assert "ReplacingMergeTree(version)" in ddl["scores"]
    assert "ORDER BY (service, metric, toDate(ts), trace_id)" in ddl["scores"]
    assert "PARTITION BY toYYYYMMDD(ts)" in ddl["scores"]
    assert "toIntervalDay(30)" in ddl["scores_1m"] and "AggregatingMergeTree" in ddl["scores_1m"]
    assert "toIntervalDay(3)" in ddl["pipeline_health"]


def test_expired_rows_are_deleted_by_ttl(chdb_client: Any, rag_database: str) -> None:
    init_schema(chdb_client, SchemaSettings(database=rag_database, ttl_days=1))
    old = rows(1, ts=T0 - timedelta(days=400))
    fresh = rows(1, start=1, ts=datetime.now(UTC), scored_at=datetime.now(UTC))
    write_rows(chdb_client, rag_database, old + fresh)
    chdb_client.command(f"OPTIMIZE TABLE `{rag_database}`.scores FINAL")
    left = chdb_client.query(f"SELECT DISTINCT trace_id FROM `{rag_database}`.scores").result_rows
    assert left == [(trace_id(1),)]


def test_replay_with_newer_version_overwrites(rag_schema: SchemaSettings, chdb_client: Any) -> None:
    db = rag_schema.database
    first = rows_from_scores(scores(0.2), meta(7), scored_at=T0 + timedelta(minutes=1))
    replay = rows_from_scores(scores(0.9), meta(7), scored_at=T0 + timedelta(minutes=2))
    write_rows(chdb_client, db, first)
    write_rows(chdb_client, db, replay)
    q = f"SELECT metric, value, version FROM `{db}`.%s WHERE trace_id = {{t:String}} ORDER BY metric"
    final = chdb_client.query(q % "scores FINAL", parameters={"t": first[0].trace_id}).result_rows
    assert [(m, v) for m, v, _ in final] == [("answer_relevancy", None), ("faithfulness", 0.9)]
    assert final[1][2] == replay[0].version > first[0].version
    assert chdb_client.query(q % "scores_dedup", parameters={"t": first[0].trace_id}).result_rows == final
    # Before a merge the raw table holds both versions: that is why reads use FINAL.
    raw = chdb_client.command(f"SELECT count() FROM `{db}`.scores")
    assert raw in (2, 4)
    chdb_client.command(f"OPTIMIZE TABLE `{db}`.scores FINAL")
    assert chdb_client.command(f"SELECT count() FROM `{db}`.scores") == 2


def test_rollup_counts_per_minute(rag_schema: SchemaSettings, chdb_client: Any) -> None:
    db = rag_schema.database
    rs = rows(3, rate=0.5)                                        # minute 12:00, 3 ok + 3 null
    rs += rows(2, start=10, ts=T0 + timedelta(minutes=1, seconds=30))  # minute 12:01
    rs += rows_from_scores(scores(None), meta(20, ts=T0 + timedelta(seconds=59)),
                           scored_at=T0 + timedelta(minutes=5))       # 12:00, 2 null
    write_rows(chdb_client, db, rs)
    got = chdb_client.query(f"""
        SELECT minute, sum(rows), sum(n_ok), sum(n_null), sum(n_error), countMerge(value_count),
               avgMerge(value_avg), sum(weight_sum), sum(weighted_value_sum) / sum(weight_sum),
               quantilesTDigestMerge(0.5, 0.9, 0.99)(value_quantiles), sum(prompt_tokens)
        FROM `{db}`.scores_1m WHERE service = 'svc' GROUP BY minute ORDER BY minute""").result_rows
    m0, m1 = got
    assert m0[0].minute == 0 and m1[0].minute == 1
    assert m0[1:6] == (8, 3, 5, 0, 3)
    assert m0[6] == pytest.approx(0.75) and m0[7] == pytest.approx(6.0) and m0[8] == pytest.approx(0.75)
    assert m0[9] == pytest.approx([0.75, 0.75, 0.75])
    assert m0[10] == pytest.approx(300.0)
    assert m1[1:6] == (4, 2, 2, 0, 2) and m1[7] == pytest.approx(2.0)
    # The rollup and the raw table agree on this replay-free data.
    raw = chdb_client.query(f"SELECT count(), countIf(value IS NOT NULL) FROM `{db}`.scores").result_rows
    assert raw == [(12, 5)]


def test_rollup_counts_a_rescored_replay_twice_the_exact_view_once(
        rag_schema: SchemaSettings, chdb_client: Any) -> None:
    """The documented caveat, pinned: scores_1m sees a re-scored replay twice (the view runs at
    insert, the replace happens at merge); scores_1m_exact reads scores FINAL and does not."""
    db = rag_schema.database
    write_rows(chdb_client, db, rows(4, scored_at=T0 + timedelta(minutes=1)))
    replay = [rows_from_scores(scores(0.25), meta(i), scored_at=T0 + timedelta(minutes=2))
              for i in range(2)]
    write_rows(chdb_client, db, [r for rs in replay for r in rs])
    rolled = chdb_client.query(
        f"SELECT sum(rows), avgMerge(value_avg) FROM `{db}`.scores_1m WHERE metric = 'faithfulness'"
    ).result_rows[0]
    assert rolled[0] == 6 and rolled[1] == pytest.approx((4 * 0.75 + 2 * 0.25) / 6)
    exact = chdb_client.query(
        f"SELECT sum(rows), sum(value_count), avg(value_avg), any(value_quantiles) "
        f"FROM `{db}`.scores_1m_exact(from={{f:DateTime64(3)}}, to={{t:DateTime64(3)}}) "
        "WHERE metric = 'faithfulness'",
        parameters={"f": T0 - timedelta(hours=1), "t": T0 + timedelta(hours=1)}).result_rows[0]
    assert exact[:2] == (4, 4) and exact[2] == pytest.approx((2 * 0.75 + 2 * 0.25) / 4)
    # The window bounds apply.
    empty = chdb_client.query(
        f"SELECT count() FROM `{db}`.scores_1m_exact(from={{f:DateTime64(3)}}, to={{t:DateTime64(3)}})",
        parameters={"f": T0 + timedelta(hours=1), "t": T0 + timedelta(hours=2)}).result_rows
    assert empty == [(0,)]


def test_rendered_ddl_is_plain_text_derivable() -> None:
    # The cluster variant derives from the same data: swap the engine, keep everything else.
    from dataclasses import replace

    s = SchemaSettings(database="rag")
    replicated = replace(TABLES["scores"], engine="ReplicatedReplacingMergeTree("
                         "'/clickhouse/tables/{{shard}}/rag/scores', '{{replica}}', version)")
    sql = create_table_sql(replicated, s)
    assert "ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/rag/scores'" in sql
    plain = create_table_sql(TABLES["scores"], s)
    assert plain.split("ENGINE")[0] == sql.split("ENGINE")[0]  # columns/indexes identical
    assert plain.split("PARTITION BY")[1] == sql.split("PARTITION BY")[1]


def test_bad_database_name_is_rejected() -> None:
    for bad in ("", "a-b", "x; DROP TABLE y", "1abc", "a" * 64):
        with pytest.raises(ValueError):
            SchemaSettings(database=bad)
