"""Commits around rebalances (issue 3): what a member finished is committed before the partitions'
next owner reads them, and no commit ever passes a record whose traces are not acknowledged.

The first tests drive :class:`OffsetTracker` directly (deterministic: the loss and lag cases
reproduced on the bookkeeping itself). The others run the scorer service on the module's real
tansu broker and real chDB, with periodic commits pushed out of the test's time range
(``commit_interval_s=300``) so that every offset the group ends up with was committed by the
code path under test: the revoke listener, or the shutdown drain.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from kafka import KafkaConsumer
from kafka.errors import CommitFailedError

from ragpulse.scorer.evaluator import Evaluator
from ragpulse.scorer.pipeline import Scorer, build_scorer
from ragpulse.scorer.pipeline.assemble import AssembleStep
from ragpulse.scorer.pipeline.messages import DecodedRecord
from ragpulse.scorer.pipeline.offsets import OffsetTracker
from ragpulse.scorer.pipeline.prepare import build_preparer
from ragpulse.scorer.traces.sampling import Sampler
from testkit.traffic import make_traces, otelcol_records

from .conftest import METRICS, committed, end_offsets, produce, table_judge, wait_for

T = "spans"

# -- the bookkeeping ----------------------------------------------------------------------------


def _consume(tracker: OffsetTracker, offset: int, traces: int = 1, partition: int = 0) -> Any:
    """One record holding ``traces`` traces, attached and sealed as the service does it."""
    ref = tracker.track(T, partition, offset)
    if traces:
        tracker.hold(ref, traces)
    tracker.seal(ref)
    return ref


def test_a_position_reset_within_an_assignment_never_lets_a_commit_pass_a_held_record() -> None:
    # Records 0..4, one trace each; the trace of record 2 is still being evaluated.
    tracker = OffsetTracker()
    refs = [_consume(tracker, o) for o in range(5)]
    tracker.release([refs[0], refs[1], refs[3], refs[4]])
    assert tracker.committable() == {(T, 0): 2}
    # The client moves its position back to 1 on its own (an offset reset) and delivers 1..5
    # again; their spans are late for traces already emitted, so nothing holds the new refs.
    for o in range(1, 6):
        _consume(tracker, o, traces=0)
    # Record 2's trace is not acknowledged yet: committing 6 here would lose it on a crash.
    # (The bookkeeping used to restart on a smaller offset and answered {(T, 0): 6}.)
    assert tracker.committable() == {(T, 0): 2}
    assert tracker.low_watermark(T, 0) == 2
    assert tracker.pending_records() == 1
    tracker.release([refs[2]])
    assert tracker.committable() == {(T, 0): 6}
    assert tracker.pending_records() == 0


def test_a_position_reset_keeps_the_order_of_the_watermark_for_records_read_again() -> None:
    tracker = OffsetTracker()
    refs = [_consume(tracker, o) for o in range(4)]
    tracker.release(refs[:2])  # 0 and 1 done; 2 and 3 held
    again = [_consume(tracker, o) for o in (2, 3, 4)]  # re-delivered, held again
    tracker.release([refs[2], refs[3]])  # the first traces finish
    assert tracker.committable() == {(T, 0): 2}  # the re-read ones still hold 2
    tracker.release(again[:1])
    assert tracker.committable() == {(T, 0): 3}
    tracker.release(again[1:])
    assert tracker.committable() == {(T, 0): 5}


def test_a_partition_given_back_is_committable_at_its_resume_offset_before_any_record() -> None:
    # The member gave the partition up with everything before 7 done and got it back; the
    # revoke-time commit may not have landed, so 7 must be committed even if nothing follows.
    # (Without resume_at the new assignment committed nothing until a record was read past it:
    # the group's offset stayed behind finished records: the e2e test's old xfail.)
    tracker = OffsetTracker()
    tracker.assign(T, 0, resume_at=7)
    assert tracker.low_watermark(T, 0) == 7
    assert tracker.committable() == {(T, 0): 7}
    tracker.mark_committed({(T, 0): 7})
    assert tracker.committable() == {}
    ref = _consume(tracker, 7)
    assert tracker.committable() == {}  # record 7 is held
    tracker.release([ref])
    assert tracker.committable() == {(T, 0): 8}


def test_references_of_a_revoked_assignment_do_not_touch_the_next_one() -> None:
    tracker = OffsetTracker()
    old = _consume(tracker, 0)  # its trace is still in flight when the partition is revoked
    assert tracker.low_watermark(T, 0) == 0
    tracker.revoke(T, 0)
    tracker.assign(T, 0, resume_at=0)
    new = _consume(tracker, 0)  # read again from the resume offset
    tracker.release([old])  # the first evaluation finishes: inert for the new assignment
    assert tracker.committable() == {(T, 0): 0}  # the resume offset, not past `new`
    tracker.release([new])
    assert tracker.committable() == {(T, 0): 1}


def test_resume_offsets_are_validated() -> None:
    with pytest.raises(ValueError, match="resume_at"):
        OffsetTracker().assign(T, 0, resume_at=-1)


# -- the service on a real broker ---------------------------------------------------------------


def _rows(client: Any, db: str) -> tuple[int, int, set[str]]:
    raw = client.query(f"SELECT count() FROM `{db}`.scores").result_rows[0][0]
    final = client.query(f"SELECT trace_id FROM `{db}`.scores FINAL").result_rows
    return raw, len(final), {r[0] for r in final}


def test_the_revoke_commit_lands_before_the_next_owner_reads(
    kafka_broker_module, topic, make_settings, writer, chdb_client, rag_schema
):
    """A finished every trace but committed nothing yet (no periodic commit in this test); B
    joins. A's revoke listener commits on kafka-python's network loop and the group's offsets
    are complete before B fetches them: B reads nothing again, no trace is scored twice.
    (With the blocking commit in the listener, kafka-python 3 raised "Cannot block on net.run()
    from the IO thread itself", nothing was committed and B re-scored its partitions.)"""
    bootstrap = kafka_broker_module.bootstrap
    traces = make_traces(24, seed=31)
    produce(bootstrap, topic, otelcol_records(traces))
    ends = end_offsets(bootstrap, topic)
    settings = make_settings(consumer={"commit_interval_s": 300.0})
    group = settings.consumer.group_id
    a = build_scorer(settings, judge=table_judge(), writer=writer).start()
    b = None
    try:
        wait_for(lambda: a.stats()["traces_done"] == len(traces), what="A finishing every trace")
        assert committed(bootstrap, group) == {}  # nothing committed by the periodic path
        b = build_scorer(settings, judge=table_judge(), writer=writer).start()
        wait_for(
            lambda: a.stats()["partitions_assigned"] + b.stats()["partitions_assigned"] == 3
            and b.stats()["partitions_assigned"] > 0,
            what="the partitions split between A and B",
        )
        assert committed(bootstrap, group) == ends
        assert a.stats()["commits"] >= 1 and a.stats()["commit_errors"] == 0
        # New traces: whoever owns their partitions reads them after its start position, so
        # if B had started from the beginning it would have scored old traces again first.
        more = make_traces(6, seed=32)
        produce(bootstrap, topic, otelcol_records(more))
        wait_for(
            lambda: len(_rows(chdb_client, rag_schema.database)[2]) == len(traces) + len(more),
            what="the new traces scored",
        )
    finally:
        a.shutdown()
        if b is not None:
            b.shutdown()
    raw, final, ids = _rows(chdb_client, rag_schema.database)
    assert ids == {t.trace_id for t in traces + more}
    assert raw == final == (len(traces) + len(more)) * len(METRICS)  # nothing scored twice
    assert b.stats()["records_consumed"] <= len(more)


class _RevokeCommitsFail(KafkaConsumer):
    """A real kafka-python consumer whose non-blocking commits are refused, as the coordinator
    refuses a member whose generation was fenced mid-rebalance (the periodic, blocking
    ``commit`` is untouched)."""

    refused = 0

    def commit_async(self, offsets: Any = None, callback: Any = None) -> Any:
        type(self).refused += 1
        raise CommitFailedError("fenced (test)")


def test_partitions_given_back_are_committed_even_when_the_revoke_commits_fail(
    kafka_broker_module, topic, make_settings, writer, chdb_client, rag_schema, caplog
):
    """A finished everything but committed nothing (no periodic commit in this test). A plain
    consumer joins the group, takes some partitions, and leaves without reading: two eager
    rebalances, both revoke commits refused. A keeps or gets back its partitions at their
    resume offsets (nothing to read there) and re-reads the other member's, which had no
    committed offset. A's shutdown commits every partition to its end anyway. (Before, a
    partition given back had no record to start from: its finished records stayed uncommitted,
    as in the e2e test's old xfail.)"""
    bootstrap = kafka_broker_module.bootstrap
    traces = make_traces(15, seed=37)
    produce(bootstrap, topic, otelcol_records(traces))
    ends = end_offsets(bootstrap, topic)
    settings = make_settings(consumer={"commit_interval_s": 300.0})
    group = settings.consumer.group_id
    _RevokeCommitsFail.refused = 0
    caplog.set_level(logging.INFO, logger="ragpulse.scorer.pipeline.processor")
    a = Scorer(
        settings,
        evaluator=Evaluator(table_judge(), list(METRICS)),
        writer=writer,
        preparer=build_preparer(Sampler(settings.sampling), settings.extraction),
        consumer_factory=lambda cfg: _RevokeCommitsFail(**cfg),
    ).start()
    other: KafkaConsumer | None = None
    try:
        wait_for(lambda: a.stats()["traces_done"] == len(traces), what="A finishing every trace")
        other = KafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=group,
            enable_auto_commit=False,
            session_timeout_ms=2000,
            heartbeat_interval_ms=500,
        )
        other.subscribe([topic])

        def other_owns_partitions() -> bool:
            assert other is not None
            other.pause(*other.assignment())  # joined to take partitions away, not to read
            other.poll(timeout_ms=100)
            return bool(other.assignment())

        wait_for(other_owns_partitions, what="the other member owning partitions")
        taken = {tp.partition for tp in other.assignment()}
        assert taken and len(taken) < 3
        other.close(autocommit=False)  # leaves the group: A gets every partition back
        other = None
        # A gets all three partitions back. It reads the other member's partitions again from
        # the start (nothing was committed there) and nothing else: its own resume at their
        # ends. Unless kafka-python never delivered the intermediate assignment to A's listener
        # (it rejoins at once when the group changed again meanwhile): then A never gave those
        # partitions up in its own view and resumes them at their ends too, which is also
        # right, since A finished every record below.
        replayed = sum(ends[p] for p in taken)
        total = sum(ends.values())

        def full_assignments() -> int:
            return sum(
                1
                for r in caplog.records
                if r.getMessage().startswith("rebalance: assigned") and r.getMessage().count("(") == 3
            )

        def at_ends() -> bool:
            # Where A's bookkeeping stands on each partition: its resume offset, or one past the
            # last record it read (read from the test thread: a plain dict lookup, test only).
            return all(a._processor._tracker.position(topic, p) == ends[p] for p in ends)

        wait_for(
            lambda: full_assignments() >= 2
            and at_ends()
            and a.stats()["records_pending"] == 0
            and a.stats()["partitions_assigned"] == 3,
            what="A owning every partition again, at their ends, with nothing pending",
        )
        assert a.stats()["records_consumed"] in (total, total + replayed)
        assert _RevokeCommitsFail.refused >= 1
        assert committed(bootstrap, group) == {}  # the refused revoke commits left nothing
    finally:
        a.shutdown()
        if other is not None:
            other.close(autocommit=False)
    # The drain's commit carried the resume offsets of the partitions A kept or got back.
    assert committed(bootstrap, group) == ends
    _raw, _final, ids = _rows(chdb_client, rag_schema.database)
    assert ids == {t.trace_id for t in traces}


