"""The scorer service end to end on a real tansu broker and real chDB, with a table judge."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ragpulse.scorer.evaluator import Evaluator
from ragpulse.scorer.pipeline import ScorerError, build_scorer
from ragpulse.scorer.store import RetrySettings, ScoreWriter, WriterSettings
from testkit.traffic import RagTrace, encode, make_traces, otelcol_records, rotel_records

from ..doubles import TableJudge
from .conftest import METRICS, GatedJudge, committed, end_offsets, produce, table_judge, wait_for


def rows(client: Any, db: str) -> list[tuple]:
    return client.query(
        f"SELECT trace_id, metric, value, status, reason, service, sampling_rate "
        f"FROM `{db}`.scores FINAL ORDER BY trace_id, metric"
    ).result_rows


def test_otelcol_keyed_records_become_score_rows_and_offsets_are_committed(
    kafka_broker_module, topic, make_settings, writer, chdb_client, rag_schema
):
    traces = make_traces(20, unscorable_every=5)
    produce(kafka_broker_module.bootstrap, topic, otelcol_records(traces))
    settings = make_settings(pipeline_health_interval_s=0.2)
    svc = build_scorer(settings, judge=table_judge(), writer=writer, client=chdb_client).start()
    try:
        wait_for(lambda: svc.stats()["traces_done"] >= 20, what="20 traces written")
        ends = end_offsets(kafka_broker_module.bootstrap, topic)
        wait_for(
            lambda: committed(kafka_broker_module.bootstrap, settings.consumer.group_id) == ends,
            what="offsets committed to the end",
        )
    finally:
        svc.shutdown()
    got = rows(chdb_client, rag_schema.database)
    assert len(got) == 20 * len(METRICS)
    assert {r[0] for r in got} == {t.trace_id for t in traces}
    by_key = {(r[0], r[1]): r for r in got}
    ok = traces[0].trace_id
    assert by_key[(ok, "faithfulness")][2] == pytest.approx(0.5)  # 1 of 2 statements supported
    assert by_key[(ok, "context_precision")][2] == pytest.approx(1.0)
    assert by_key[(ok, "faithfulness")][5] == traces[0].service
    unscorable = traces[4].trace_id
    for m in METRICS:
        _, _, value, status, reason, _, rate = by_key[(unscorable, m)]
        assert value is None and status == "null" and reason == "no_contexts" and rate == 1.0
    st = svc.stats()
    assert st["traces_unscorable"] == 4 and st["traces_scored"] == 16
    assert st["records_consumed"] == 20 and st["traces_assembled"] == 20
    # Self-telemetry reached pipeline_health (flushed at shutdown at the latest): per-minute
    # counter increases sum to the totals, unscorable traces are labelled by reason.
    health = dict(
        ((n, lb), v)
        for n, lb, v in chdb_client.query(
            f"SELECT name, label, sum(value) FROM `{rag_schema.database}`.pipeline_health FINAL "
            "WHERE component = 'scorer' AND kind = 'counter' AND instance = {i:String} "
            "GROUP BY name, label",
            parameters={"i": settings.instance},
        ).result_rows
    )
    assert health[("records_consumed", "")] == 20 and health[("traces_assembled", "")] == 20
    assert health[("traces_unscorable", "no_contexts")] == 4 and health[("rows_written", "")] == 60


def test_rotel_unkeyed_records_with_many_traces_and_a_trace_split_over_records(
    kafka_broker_module, topic, make_settings, writer, chdb_client, rag_schema
):
    traces = make_traces(30, seed=7)
    records = rotel_records(traces[:29], per_record=10)
    # The last trace's children come in one record and its root in another, on another partition.
    split = traces[29]
    spans = split.spans()
    records.append((None, encode([(split.service, [s for s in spans if s.parent_span_id])])))
    records.append((None, encode([(split.service, [s for s in spans if not s.parent_span_id])])))
    for i, rec in enumerate(records):
        produce(kafka_broker_module.bootstrap, topic, [rec], partition=i % 3)
    settings = make_settings()
    svc = build_scorer(settings, judge=table_judge(), writer=writer).start()
    try:
        wait_for(lambda: svc.stats()["traces_done"] >= 30, what="30 traces written")
        wait_for(
            lambda: (
                sum(committed(kafka_broker_module.bootstrap, settings.consumer.group_id).values())
                == len(records)
            ),
            what="all records committed",
        )
    finally:
        svc.shutdown()
    got = rows(chdb_client, rag_schema.database)
    assert {r[0] for r in got} == {t.trace_id for t in traces}
    assert len(got) == 30 * len(METRICS)
    st = svc.stats()
    assert (
        st["traces_assembled"] == 30 and st["traces_timed_out"] == 0 and st["spans_consumed"] == 90
    )


def test_undecodable_records_go_to_the_dead_letter_topic_with_reason_headers(
    kafka_broker_module, topic, make_settings, writer, chdb_client, rag_schema
):
    from kafka import KafkaConsumer

    garbage = b"\xff\xfe definitely not protobuf \x00\x01"
    produce(kafka_broker_module.bootstrap, topic, [(b"k1", garbage)], partition=1)
    produce(
        kafka_broker_module.bootstrap, topic, otelcol_records(make_traces(2, seed=3)), partition=1
    )
    settings = make_settings()
    svc = build_scorer(settings, judge=table_judge(), writer=writer).start()
    try:
        wait_for(
            lambda: svc.stats()["records_dead_lettered"] == 1 and svc.stats()["traces_done"] >= 2,
            what="dead letter + 2 traces",
        )
        wait_for(
            lambda: (
                committed(kafka_broker_module.bootstrap, settings.consumer.group_id).get(1) == 3
            ),
            what="partition 1 committed past the dead letter",
        )
    finally:
        svc.shutdown()
    c = KafkaConsumer(
        settings.kafka.dlq_topic,
        bootstrap_servers=kafka_broker_module.bootstrap,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        group_id=None,
    )
    dead: list = []
    try:
        wait_for(
            lambda: (
                bool(dead.extend(r for rs in c.poll(timeout_ms=200).values() for r in rs))
                or len(dead) >= 1
            ),
            what="the dead letter",
        )
        dead.extend(r for rs in c.poll(timeout_ms=500).values() for r in rs)  # and nothing more
    finally:
        c.close()
    assert len(dead) == 1
    rec = dead[0]
    headers = {k: v.decode() for k, v in rec.headers}
    assert rec.value == garbage and rec.key == b"k1"
    assert headers["ragpulse.dlq.reason"] == "malformed_protobuf"
    assert headers["ragpulse.dlq.topic"] == topic
    assert headers["ragpulse.dlq.partition"] == "1" and headers["ragpulse.dlq.offset"] == "0"
    assert headers["ragpulse.dlq.group"] == settings.consumer.group_id
    assert len(rows(chdb_client, rag_schema.database)) == 2 * len(METRICS)


class FlakyClient:
    """A real clickhouse-connect client whose inserts fail while ``failing`` is set."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.failing = True
        self.refused = 0

    def insert(self, *args: Any, **kw: Any) -> Any:
        if self.failing:
            self.refused += 1
            # Code 210 NETWORK_ERROR: classified retryable by the store.
            raise ConnectionError("Code: 210. DB::NetException: connection refused (injected)")
        return self._client.insert(*args, **kw)


