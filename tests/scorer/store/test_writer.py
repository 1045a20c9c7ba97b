"""ScoreWriter against real chDB: batching, acknowledgement, retries, backpressure, lifecycle."""

from __future__ import annotations

import concurrent.futures
from datetime import UTC
from typing import Any

import pytest
from clickhouse_connect.driver.exceptions import DatabaseError, OperationalError
from pydantic import ValidationError

from ragpulse.scorer.store import (
    PermanentStoreError,
    RetryableStoreError,
    RetrySettings,
    ScoreWriter,
    WriterClosed,
    WriterFull,
    WriterSettings,
    build_pipeline_health_writer,
    is_retryable,
)
from ragpulse.scorer.store.rows import PipelineHealthRow

from .helpers import T0, FlakyClient, GatedClient, rows

FAST = dict(initial_backoff_s=0.01, max_backoff_s=0.05)


def _count(client: Any, db: str, final: bool = True) -> int:
    return int(client.command(f"SELECT count() FROM `{db}`.scores{' FINAL' if final else ''}"))


def test_batches_by_rows(rag_schema: Any, chdb_client: Any) -> None:
    db = rag_schema.database
    spy = FlakyClient(chdb_client, 0, RuntimeError())
    # A long interval: only the row threshold can trigger inserts before shutdown.
    w = ScoreWriter(spy, db, WriterSettings(batch_rows=4, flush_interval_s=300))
    w.start()
    futs = [w.submit(rows(1, start=i)) for i in range(6)]  # 6 submissions x 2 rows
    acks = [f.result(30) for f in futs]
    w.shutdown()
    assert [a.rows for a in acks] == [2] * 6
    assert spy.batch_sizes == [4, 4, 4]
    assert _count(chdb_client, db) == 12
    st = w.stats()
    assert (st["rows_submitted"], st["rows_written"], st["batches_written"], st["pending_rows"]) \
        == (12, 12, 3, 0)


def test_batches_by_interval(rag_schema: Any, chdb_client: Any) -> None:
    w = ScoreWriter(chdb_client, rag_schema.database,
                    WriterSettings(batch_rows=10_000, flush_interval_s=0.05))
    w.start()
    try:
        # Far below batch_rows: only the interval can flush it.
        assert w.submit(rows(1)).result(30).rows == 2
    finally:
        w.shutdown()
    assert _count(chdb_client, rag_schema.database) == 2


def test_ack_only_after_clickhouse_acknowledged(rag_schema: Any, chdb_client: Any) -> None:
    db = rag_schema.database
    gated = GatedClient(chdb_client)
    w = ScoreWriter(gated, db, WriterSettings(flush_interval_s=0.01))
    w.start()
    try:
        fut = w.submit(rows(3))
        assert gated.entered.wait(30)
        # The insert is in progress but not acknowledged: the caller must not commit yet.
        assert not fut.done() and _count(chdb_client, db) == 0
        assert w.stats()["pending_rows"] == 6
        gated.gate.set()
        assert fut.result(30).rows == 6
        assert _count(chdb_client, db) == 6  # visible the moment the ack arrived
    finally:
        gated.gate.set()
        w.shutdown()


def test_retries_retryable_errors_then_acks(rag_schema: Any, chdb_client: Any) -> None:
    db = rag_schema.database
    flaky = FlakyClient(chdb_client, 2, OperationalError("connection reset by peer"))
    w = ScoreWriter(flaky, db, WriterSettings(flush_interval_s=0.01, retry=RetrySettings(**FAST)))
    w.start()
    try:
        ack = w.write(rows(2), timeout_s=30)
    finally:
        w.shutdown()
    assert ack.rows == 4 and ack.attempts == 3
    st = w.stats()
    assert (st["insert_retries"], st["insert_errors"], st["rows_written"]) == (2, 2, 4)
    assert _count(chdb_client, db, final=False) == 4