# -- the listener's own paths, with a recording consumer -------------------------------------------
# kafka-python reaches these paths only in rare sequences (an assignment that fails and is revoked
# again; leaving the group from close()), so the consumer here is a small recording stand-in with
# kafka-python 3's calling conventions, and the processing loop's methods under test are the real ones.


class _RecordingConsumer:
    def __init__(self) -> None:
        self.seeks: list[tuple[int, int]] = []
        self.commits: list[dict[Any, Any]] = []
        self.listener: Any = None

    def seek(self, tp: Any, offset: int) -> None:
        self.seeks.append((tp.partition, offset))

    def pause(self, *tps: Any) -> None:
        pass

    def assignment(self) -> set[Any]:
        return set()

    def commit_async(self, offsets: dict[Any, Any], callback: Any = None) -> Any:
        import asyncio

        self.commits.append(offsets)
        fut = asyncio.get_event_loop().create_future()
        fut.set_result(None)
        return fut

    def close(self, autocommit: bool = True) -> None:
        """What KafkaConsumer.close does in 3.0.12: leave the group through the listener."""
        import asyncio

        from kafka.structs import TopicPartition

        asyncio.run(self.listener.on_partitions_revoked({TopicPartition(T, 0)}))


def _bare_scorer() -> Scorer:
    from types import SimpleNamespace

    from ragpulse.scorer.pipeline.settings import ScorerSettings

    return Scorer(ScorerSettings(), evaluator=SimpleNamespace(metrics=()), writer=object(),
                  preparer=lambda t: None)