def test_offsets_are_not_committed_until_clickhouse_acknowledges_the_rows(
    kafka_broker_module, topic, make_settings, chdb_client, rag_schema
):
    flaky = FlakyClient(chdb_client)
    w = ScoreWriter(
        flaky,
        rag_schema.database,
        WriterSettings(
            flush_interval_s=0.05,
            retry=RetrySettings(initial_backoff_s=0.01, max_backoff_s=0.05, deadline_s=0.2),
        ),
    )
    w.start()
    traces = make_traces(6, seed=11)
    produce(kafka_broker_module.bootstrap, topic, otelcol_records(traces))
    settings = make_settings(writer={"retry": {"initial_backoff_s": 0.05, "max_backoff_s": 0.2}})
    group = settings.consumer.group_id
    svc = build_scorer(settings, judge=table_judge(), writer=w).start()
    try:
        wait_for(
            lambda: svc.stats()["traces_scored"] == 6 and svc.stats()["write_errors"] >= 2,
            what="scored traces whose writes fail",
        )
        # Several commit intervals have passed while every write failed: nothing is committed.
        assert committed(kafka_broker_module.bootstrap, group) == {}
        assert svc.stats()["traces_done"] == 0 and svc.stats()["traces_in_flight"] == 6
        assert (
            chdb_client.query(f"SELECT count() FROM `{rag_schema.database}`.scores").result_rows[0][
                0
            ]
            == 0
        )
        flaky.failing = False
        wait_for(lambda: svc.stats()["traces_done"] == 6, what="writes recovered")
        ends = end_offsets(kafka_broker_module.bootstrap, topic)
        wait_for(
            lambda: committed(kafka_broker_module.bootstrap, group) == ends, what="commit after ack"
        )
    finally:
        svc.shutdown()
        w.shutdown(5)
    assert len(rows(chdb_client, rag_schema.database)) == 6 * len(METRICS)
    assert flaky.refused >= 2