def test_retried_identical_insert_is_deduplicated(rag_schema: Any, chdb_client: Any) -> None:
    """The insert succeeded but the ack was lost: the retry must not double the rollup."""
    db = rag_schema.database

    class LostAck:
        calls = 0

        def insert(self, table: str, data: Any, **kw: Any) -> Any:
            LostAck.calls += 1
            chdb_client.insert(table, data, **kw)
            if LostAck.calls == 1:
                raise OperationalError("read timed out")  # after the server wrote it

    w = ScoreWriter(LostAck(), db, WriterSettings(flush_interval_s=0.01, retry=RetrySettings(**FAST)))
    w.start()
    try:
        assert w.write(rows(3), timeout_s=30).attempts == 2
    finally:
        w.shutdown()
    assert _count(chdb_client, db, final=False) == 6
    assert chdb_client.command(f"SELECT sum(rows) FROM `{db}`.scores_1m") == 6


def test_permanent_error_surfaces_without_retry(rag_schema: Any, chdb_client: Any) -> None:
    bad = FlakyClient(chdb_client, 99, DatabaseError("Code: 53. DB::Exception: Type mismatch"))
    w = ScoreWriter(bad, rag_schema.database, WriterSettings(flush_interval_s=0.01, retry=RetrySettings(**FAST)))
    w.start()
    try:
        with pytest.raises(PermanentStoreError, match="Type mismatch"):
            w.write(rows(1), timeout_s=30)
    finally:
        w.shutdown()
    assert bad.calls == 1
    assert w.stats()["rows_failed"] == 2 and w.stats()["insert_retries"] == 0


def test_bad_submission_does_not_fail_its_batch_neighbours(rag_schema: Any, chdb_client: Any) -> None:
    db = rag_schema.database
    good = rows(2)
    r = rows(1, start=50)[0]
    # A row that cannot be serialised (negative UInt32 in the counts map): a permanent error.
    poison = r._replace(counts={"x": -5})
    gated = GatedClient(chdb_client)
    w = ScoreWriter(gated, db, WriterSettings(flush_interval_s=0.01))
    w.start()
    try:
        first = w.submit(rows(1, start=70))  # occupies the thread while the others queue up
        assert gated.entered.wait(30)
        f_good, f_bad = w.submit(good), w.submit([poison])
        gated.gate.set()
        first.result(30)
        assert f_good.result(30).rows == 4
        with pytest.raises(PermanentStoreError):
            f_bad.result(30)
    finally:
        gated.gate.set()
        w.shutdown()
    assert _count(chdb_client, db) == 6


def test_gives_up_at_the_deadline_with_a_retryable_error(rag_schema: Any, chdb_client: Any) -> None:
    down = FlakyClient(chdb_client, 10**9, OperationalError("connection refused"))
    w = ScoreWriter(down, rag_schema.database,
                    WriterSettings(flush_interval_s=0.01, retry=RetrySettings(deadline_s=0.2, **FAST)))
    w.start()
    try:
        with pytest.raises(RetryableStoreError, match="deadline"):
            w.write(rows(1), timeout_s=30)
    finally:
        w.shutdown()
    assert down.calls >= 2 and w.stats()["rows_failed"] == 2


def test_backpressure_when_pending_is_full(rag_schema: Any, chdb_client: Any) -> None:
    gated = GatedClient(chdb_client)
    w = ScoreWriter(gated, rag_schema.database,
                    WriterSettings(batch_rows=2, max_pending_rows=4, flush_interval_s=0.01))
    w.start()
    try:
        a = w.submit(rows(1))               # 2 rows, goes into the (held) insert
        assert gated.entered.wait(30)
        b = w.submit(rows(1, start=1))      # 2 more: 4 held, the limit
        with pytest.raises(WriterFull):
            w.submit(rows(1, start=2))
        assert isinstance(WriterFull("x"), RetryableStoreError)
        assert w.stats()["rows_refused"] == 2
        with pytest.raises(ValueError, match="max_pending_rows"):
            w.submit(rows(3, start=10))     # can never fit
        gated.gate.set()
        a.result(30), b.result(30)
        # Room again once acknowledged.
        assert w.submit(rows(1, start=2)).result(30).rows == 2
    finally:
        gated.gate.set()
        w.shutdown()