def test_a_second_revoke_without_an_assignment_keeps_the_resume_offset() -> None:
    """kafka-python re-runs the revoke when an assignment fails (assign_from_subscribed ->
    request_rejoin): the partition is then untracked, and its resume offset must survive."""
    from types import SimpleNamespace

    from kafka.structs import TopicPartition

    s = _bare_scorer()
    c = s._processor
    c._consumer = consumer = _RecordingConsumer()
    tp = TopicPartition(T, 0)
    c.on_assigned([tp])
    span = SimpleNamespace(parent_span_id="ab" * 8, trace_id="t1", span_id="cd" * 8)
    assemble = next(step for step in c.steps if isinstance(step, AssembleStep))
    for off in range(100, 121):  # one buffered trace holds records 100..120
        ref = s._processor._tracker.track(T, 0, off)
        assemble.submit(DecodedRecord(ref, {"t1": [span]}))  # holds and seals the record
    assert c.on_revoked([tp]) == {}  # nothing finished: nothing to commit
    assert c._resume == {(T, 0): 100}
    assert c.on_revoked([tp]) == {}  # the second revoke, no assignment in between
    assert c._resume == {(T, 0): 100}
    c.on_assigned([tp])
    assert consumer.seeks == [(0, 100)]  # the forgotten trace's records are read again