def test_backpressure_pauses_partitions_while_in_flight_is_full(
    kafka_broker_module, topic, make_settings, writer, chdb_client, rag_schema
):
    judge = GatedJudge()
    produce(kafka_broker_module.bootstrap, topic, otelcol_records(make_traces(8, seed=5)))
    settings = make_settings(
        evaluate={"metrics": list(METRICS), "max_in_flight": 4, "max_concurrency": 2}
    )
    evaluator = Evaluator(judge, list(METRICS))
    svc = build_scorer(settings, evaluator=evaluator, writer=writer).start()
    try:
        wait_for(
            lambda: svc.stats()["paused"] == 1 and svc.stats()["traces_in_flight"] == 4,
            what="paused at 4 in flight",
        )
        # max_concurrency: two judge calls at a time, the other two traces wait for a slot.
        wait_for(lambda: judge.waiting == 2, what="two judge calls")
        st = svc.stats()
        assert st["traces_in_flight"] == 4 and st["partitions_paused"] >= 1
        # Nothing was written while the judge was stuck, so nothing may be committed.
        assert committed(kafka_broker_module.bootstrap, settings.consumer.group_id) == {}
        assert judge.waiting == 2
        judge.open()
        wait_for(lambda: svc.stats()["traces_done"] == 8, what="all traces after the gate opened")
        wait_for(lambda: svc.stats()["paused"] == 0, what="resumed")
    finally:
        svc.shutdown()
    assert len(rows(chdb_client, rag_schema.database)) == 8 * len(METRICS)


def test_shutdown_drains_buffered_traces_and_commits(
    kafka_broker_module, topic, make_settings, writer, chdb_client, rag_schema
):
    # A root-less trace would wait max_wait_s (60 s here); shutdown scores it at once.
    t = make_traces(1, seed=9)[0]
    rootless = RagTrace(
        t.trace_id, t.service, t.question, t.contexts, t.answer, t.start_ns, with_root=False
    )
    produce(kafka_broker_module.bootstrap, topic, otelcol_records([rootless]))
    settings = make_settings(assembly={"grace_s": 0.3, "max_wait_s": 60.0})
    svc = build_scorer(settings, judge=table_judge(), writer=writer).start()
    wait_for(lambda: svc.stats()["traces_buffered"] == 1, what="buffered")
    svc.shutdown()
    st = svc.stats()
    assert st["traces_drained"] == 1 and st["traces_done"] == 1
    assert sum(committed(kafka_broker_module.bootstrap, settings.consumer.group_id).values()) == 1
    assert {r[0] for r in rows(chdb_client, rag_schema.database)} == {t.trace_id}


class ClosingGatedJudge(GatedJudge):
    """As the local and LLM judges do: a call still waiting when the judge is closed fails."""

    def __init__(self) -> None:
        super().__init__()
        self.closed = False

    async def gather(self, sample, needs):
        self.waiting += 1
        while not self._gate.is_set():
            if self.closed:
                raise RuntimeError("gather after aclose")
            await asyncio.sleep(0.01)
        return await TableJudge.gather(self, sample, needs)

    async def aclose(self) -> None:
        self.closed = True
        await asyncio.sleep(0.3)  # closing its clients and threads takes a while; the loop runs on


def test_an_abandoned_drain_cancels_running_evaluations_instead_of_failing_them(
    kafka_broker_module, topic, make_settings, writer, chdb_client, rag_schema, monkeypatch
):
    # A second Ctrl-C during `up`'s drain: the judge is closed with evaluations still waiting on
    # it. They must not become error rows or evaluate_errors (the traces did not fail: they stay
    # uncommitted in Kafka and are scored after a restart).
    traces = make_traces(6, seed=11)
    produce(kafka_broker_module.bootstrap, topic, otelcol_records(traces))
    settings = make_settings(evaluate={"metrics": list(METRICS), "max_in_flight": 6,
                                       "max_concurrency": 6})
    judge = ClosingGatedJudge()
    import ragpulse.scorer.judges.factory as judges_factory

    # the scorer builds (and so owns and closes) its judge, as under `ragpulse up`
    monkeypatch.setattr(judges_factory, "build_judge", lambda *a, **k: judge)
    svc = build_scorer(settings, writer=writer).start()
    wait_for(lambda: judge.waiting == 6, what="six judge calls waiting")
    svc.abandon_drain()
    svc.shutdown(1.0)
    assert judge.closed
    st = svc.stats()
    assert st["evaluate_errors"] == 0 and st["traces_scored"] == 0
    assert committed(kafka_broker_module.bootstrap, settings.consumer.group_id) == {}
    assert rows(chdb_client, rag_schema.database) == []
    # the restart scores every one of them
    again = build_scorer(settings, judge=table_judge(), writer=writer).start()
    try:
        wait_for(lambda: again.stats()["traces_done"] == 6, what="all six after the restart")
    finally:
        again.shutdown()
    assert {r[0] for r in rows(chdb_client, rag_schema.database)} == {t.trace_id for t in traces}
    assert all(r[3] == "ok" for r in rows(chdb_client, rag_schema.database))