def test_flush_waits_for_the_batch_in_flight(rag_schema: Any, chdb_client: Any) -> None:
    gated = GatedClient(chdb_client)
    w = ScoreWriter(gated, rag_schema.database, WriterSettings(flush_interval_s=0.01))
    w.start()
    try:
        fut = w.submit(rows(1))
        assert gated.entered.wait(30)
        with pytest.raises(concurrent.futures.TimeoutError):
            w.flush(timeout_s=0.05)  # the held insert is pending: flush must not return early
        gated.gate.set()
        w.flush(timeout_s=30)
        assert fut.done() and fut.result().rows == 2
    finally:
        gated.gate.set()
        w.shutdown()


def test_lifecycle(rag_schema: Any, chdb_client: Any) -> None:
    never = ScoreWriter(chdb_client, rag_schema.database)
    never.shutdown()
    never.shutdown()  # safe without start, idempotent
    with pytest.raises(WriterClosed):
        never.submit(rows(1))
    with pytest.raises(RuntimeError):
        never.start()

    w = ScoreWriter(chdb_client, rag_schema.database, WriterSettings(flush_interval_s=300))
    with pytest.raises(WriterClosed):
        w.submit(rows(1))  # not started
    w.start()
    fut = w.submit(rows(2))
    w.shutdown()  # flushes what is pending although the interval has not passed
    assert fut.result(0).rows == 4
    w.shutdown()
    with pytest.raises(WriterClosed):
        w.submit(rows(1))
    assert _count(chdb_client, rag_schema.database) == 4


def test_shutdown_timeout_abandons_retries(rag_schema: Any, chdb_client: Any) -> None:
    down = FlakyClient(chdb_client, 10**9, OperationalError("connection refused"))
    w = ScoreWriter(down, rag_schema.database,
                    WriterSettings(flush_interval_s=0.01, retry=RetrySettings(
                        initial_backoff_s=0.05, max_backoff_s=0.1, deadline_s=3600)))
    w.start()
    fut = w.submit(rows(1))
    w.shutdown(timeout_s=0.2)
    with pytest.raises(RetryableStoreError, match="shutdown"):
        fut.result(0)


def test_concurrent_submitters(rag_schema: Any, chdb_client: Any) -> None:
    w = ScoreWriter(chdb_client, rag_schema.database, WriterSettings(batch_rows=50, flush_interval_s=0.05))
    w.start()
    try:
        with concurrent.futures.ThreadPoolExecutor(4) as ex:
            futs = list(ex.map(lambda i: w.submit(rows(5, start=i * 5)), range(20)))
        assert sum(f.result(30).rows for f in futs) == 200
    finally:
        w.shutdown()
    assert _count(chdb_client, rag_schema.database) == 200


def test_pipeline_health_writer(rag_schema: Any, chdb_client: Any) -> None:
    db = rag_schema.database
    w = build_pipeline_health_writer(chdb_client, db, WriterSettings(flush_interval_s=0.01))
    w.start()
    try:
        mk = lambda v, at: PipelineHealthRow(T0, "scorer", "h:1", "traces_assembled", "", "counter", v, at)  # noqa: E731
        w.write([mk(5.0, T0), PipelineHealthRow(T0, "scorer", "h:1", "unscorable", "no_answer", "counter", 2, T0)])
        # Re-flushing the same minute later overwrites it (ReplacingMergeTree on written_at).
        w.write([mk(9.0, T0.replace(second=30))])
    finally:
        w.shutdown()
    got = chdb_client.query(f"SELECT name, label, value FROM `{db}`.pipeline_health FINAL "
                            "ORDER BY name").result_rows
    assert got == [("traces_assembled", "", 9.0), ("unscorable", "no_answer", 2.0)]


def test_error_classification() -> None:
    assert is_retryable(OperationalError("connection refused"))
    assert is_retryable(ConnectionResetError())
    assert is_retryable(DatabaseError("Code: 252. DB::Exception: Too many parts"))
    assert is_retryable(DatabaseError("HTTP 503 ... Code: 202. DB::Exception: Too many simultaneous"))
    assert not is_retryable(DatabaseError("Code: 60. DB::Exception: Unknown table"))
    assert not is_retryable(OperationalError("Code: 516. Authentication failed"))
    assert not is_retryable(TypeError("bad value"))


