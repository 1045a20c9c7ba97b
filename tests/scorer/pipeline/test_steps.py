"""The step contract on single steps: backpressure as MessageRejected, order, hand-offs, the inbox.

Neighbouring steps are small real implementations of the ``Step`` interface (the scorer's own
protocol); the clock is injected, so retry times are exact and nothing sleeps.
"""

from __future__ import annotations

import random
from collections import deque
from concurrent.futures import Future
from typing import Any

import pytest

from ragpulse.scorer.pipeline.messages import (
    Done,
    KeptTrace,
    Scored,
    ScoringDecision,
    TraceWork,
    WriteOutcome,
)
from ragpulse.scorer.pipeline.offsets import RecordRef
from ragpulse.scorer.pipeline.prepare import PrepareStep
from ragpulse.scorer.pipeline.steps import Inbox, MessageRejected, Step, pop_due
from ragpulse.scorer.pipeline.trace_buffer import AssembledTrace
from ragpulse.scorer.pipeline.write import WriteStep
from ragpulse.scorer.store import RetryPolicy, RetrySettings
from ragpulse.scorer.store.errors import WriterFull


class Bounded(Step[Any]):
    """Takes at most ``capacity`` messages, then refuses until ``take()`` frees them."""

    def __init__(self, capacity: int = 1_000) -> None:
        self.capacity = capacity
        self.got: list[Any] = []

    def submit(self, message: Any) -> None:
        if len(self.got) >= self.capacity:
            raise MessageRejected("full")
        self.got.append(message)

    def take(self) -> list[Any]:
        got, self.got = self.got, []
        return got


def ref(partition: int, offset: int) -> RecordRef:
    return RecordRef("t", partition, offset, epoch=1)


def trace(trace_id: str, partition: int = 0) -> AssembledTrace[Any]:
    return AssembledTrace(trace_id, [], [ref(partition, int(trace_id[-1]))], "complete", True)


def kept(_trace: AssembledTrace[Any]) -> ScoringDecision:
    return ScoringDecision(True, 1.0, None, "no_contexts", object())  # type: ignore[arg-type]


def test_prepare_keeps_traces_in_order_and_refuses_more_while_they_wait() -> None:
    evaluate, done = Bounded(capacity=2), Bounded()
    step = PrepareStep(kept, evaluate, done, drop_evicted=False)
    traces = [trace(f"trace{i}", partition=i % 2) for i in range(4)]
    for t in traces:
        step.submit(t)
    with pytest.raises(MessageRejected):  # the third and fourth wait for a slot
        step.poll()
    assert [m.work.trace_id for m in evaluate.got] == ["trace0", "trace1"] and step.pending == 2
    # A revoked partition's waiting trace leaves the backlog; its records are handed back.
    assert step.forget(frozenset({("t", 1)})) == [traces[3].refs] and step.pending == 1
    evaluate.take()
    step.poll()  # room again: no rejection, the waiting trace goes on
    assert [m.work.trace_id for m in evaluate.got] == ["trace2"] and step.pending == 0
    assert step.stats()["traces_sampled"] == 4 and done.got == []


def test_prepare_sends_traces_it_does_not_score_straight_to_commit() -> None:
    evaluate, done = Bounded(), Bounded()

    def prepare(t: AssembledTrace[Any]) -> ScoringDecision:
        if t.trace_id == "boom0":
            raise RuntimeError("a preparer bug")
        return ScoringDecision(False, 0.1, None, None, None)

    step = PrepareStep(prepare, evaluate, done, drop_evicted=True)
    step.submit(trace("skip1"))
    step.submit(trace("boom0"))
    evicted = trace("evic2")
    evicted.cause = "evicted"
    step.submit(evicted)
    assert evaluate.got == [] and step.pending == 0
    assert [d.trace.trace_id for d in done.got] == ["skip1", "boom0", "evic2"]
    assert step.stats()["traces_sampled_out"] == 1 and step.stats()["traces_dropped"] == 2


class Sink:
    """A row sink (the write step's protocol) that refuses while ``full`` and keeps futures."""

    def __init__(self) -> None:
        self.full = True
        self.futures: list[Future[Any]] = []

    def submit(self, rows: Any) -> Future[Any]:
        if self.full:
            raise WriterFull("full (test)")
        fut: Future[Any] = Future()
        self.futures.append(fut)
        return fut