def test_a_lost_membership_keeps_no_resume_offset() -> None:
    from kafka.structs import TopicPartition

    s = _bare_scorer()
    c = s._processor
    c._consumer = _RecordingConsumer()
    tp = TopicPartition(T, 0)
    c.on_assigned([tp])
    _consume(s._processor._tracker, 5)  # its trace is still buffered
    c.on_revoked([tp])
    assert c._resume == {(T, 0): 5}
    c.on_revoked([tp], lost=True)
    assert c._resume == {}


def test_the_revoke_commit_at_close_reaches_the_consumer() -> None:
    """close() leaves the group through the revoke listener, which commits with the scorer's
    consumer: it must still be set while close() runs."""
    from kafka.structs import TopicPartition

    from ragpulse.scorer.pipeline.processor import _Rebalance

    s = _bare_scorer()
    s._processor._consumer = consumer = _RecordingConsumer()
    consumer.listener = _Rebalance(s._processor)
    s._processor.on_assigned([TopicPartition(T, 0)])
    for off in range(10):  # ten finished records, none committed yet
        _consume(s._processor._tracker, off, traces=0)
    s._stop.set()
    s._close_clients()
    assert [{tp.partition: m.offset for tp, m in c.items()} for c in consumer.commits] == [{0: 10}]
    assert s.stats()["commit_errors"] == 0
    assert s._processor._consumer is None