def test_settings_validation() -> None:
    with pytest.raises(ValueError):
        WriterSettings(batch_rows=10, max_pending_rows=5)
    with pytest.raises(ValueError):
        WriterSettings(flush_interval_s=0)
    with pytest.raises(ValueError):
        ScoreWriter(object(), "bad-db")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        WriterSettings().batch_rows = 3  # frozen
    with pytest.raises(ValueError, match="max_backoff_s"):
        RetrySettings(initial_backoff_s=2, max_backoff_s=1)


def test_the_names_before_0_1_are_refused_not_read() -> None:
    """0.x renames say so in CHANGELOG.md; an old flat retry name is an error, never ignored."""
    with pytest.raises(ValidationError, match="retry_deadline_s"):
        WriterSettings(retry_deadline_s=9)


def test_the_retry_policy_backs_off_with_full_jitter_up_to_its_cap() -> None:
    import random

    from ragpulse.scorer.store import RetryPolicy

    policy = RetryPolicy(RetrySettings(initial_backoff_s=0.5, max_backoff_s=3), rng=random.Random(7))
    caps = [0.5, 1.0, 2.0, 3.0, 3.0, 3.0]
    waits = [[policy.backoff(n) for _ in range(200)] for n in range(1, 7)]
    for cap, w in zip(caps, waits, strict=True):
        assert 0.0 <= min(w) and max(w) <= cap
        assert max(w) > 0.8 * cap and min(w) < 0.2 * cap  # spread over the whole range


def test_the_retry_policy_stops_at_permanent_errors_the_deadline_and_shutdown() -> None:
    import threading

    from ragpulse.scorer.store import RetryPolicy
    from ragpulse.scorer.store.retry import RetryOutcome

    now = [0.0]
    waited: list[float] = []

    class Clock(threading.Event):
        def wait(self, timeout: float | None = None) -> bool:  # time passes, nobody sleeps
            waited.append(timeout or 0.0)
            now[0] += timeout or 0.0
            return self.is_set()

    policy = RetryPolicy(RetrySettings(initial_backoff_s=1, max_backoff_s=4, deadline_s=10),
                         clock=lambda: now[0])
    calls: list[int] = []

    def down() -> None:
        calls.append(1)
        raise ConnectionRefusedError("down")

    with pytest.raises(RetryOutcome) as out:
        policy.call(down, abort=Clock())
    assert out.value.why == "deadline" and out.value.retryable
    assert len(calls) == out.value.attempts == len(waited) + 1 and now[0] <= 10
    with pytest.raises(RetryOutcome) as out:
        policy.call(lambda: (_ for _ in ()).throw(TypeError("bad row")), abort=Clock())
    assert out.value.why == "permanent" and out.value.attempts == 1
    stop = Clock()
    stop.set()
    calls.clear()
    with pytest.raises(RetryOutcome) as out:
        policy.call(down, abort=stop)
    assert out.value.why == "shutdown" and calls == [1]
    assert policy.call(lambda: "ok", abort=Clock()) == ("ok", 1)


def test_pipeline_health_labelled_counters_sit_next_to_their_total() -> None:
    from datetime import timedelta

    from ragpulse.scorer.store import PipelineHealthSampler

    now = [T0.replace(second=10)]
    s = PipelineHealthSampler("scorer", "i1", gauges=("consumer_lag",), clock=lambda: now[0])

    def sample(consumed: int, lag: int, no_answer: int) -> dict[tuple[str, str], tuple]:
        rows = s.sample({"records_consumed": consumed, "consumer_lag": lag,
                         "traces_unscorable": no_answer},
                        {"traces_unscorable": {"no_answer": no_answer}})
        return {(r.name, r.label): (r.minute.minute, r.kind, r.value) for r in rows}

    first = sample(5, 7, 2)
    now[0] += timedelta(seconds=30)
    second = sample(9, 1, 3)
    now[0] += timedelta(seconds=30)  # the next minute counts from the last sample's values
    third = sample(12, 0, 3)
    assert first[("traces_unscorable", "no_answer")] == first[("traces_unscorable", "")]
    assert second[("records_consumed", "")] == (T0.minute, "counter", 9.0)
    assert second[("traces_unscorable", "no_answer")] == (T0.minute, "counter", 3.0)
    assert second[("consumer_lag", "")] == (T0.minute, "gauge", 1.0)
    assert third[("records_consumed", "")] == (T0.minute + 1, "counter", 3.0)
    assert third[("traces_unscorable", "no_answer")] == (T0.minute + 1, "counter", 0.0)