def test_start_then_shutdown_twice_and_shutdown_without_start(make_settings, writer):
    settings = make_settings()
    svc = build_scorer(settings, judge=table_judge(), writer=writer)
    svc.shutdown()
    svc.shutdown()
    with pytest.raises(ScorerError):
        svc.start()
    svc = build_scorer(settings, judge=table_judge(), writer=writer).start()
    with pytest.raises(ScorerError):
        svc.start()
    svc.shutdown()
    svc.shutdown()
    assert svc.wait(0) and svc.error is None


def test_a_rebalance_with_work_in_flight_loses_nothing_and_double_counts_nothing(
    kafka_broker_module, topic, make_settings, writer, chdb_client, rag_schema
):
    bootstrap = kafka_broker_module.bootstrap
    traces = make_traces(30, seed=13)
    produce(bootstrap, topic, otelcol_records(traces))
    settings = make_settings()
    gated = GatedJudge()
    a = build_scorer(settings, evaluator=Evaluator(gated, list(METRICS)), writer=writer).start()
    b = None
    try:
        wait_for(
            lambda: a.stats()["traces_in_flight"] == 30, what="A holding every trace in flight"
        )
        # B joins: A's partitions are revoked while its judge is stuck; A waits a bounded time,
        # forgets what it could not finish, and the partitions' new owners read them again.
        b = build_scorer(settings, judge=table_judge(), writer=writer).start()
        wait_for(
            lambda: (
                a.stats()["partitions_assigned"] + b.stats()["partitions_assigned"] == 3
                and b.stats()["partitions_assigned"] > 0
                and b.stats()["traces_done"] > 0
            ),
            what="B owning partitions and scoring",
        )
        gated.open()
        ends = end_offsets(bootstrap, topic)
        wait_for(
            lambda: committed(bootstrap, settings.consumer.group_id) == ends,
            what="every record committed",
        )
        wait_for(
            lambda: a.stats()["traces_in_flight"] == 0 and b.stats()["traces_in_flight"] == 0,
            what="nothing in flight",
        )
    finally:
        a.shutdown()
        if b is not None:
            b.shutdown()
    got = rows(chdb_client, rag_schema.database)
    assert len(got) == 30 * len(METRICS)
    assert len({(r[0], r[1]) for r in got}) == len(got)
    assert {r[0] for r in got} == {t.trace_id for t in traces}
    # Some traces were scored twice (by A after the revoke and by B): FINAL kept one row each.
    raw = chdb_client.query(f"SELECT count() FROM `{rag_schema.database}`.scores").result_rows[0][0]
    assert raw >= len(got)


def test_evictions_and_late_spans_are_counted_and_their_records_committed(
    kafka_broker_module, topic, make_settings, writer, chdb_client, rag_schema
):
    bootstrap = kafka_broker_module.bootstrap
    traces = make_traces(6, seed=17)
    rootless = [
        RagTrace(
            t.trace_id, t.service, t.question, t.contexts, t.answer, t.start_ns, with_root=False
        )
        for t in traces[:5]
    ]
    produce(bootstrap, topic, otelcol_records(rootless), partition=0)
    settings = make_settings(
        assembly={"grace_s": 0.3, "max_wait_s": 60.0, "max_traces": 2, "on_evict": "drop"}
    )
    svc = build_scorer(settings, judge=table_judge(), writer=writer).start()
    try:
        wait_for(lambda: svc.stats()["traces_evicted"] == 3, what="3 evictions")
        assert svc.stats()["traces_dropped"] == 3 and svc.stats()["traces_buffered"] == 2
        # A complete trace (it evicts one more root-less trace), then a straggler of it after it
        # was scored: late, counted, ignored.
        full = traces[5]
        produce(bootstrap, topic, otelcol_records([full]), partition=1)
        wait_for(
            lambda: svc.stats()["traces_done"] == 5 and svc.stats()["traces_scored"] == 1,
            what="the complete trace written",
        )
        assert svc.stats()["traces_evicted"] == 4
        late = [s for s in full.spans() if s.parent_span_id][:1]
        produce(
            bootstrap,
            topic,
            [(full.trace_id.encode(), encode([(full.service, late)]))],
            partition=1,
        )
        wait_for(lambda: svc.stats()["spans_late"] == 1, what="the late span")
        wait_for(
            lambda: committed(bootstrap, settings.consumer.group_id).get(1) == 2,
            what="the late span's record committed",
        )
        # The evicted records are committed; the still-buffered one holds partition 0 back.
        assert committed(bootstrap, settings.consumer.group_id).get(0) == 4
    finally:
        svc.shutdown()
    got = rows(chdb_client, rag_schema.database)
    # The complete trace once, plus the buffered root-less trace scored by the drain.
    assert {r[0] for r in got} == {full.trace_id, traces[4].trace_id}
    assert len(got) == 2 * len(METRICS)