def test_write_holds_refused_rows_pauses_and_hands_on_only_what_was_acknowledged() -> None:
    now = [100.0]
    inbox, done, sink = Inbox(), Bounded(), Sink()
    retry = RetryPolicy(RetrySettings(initial_backoff_s=1, max_backoff_s=1), rng=random.Random(3))
    step = WriteStep(sink, done, post=inbox.post, retry=retry, clock=lambda: now[0])
    inbox.route(Scored, step.submit)  # as build_chain routes them
    inbox.route(WriteOutcome, step.settle)
    work = TraceWork("a" * 32, [ref(0, 7)])
    inbox.post(Scored(work, ["row1", "row2"]))  # type: ignore[list-item]  # from the loop thread
    inbox.drain()
    with pytest.raises(MessageRejected):  # refused: held for the retry time, the consumer pauses
        step.poll()
    assert step.pending == 1 and sink.futures == [] and step.stats()["write_errors"] == 0
    sink.full = False
    now[0] += 1.0  # the backoff (at most 1 s) passed
    step.poll()
    assert step.pending == 0 and len(sink.futures) == 1 and done.got == []
    sink.futures[0].set_result(None)  # ClickHouse acknowledged: the callback posts the outcome
    inbox.drain()
    assert [d.trace for d in done.got] == [work] and step.stats()["rows_written"] == 2


def test_the_inbox_applies_messages_by_type_in_order_and_refuses_unknown_types() -> None:
    inbox, seen = Inbox(), []
    inbox.route(WriteOutcome, lambda m: seen.append(("write", m.error)))
    inbox.route(Done, lambda m: seen.append(("done", m.refs)))
    with pytest.raises(ValueError, match="WriteOutcome is routed already"):  # one type, one link
        inbox.route(WriteOutcome, lambda m: None)
    inbox.post(WriteOutcome((), None))
    inbox.post(Done(()))
    inbox.post(WriteOutcome((), ValueError("x")))
    inbox.drain()
    assert [k for k, _ in seen] == ["write", "done", "write"]
    inbox.post(KeptTrace(TraceWork("t", []), kept(trace("t0"))))
    with pytest.raises(KeyError):  # a wiring bug stops the consumer thread, loudly
        inbox.drain()


def test_pop_due_keeps_the_order_of_what_is_not_due() -> None:
    held = deque(TraceWork(str(i), [], retry_at=t) for i, t in enumerate([5.0, 1.0, 9.0, 2.0]))
    assert [w.trace_id for w in pop_due(held, 2.0)] == ["1", "3"]
    assert [w.trace_id for w in held] == ["0", "2"]


def test_the_scorer_reports_every_declared_name_from_the_steps_own_counters() -> None:
    """Each step and the processing loop keep their own counters; together they report every
    name telemetry declares (the writer's own ``writer_*`` come from a real ScoreWriter)."""
    from types import SimpleNamespace

    from ragpulse.scorer.pipeline import Scorer, ScorerSettings
    from ragpulse.scorer.pipeline.telemetry import LABELLED, declared

    scorer = Scorer(ScorerSettings(), evaluator=SimpleNamespace(metrics=()),  # type: ignore[arg-type]
                    writer=object(), preparer=lambda t: None)  # type: ignore[arg-type,return-value]
    want = {n for n in (*declared("counter"), *declared("gauge")) if not n.startswith("writer_")}
    stats = scorer.stats()
    assert set(stats) == want | {"last_write_error"}
    assert all(stats[n] == 0 for n in want) and stats["last_write_error"] is None
    assert set(scorer.labelled_counters()) == set(LABELLED)


def test_a_counter_two_steps_count_is_summed_and_undeclared_names_are_refused() -> None:
    from ragpulse.scorer.pipeline.telemetry import Counters, merge_stats

    prepare, evaluate = Counters(["traces_dropped"]), Counters(["traces_dropped", "traces_scored"])
    prepare.add("traces_dropped", 2)
    evaluate.add("traces_dropped")
    merged = merge_stats([prepare.snapshot(), evaluate.snapshot(), {"paused": 1}])
    assert merged == {"traces_dropped": 3, "traces_scored": 0, "paused": 1}
    with pytest.raises(KeyError):
        Counters(["traces_droped"])


def test_counters_one_writer_per_name_and_snapshots_from_another_thread() -> None:
    """Issue 43, item 4: ``Counters`` takes no lock (single writer per name, stated on the
    class): two writer threads, each with its own names, and a reader snapshotting throughout;
    no increment is lost and every snapshot is monotonic per name."""
    import threading

    from ragpulse.scorer.pipeline.telemetry import Counters

    c = Counters(["traces_scored", "traces_dropped"])
    n = 200_000
    seen: list[dict[str, int]] = []
    done = threading.Event()

    def write(name: str) -> None:
        for _ in range(n):
            c.add(name)

    def read() -> None:
        while not done.is_set():
            seen.append(c.snapshot())

    reader = threading.Thread(target=read)
    writers = [threading.Thread(target=write, args=(name,)) for name in ("traces_scored",
                                                                          "traces_dropped")]
    reader.start()
    for w in writers:
        w.start()
    for w in writers:
        w.join()
    done.set()
    reader.join()
    assert c.snapshot() == {"traces_scored": n, "traces_dropped": n}
    assert len(seen) > 1
    for name in ("traces_scored", "traces_dropped"):
        values = [s[name] for s in seen]
        assert values == sorted(values)