def test_pipeline_health_sampler_minutes_and_restarts(rag_schema: Any, chdb_client: Any) -> None:
    from datetime import timedelta

    from ragpulse.scorer.store import PipelineHealthSampler

    now = [T0.replace(second=10)]
    s = PipelineHealthSampler("scorer", "h:1", gauges=("consumer_lag",), clock=lambda: now[0])
    w = build_pipeline_health_writer(chdb_client, rag_schema.database, WriterSettings(flush_interval_s=0.01))
    w.start()
    try:
        w.write(s.sample({"traces_assembled": 5, "consumer_lag": 40, "unscorable": {"no_answer": 1}}))
        now[0] = T0.replace(second=50)
        w.write(s.sample({"traces_assembled": 12, "consumer_lag": 7, "unscorable": {"no_answer": 2}}))
        now[0] = T0 + timedelta(minutes=1, seconds=5)
        w.write(s.sample({"traces_assembled": 20, "consumer_lag": 3, "unscorable": {"no_answer": 2}}))
        now[0] = T0 + timedelta(minutes=2, seconds=5)
        w.write(s.sample({"traces_assembled": 4}))  # the component restarted: counts from zero
    finally:
        w.shutdown()
    got = chdb_client.query(
        f"SELECT toMinute(minute), name, label, kind, value FROM `{rag_schema.database}`.pipeline_health "
        "FINAL ORDER BY minute, name").result_rows
    assert got == [
        (0, "consumer_lag", "", "gauge", 7.0),
        (0, "traces_assembled", "", "counter", 12.0),
        (0, "unscorable", "no_answer", "counter", 2.0),
        (1, "consumer_lag", "", "gauge", 3.0),
        (1, "traces_assembled", "", "counter", 8.0),
        (1, "unscorable", "no_answer", "counter", 0.0),
        (2, "traces_assembled", "", "counter", 4.0),
    ]


def test_real_engine_error_is_permanent(chdb_client: Any) -> None:
    w = ScoreWriter(chdb_client, "rag_h6_does_not_exist", WriterSettings(flush_interval_s=0.01, retry=RetrySettings(**FAST)))
    w.start()
    try:
        with pytest.raises(PermanentStoreError, match="rag_h6_does_not_exist"):
            w.write(rows(1), timeout_s=30)
    finally:
        w.shutdown()
    assert w.stats()["insert_retries"] == 0


def test_datetime64_ticks_match_clickhouse_connect() -> None:
    """The writer sends DateTime64 columns as integer ticks; they equal what clickhouse-connect
    computes from the datetimes itself, for every precision, before and after the epoch."""
    from datetime import datetime, timedelta, timezone

    from clickhouse_connect.datatypes.registry import get_from_name

    from ragpulse.scorer.store.writer import _epoch_us_column, _ticks

    base = datetime(2026, 11, 22, 6, 30, 1, 999999, tzinfo=UTC)
    col = [base, base, base + timedelta(microseconds=1), datetime(1969, 12, 31, 23, 59, 59, 1,
           tzinfo=UTC), base.astimezone(timezone(timedelta(hours=9)))]
    us = _epoch_us_column(col)
    assert us is not None and us[0] == us[1]
    for p in (0, 3, 6, 9):
        ch = get_from_name(f"DateTime64({p})")
        assert _ticks(us, p) == [ch._datetime64_ticks(d) for d in col], p
    # Anything but aware datetimes is left to clickhouse-connect (naive ones are local time).
    assert _epoch_us_column([base, datetime(2026, 1, 1)]) is None
    assert _epoch_us_column([base, "2026-01-01 00:00:00"]) is None