def test_rows_the_ttl_deletes_on_insert_are_counted_in_pipeline_health_not_written(
    kafka_broker_module, topic, make_settings, chdb_client, rag_schema
):
    # Issue 17: a trace ending in 2554 (2**64 - 1 ns, sent straight to Kafka, past any
    # receiver) was counted as scored and written while the scores TTL deleted its rows.
    import dataclasses

    traces = make_traces(4, seed=23)
    far = [dataclasses.replace(t, start_ns=2**64 - 10**10) for t in traces[:2]]
    produce(kafka_broker_module.bootstrap, topic, otelcol_records([*far, *traces[2:]]))
    settings = make_settings(pipeline_health_interval_s=0.2)
    # The scorer's own writer: it reads the table's TTL as build_scorer does in production.
    svc = build_scorer(settings, judge=table_judge(), client=chdb_client).start()
    try:
        wait_for(lambda: svc.stats()["traces_done"] >= 4, what="4 traces done")
    finally:
        svc.shutdown()
    got = rows(chdb_client, rag_schema.database)
    assert {r[0] for r in got} == {t.trace_id for t in traces[2:]}
    st = svc.stats()
    n = len(METRICS)
    assert (st["rows_written"], st["rows_expired"]) == (2 * n, 2 * n)
    assert (st["writer_rows_written"], st["writer_rows_expired"]) == (2 * n, 2 * n)
    health = dict(
        chdb_client.query(
            f"SELECT name, sum(value) FROM `{rag_schema.database}`.pipeline_health FINAL "
            "WHERE component = 'scorer' AND kind = 'counter' AND instance = {i:String} "
            "AND name IN ('rows_written', 'rows_expired') GROUP BY name",
            parameters={"i": settings.instance},
        ).result_rows
    )
    assert health == {"rows_written": 2 * n, "rows_expired": 2 * n}


def test_a_rootless_flood_is_counted_not_written_and_a_complete_trace_is_scored(
    kafka_broker_module, topic, make_settings, writer, chdb_client, rag_schema
):
    # Issue 17 on the real pipeline: 3,000 traces of one service whose root never arrives and
    # that have nothing to score (no contexts), then a complete trace of the same service.
    flood = [
        RagTrace(t.trace_id, "flood", t.question, (), t.answer, t.start_ns, with_root=False)
        for t in make_traces(3_000, seed=29)
    ]
    (normal,) = [
        RagTrace(t.trace_id, "flood", t.question, t.contexts, t.answer, t.start_ns)
        for t in make_traces(1, seed=31)
    ]
    produce(kafka_broker_module.bootstrap, topic, [*rotel_records(flood, per_record=100),
                                                   *otelcol_records([normal])])
    settings = make_settings(assembly={"max_incomplete_per_service": 100},
                             pipeline_health_interval_s=0.2)
    svc = build_scorer(settings, judge=table_judge(), writer=writer).start()
    try:
        wait_for(lambda: svc.stats()["traces_scored"] == 1, what="the complete trace scored")
        wait_for(lambda: svc.stats()["traces_expired_incomplete"] >= 2_900,
                 what="the flood evicted")
        st = svc.stats()
    finally:
        svc.shutdown()
    got = {r[0] for r in rows(chdb_client, rag_schema.database)}
    # No null row for an evicted flood trace: rows only for the complete trace and for what the
    # drain hands on at shutdown (at most the 100 flood traces still buffered).
    assert normal.trace_id in got and len(got - {normal.trace_id}) <= 100
    assert st["traces_evicted"] == st["traces_expired_incomplete"] >= 2_900
    assert st["traces_unscorable"] == 0 and st["traces_buffered"] <= 100