def test_datetime64_round_trip_through_chdb(rag_schema: Any, chdb_client: Any) -> None:
    """Rows written with integer ticks read back with the timestamps they were built from."""
    from datetime import timedelta

    db = rag_schema.database
    ts = T0 + timedelta(milliseconds=123, microseconds=999)  # stored floored to the ms
    at = T0 + timedelta(minutes=5, milliseconds=7)
    w = ScoreWriter(chdb_client, db, WriterSettings(flush_interval_s=0.01))
    w.start()
    try:
        w.write(rows(2, start=900, ts=ts, scored_at=at), timeout_s=30)
    finally:
        w.shutdown()
    got = chdb_client.query(
        f"SELECT DISTINCT toUnixTimestamp64Milli(ts), toUnixTimestamp64Milli(scored_at), version "
        f"FROM `{db}`.scores WHERE trace_id >= '{900:032x}'"
    ).result_rows
    ms = lambda d: int(d.timestamp() * 1000)  # noqa: E731
    assert [tuple(r) for r in got] == [(ms(ts.replace(microsecond=123000)), ms(at), ms(at))]


def test_rows_the_ttl_deletes_on_insert_are_counted_not_reported_written(
        rag_schema: Any, chdb_client: Any) -> None:
    # Issue 17: spans timed at 0, 1 ns, 2**63 or 2**64 - 1 ns were scored and "written", and
    # rag.scores' TTL deleted the rows on insert. The writer's rule (ttl_drops) is checked
    # here against what chDB really keeps, including DateTime's 32-bit wrap-around.
    from datetime import datetime, timedelta

    from ragpulse.scorer.pipeline.prepare import utc_from_ns
    from ragpulse.scorer.store.writer import scores_ttl_days

    db = rag_schema.database
    now = datetime.now(UTC)
    times = {
        "epoch": utc_from_ns(0), "1ns": utc_from_ns(1), "2^63ns": utc_from_ns(2**63),
        "2^64-1ns": utc_from_ns(2**64 - 1), "91 days ago": now - timedelta(days=91),
        "1969": datetime(1969, 12, 31, tzinfo=UTC), "2105-12-31": datetime(2105, 12, 31, tzinfo=UTC),
        "now": now, "89 days ago": now - timedelta(days=89), "2200": datetime(2200, 1, 1, tzinfo=UTC),
        "1900": datetime(1900, 1, 1, tzinfo=UTC),
    }
    assert scores_ttl_days(chdb_client, db) == 90
    w = ScoreWriter(chdb_client, db, WriterSettings(batch_rows=10_000, flush_interval_s=300),
                    ttl_days=scores_ttl_days(chdb_client, db))
    w.start()
    futures = {name: w.submit(rows(1, start=i, ts=ts)) for i, (name, ts) in enumerate(times.items())}
    w.flush(30)
    w.shutdown()
    acks = {name: f.result(30) for name, f in futures.items()}
    # The TTL drops expired rows when a part is written or merged: an insert sometimes kept the
    # "91 days ago" row until the next merge (2 runs in 5), so merge before reading what stays.
    chdb_client.command(f"OPTIMIZE TABLE `{db}`.scores FINAL")
    kept = {r[0] for r in chdb_client.query(f"SELECT DISTINCT trace_id FROM `{db}`.scores").result_rows}
    from .helpers import trace_id
    stored = {name for i, name in enumerate(times) if trace_id(i) in kept}
    assert stored == {"now", "89 days ago", "2200", "1900"}  # what chDB keeps (measured)
    assert {name for name, a in acks.items() if a.expired} == set(times) - stored
    assert all(a.expired in (0, a.rows) for a in acks.values())
    st = w.stats()
    assert st["rows_expired"] == 2 * (len(times) - len(stored))  # two score rows per trace
    assert st["rows_written"] == 2 * len(stored) == _count(chdb_client, db, final=False)


def test_the_ttl_read_from_the_table_follows_db_init(chdb_client: Any, rag_database: str) -> None:
    from ragpulse.scorer.store import SchemaSettings, init_schema
    from ragpulse.scorer.store.writer import scores_ttl_days

    assert scores_ttl_days(chdb_client, rag_database) is None  # no table yet
    init_schema(chdb_client, SchemaSettings(database=rag_database, ttl_days=30))
    assert scores_ttl_days(chdb_client, rag_database) == 30
