"""The processing loop: the Kafka consumer group, the rounds, pausing, offsets and rebalances.

:class:`StreamProcessor` plays the role of getsentry/arroyo's ``StreamProcessor``
(``arroyo/processing/processor.py``): it owns the ``KafkaConsumer`` (kafka-python,
https://kafka-python.readthedocs.io/en/master/apidoc/KafkaConsumer.html), the
:class:`~.offsets.OffsetTracker` and the set of traces in flight, and drives the chain of steps
(:mod:`.steps`) that a :data:`ChainFactory` builds for it. The steps never see that state: the
factory hands them narrow callbacks (:class:`Bookkeeping`). Offsets are committed only when the
commit step asks, so never past a record whose rows are not acknowledged; rebalances commit what
this member finished before the partitions' next owners read them (:meth:`on_revoked
<StreamProcessor.on_revoked>`, ``_Rebalance``).

Threads: everything here runs on the consumer thread, except the rebalance listener, which
kafka-python runs while the consumer thread is blocked in ``poll`` or ``close`` (so it may use
the consumer-thread state meanwhile), and :meth:`StreamProcessor.stats`, safe from any thread.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kafka import ConsumerRebalanceListener

try:  # kafka-python >= 3: listeners run on the client's network thread
    from kafka import AsyncConsumerRebalanceListener
except ImportError:  # kafka-python 2.x: listeners run inside poll() on the consumer thread
    AsyncConsumerRebalanceListener = None

from .messages import Record, TraceWork
from .offsets import OffsetTracker, RecordRef
from .settings import ScorerSettings
from .steps import Inbox, MessageRejected, Step
from .telemetry import Counters

__all__ = [
    "Bookkeeping",
    "Chain",
    "ChainFactory",
    "Offsets",
    "StreamProcessor",
    "consumer_config",
]

log = logging.getLogger(__name__)

Offsets = dict[tuple[str, int], int]
"""``{(topic, partition): offset}``: the next offset to read, as Kafka commits it."""


@dataclass(frozen=True, slots=True)
class Bookkeeping:
    """What the steps may do to the processor's state: each a callable, consumer thread only,
    none blocks except ``commit``.

    * ``hold(ref)``: one more trace holds this record (it is not done until released).
    * ``seal(ref)``: every trace of the record is attached; done once none holds it.
    * ``release(refs)``: one trace that held each of these records is finished.
    * ``trace_started(work)`` / ``trace_ended(work)``: a trace entered or left the in-flight set
      (from the evaluate step's admission to the commit step).
    * ``traces_in_flight()``: how many traces are in flight now.
    * ``commit()``: commit every partition's low watermark that advanced; blocks for the broker,
      never raises (a failed commit is counted, ``commit_errors``, and logged).
    """

    hold: Callable[[RecordRef], None]
    seal: Callable[[RecordRef], None]
    release: Callable[[Sequence[RecordRef]], None]
    trace_started: Callable[[TraceWork], None]
    trace_ended: Callable[[TraceWork], None]
    traces_in_flight: Callable[[], int]
    commit: Callable[[], None]


@dataclass(frozen=True, slots=True)
class Chain:
    """The steps a :data:`ChainFactory` built. ``first`` takes every consumed record;
    ``steps`` are polled every round in this order (the commit step last); ``settle`` are the
    steps that may run while a revoke listener waits (they never block and admit no new trace).
    """

    first: Step[Record]
    steps: tuple[Step[Any], ...]
    settle: tuple[Step[Any], ...]


ChainFactory = Callable[[Bookkeeping], Chain]
"""Builds the steps over the processor's callbacks (arroyo's ``ProcessingStrategyFactory``
role); called once, by the :class:`StreamProcessor` constructor."""


class StreamProcessor:
    """Owns the consumer, the offset tracker and the traces in flight; drives the steps' rounds
    (see the module docstring).

    ``start()`` creates the consumer and subscribes (joining happens on the first poll); it
    raises kafka-python's errors (``NoBrokersAvailable``). ``poll()`` runs one round and
    ``join(budget_s)`` drains, both blocking (Kafka's poll, the inbox, the commits) on the
    consumer thread; they raise only what a step or kafka-python raises unexpectedly (the scorer
    stops on it). ``close()`` leaves the group (its revoke listener may commit) and is
    idempotent. ``stats()`` may be called from any thread.
    """

    COUNTED = ("records_consumed", "partitions_paused", "traces_revoked", "commits",
               "commit_errors")

    def __init__(
        self,
        settings: ScorerSettings,
        build_chain: ChainFactory,
        *,
        inbox: Inbox,
        stopping: threading.Event,
        clock: Callable[[], float],
        consumer_factory: Callable[[dict[str, Any]], Any],
    ) -> None:
        self._settings = settings
        self._tracker = OffsetTracker()
        # Traces between the evaluate step's admission and the commit step.
        self._in_flight: set[TraceWork] = set()
        self._inbox = inbox
        self._counters = Counters(self.COUNTED)
        self._stopping = stopping
        self._clock = clock
        self._consumer_factory = consumer_factory
        self._consumer: Any = None
        self._resume: dict[tuple[str, int], int] = {}  # revoked partition -> offset to resume at
        self._paused = False
        self._abandon = threading.Event()  # abandon_drain(): join stops waiting for held work
        self._last_gauges = 0.0
        self._gauges: dict[str, int] = dict.fromkeys(
            ("consumer_lag", "commit_lag", "partitions_assigned", "records_pending"), 0
        )
        tracker, in_flight = self._tracker, self._in_flight
        chain = build_chain(
            Bookkeeping(
                hold=tracker.hold,
                seal=tracker.seal,
                release=tracker.release,
                trace_started=in_flight.add,
                trace_ended=in_flight.discard,
                traces_in_flight=in_flight.__len__,
                commit=self._commit_watermarks,
            )
        )
        self._first = chain.first
        self._steps = chain.steps
        self._settle = chain.settle

    @property
    def steps(self) -> tuple[Step[Any], ...]:
        """The chain's steps, in the order every round polls them (the commit step last)."""
        return self._steps

    def stats(self) -> dict[str, int]:
        """The processor's counters and gauges (:mod:`.telemetry`). Safe from any thread."""
        return {
            **self._counters.snapshot(),
            **self._gauges,
            "traces_in_flight": len(self._in_flight),
            "paused": int(self._paused),
        }

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        """Create the consumer and subscribe (before the consumer thread starts)."""
        self._consumer = self._consumer_factory(consumer_config(self._settings))
        self._consumer.subscribe([self._settings.kafka.topic], listener=_Rebalance(self))

    def close(self) -> None:
        """Leave the group and close the consumer. Idempotent; never raises."""
        consumer = self._consumer
        if consumer is None:
            return
        # close() leaves the group through the revoke listener, whose commit needs
        # self._consumer: it is cleared only once close() returned.
        try:
            consumer.close(autocommit=False)
        except Exception as exc:
            log.warning("consume: close failed: %s", exc)
        finally:
            self._consumer = None

    def _commit_watermarks(self) -> None:
        """:attr:`Bookkeeping.commit`: commit every partition's low watermark that advanced,
        waiting for the broker. A failure (``CommitFailedError`` during a rebalance, a timeout)
        is counted and logged; the next commit retries with the offsets of then."""
        offsets = self._tracker.committable()
        if not offsets:
            return
        try:
            self._consumer.commit(_kafka_offsets(offsets))
        except Exception as exc:
            self._counters.add("commit_errors")
            log.warning("commit: %s", exc)
            return
        self._tracker.mark_committed(offsets)
        self._counters.add("commits")

    # -- rounds --------------------------------------------------------------------------------

    def poll(self) -> None:
        """One round. Blocks up to ``consumer.poll_timeout_ms``; consumer thread.

        1. applies what the other threads posted to the inbox (rows judged, writes and dead
           letters acknowledged);
        2. polls every step in chain order, commit last (timers, retries, hand-offs);
        3. pauses every assigned partition if a step raised :class:`~.steps.MessageRejected`,
           and resumes them after a round in which none did. Kafka is polled while paused, so
           the member stays in the group (``max_poll_interval_ms``): never a sleep;
        4. polls Kafka and submits each record to the chain's first step (decode), after
           registering it with the offset tracker.
        """
        c = self._settings.consumer
        self._inbox.drain()
        self._pause(self._poll_steps())
        batches = self._consumer.poll(timeout_ms=c.poll_timeout_ms, max_records=c.max_poll_records)
        if batches:
            self._submit(batches)
        now = self._clock()
        if now - self._last_gauges >= min(self._settings.status_interval_s, 1.0):
            self._update_gauges()
            self._last_gauges = now

    def _submit(self, batches: dict[Any, list[Any]]) -> None:
        submit, track, count = self._first.submit, self._tracker.track, self._counters.add
        for tp, records in batches.items():
            topic, partition = tp.topic, tp.partition
            for rec in records:
                count("records_consumed")
                ref = track(topic, partition, rec.offset)
                submit(Record(ref, rec.key, rec.value, rec.headers))

    def _poll_steps(self) -> list[str]:
        """Poll every step; what the ones that refused more work said."""
        rejected: list[str] = []
        for step in self._steps:
            try:
                step.poll()
            except MessageRejected as exc:
                rejected.append(str(exc))
        return rejected

    def _pause(self, rejected: list[str]) -> None:
        want = bool(rejected)
        if want == self._paused:
            return
        parts = list(self._consumer.assignment())
        if want:
            self._consumer.pause(*parts)
            self._counters.add("partitions_paused")
            log.info("consume: paused %d partitions (%s)", len(parts), "; ".join(rejected))
        else:
            self._consumer.resume(*parts)
            log.info("consume: resumed %d partitions", len(parts))
        self._paused = want

    def _update_gauges(self) -> None:
        lag = commit_lag = 0
        assigned = 0
        tracker = self._tracker
        for tp in self._consumer.assignment():
            assigned += 1
            hw = self._consumer.highwater(tp)  # from fetch responses: correct on tansu
            if hw is None:
                continue
            pos = tracker.position(tp.topic, tp.partition)
            if pos is not None:
                lag += max(0, hw - pos)
            committed = tracker.last_committed(tp.topic, tp.partition)
            commit_lag += max(0, hw - (committed if committed is not None else 0))
        self._gauges = {
            "consumer_lag": lag,
            "commit_lag": commit_lag,
            "partitions_assigned": assigned,
            "records_pending": tracker.pending_records(),
        }

    # -- draining ------------------------------------------------------------------------------

    def abandon_drain(self) -> None:
        """From any thread: :meth:`join` (running or to come) stops waiting for the work the
        steps hold, as if its budget had run out; what finished is still committed."""
        self._abandon.set()

    def join(self, budget_s: float) -> None:
        """Drain: no new records; every step hands on what it holds, and the inbox is applied
        until no step holds work, ``budget_s`` passed or :meth:`abandon_drain` was called; then
        the final commit."""
        deadline = self._clock() + budget_s
        parts = list(self._consumer.assignment())
        if parts:
            self._consumer.pause(*parts)
        # The polls below keep the membership alive and may complete a rebalance: partitions
        # assigned meanwhile join the paused state (on_assigned), since records returned here
        # would be thrown away.
        self._paused = True
        for step in self._steps:
            step.join()
        while (any(step.pending for step in self._steps) and self._clock() < deadline
               and not self._abandon.is_set()):
            self._inbox.drain(block_s=0.05)
            self._poll_steps()
            self._consumer.poll(timeout_ms=0)  # returns nothing (all paused)
        held = {type(s).__name__: s.pending for s in self._steps if s.pending}
        if held:
            log.warning(
                "drain: work still held %s (%s); its records stay uncommitted and will be "
                "replayed",
                "when the drain was abandoned" if self._abandon.is_set()
                else f"after {budget_s:.1f}s",
                ", ".join(f"{name} {n}" for name, n in held.items()),
            )
        for step in self._steps:
            step.join()  # the commit step, last, commits what finished meanwhile
        self._update_gauges()

    # -- rebalance (called by the listener) ----------------------------------------------------

    def on_revoked(self, revoked: Sequence[Any], *, lost: bool = False) -> Offsets:
        """Finish (within a budget) what revoked partitions hold, forget the rest, and return
        the offsets to commit for them (their low watermarks, taken *before* buffered traces
        are forgotten: forgetting releases their records, which must not look done).

        Runs while the consumer thread is blocked in ``poll``/``close`` (kafka-python calls the
        listener from there: on the consumer thread in 2.x, on its network thread in 3.x), so
        it owns the consumer-thread state meanwhile. The caller commits the returned offsets;
        an exception here is re-raised by kafka-python from ``poll`` and stops the scorer.
        ``lost``: the group already dropped this member (session expired, fenced): nothing is
        committed or waited for, and no resume offset is kept (another member may have moved
        the partitions on meanwhile; the group's committed offsets are authoritative again).

        Rebalances are eager (every partition is revoked, then the new assignment is handed
        out). While this waits, only the ``settle`` steps run (evaluate and write: they never
        block and admit nothing new): no periodic commit, no dead-letter send (``send`` may
        block up to ``max_block_ms``), no new trace for partitions about to be forgotten. A
        partition given back to this member resumes at its watermark (:meth:`on_assigned`), and
        that offset is committed by the next regular commit too, so a revoke commit that failed
        costs replays elsewhere but never leaves the group's offset behind here.
        """
        gone = frozenset((tp.topic, tp.partition) for tp in revoked)
        if not gone:
            return {}
        c = self._settings.consumer
        # Heartbeats stop while this blocks (kafka-python 3 runs it on the network loop): wait at
        # most half a session, and not at all when shutting down (the drain already waited;
        # what is left is replayed by the next owner) or when the membership is already lost.
        budget = (
            0.0
            if self._stopping.is_set() or lost
            else min(c.revoke_drain_timeout_s, c.session_timeout_ms / 2000.0)
        )
        deadline = self._clock() + budget

        def touches(work: TraceWork) -> bool:
            return any((r.topic, r.partition) in gone for r in work.refs)

        while any(touches(w) for w in self._in_flight) and self._clock() < deadline:
            self._inbox.drain(block_s=0.1)
            for step in self._settle:
                try:
                    step.poll()
                except MessageRejected:
                    pass
        tracker = self._tracker
        # Offsets first: everything below releases records of traces that were NOT written.
        offsets = {} if lost else {k: v for k, v in tracker.committable().items() if k in gone}
        # kafka-python keeps the fetch position of a partition that is assigned to this member
        # again (eager rebalances revoke everything first), but what is forgotten below must be
        # read again: remember where each partition's unfinished records start.
        # A partition this member no longer tracks (revoked twice with no assignment between:
        # kafka-python re-runs the revoke when an assignment fails) keeps the resume offset its
        # first revoke recorded; dropping it would skip the records forgotten back then.
        for key in gone:
            if lost:
                self._resume.pop(key, None)
                continue
            low = tracker.low_watermark(*key)
            if low is not None:
                self._resume[key] = low
        # What is still buffered or queued will be read again by the partitions' next owner.
        # (In-flight traces go on: their rows are written, their references are inert now.)
        for step in self._steps:
            for refs in step.forget(gone):
                self._counters.add("traces_revoked")
                tracker.release(refs)
        for key in gone:
            tracker.revoke(*key)
        log.info(
            "rebalance: %s %s; resume at %s",
            "lost" if lost else "revoked",
            sorted(gone),
            {f"{t}[{p}]": o for (t, p), o in sorted(self._resume.items()) if (t, p) in gone},
        )
        return offsets

    def revoke_commit_request(self, offsets: Offsets) -> Any:
        """Send the revoke-time commit without blocking; returns kafka-python's future.

        ``commit_async`` never blocks, so it is allowed on kafka-python 3's network thread.
        Awaited on that loop (``_Rebalance``), it completes before the JoinGroup is sent, so
        the partitions' next owners fetch these offsets. If the coordinator is unknown, the
        returned future is its lookup (it resolves to the coordinator id, where the commit's
        resolves to ``None``) and the commit is sent right after it, still ahead of the
        JoinGroup. Raises what ``commit_async`` raises (not in a group any more).
        """

        def done(_offsets: Any, result: Any) -> None:
            # Called later from whichever thread next polls or commits; the awaited future
            # already reported the outcome (revoke_commit_result), except after a lookup.
            log.debug("commit (revoke): completed: %r", result)

        return self._consumer.commit_async(_kafka_offsets(offsets), callback=done)

    def revoke_commit_result(
        self, offsets: Offsets, result: Any, exc: BaseException | None
    ) -> None:
        """Count and log the outcome of a revoke-time commit. Same thread rules as
        :meth:`on_revoked` (the consumer thread is blocked meanwhile), so the counters keep
        their single writer."""
        if exc is not None:
            # A fenced generation or a lost coordinator: the next owner replays these finished
            # records (idempotent rows); a partition given back to this member is committed
            # again from its resume offset (on_assigned).
            self._counters.add("commit_errors")
            log.warning("commit (revoke): %s not committed: %s", _fmt_offsets(offsets), exc)
        elif result is not None:
            log.info(
                "commit (revoke): %s sent after a coordinator lookup (outcome not awaited)",
                _fmt_offsets(offsets),
            )
        else:
            self._counters.add("commits")
            log.info("commit (revoke): %s", _fmt_offsets(offsets))

    def commit_revoked_blocking(self, offsets: Offsets) -> None:
        """kafka-python 2.x: the listener runs inside ``poll`` on the consumer thread, where a
        blocking commit is allowed."""
        if not offsets:
            return
        try:
            self._consumer.commit(_kafka_offsets(offsets))
        except Exception as exc:  # CommitFailedError (fenced), timeouts: replayed elsewhere
            self.revoke_commit_result(offsets, None, exc)
        else:
            self.revoke_commit_result(offsets, None, None)

    def on_assigned(self, assigned: Sequence[Any]) -> None:
        """Track the assigned partitions (a new epoch each); one given back to this member
        resumes at the offset its revoke recorded. Same thread rules as :meth:`on_revoked`."""
        for tp in assigned:
            resume = self._resume.pop((tp.topic, tp.partition), None)
            # Given back to this member: resume where its unfinished records start, and let the
            # next regular commit commit that offset (the revoke commit may not have landed).
            self._tracker.assign(tp.topic, tp.partition, resume_at=resume)
            if resume is not None:
                self._consumer.seek(tp, resume)  # replay what was forgotten at the revoke
        self._resume.clear()  # partitions that went elsewhere: their next owner resumes them
        if self._paused and assigned:
            self._consumer.pause(*assigned)  # new partitions join the paused state
        log.info("rebalance: assigned %s", sorted((tp.topic, tp.partition) for tp in assigned))


def _kafka_offsets(offsets: Offsets) -> dict[Any, Any]:
    from kafka.structs import OffsetAndMetadata, TopicPartition

    return {TopicPartition(t, p): OffsetAndMetadata(o, "", -1) for (t, p), o in offsets.items()}


def _fmt_offsets(offsets: Offsets) -> str:
    return ", ".join(f"{t}[{p}]@{o}" for (t, p), o in sorted(offsets.items()))


if AsyncConsumerRebalanceListener is not None:

    class _Rebalance(AsyncConsumerRebalanceListener):  # type: ignore[misc,valid-type]
        """kafka-python 3: awaited on the client's network loop while the consumer thread is
        blocked in ``poll`` (or ``close``), so it may touch the consumer-thread state. A blocking
        ``commit()`` raises there ("Cannot block on net.run() from the IO thread itself"), so
        ``commit_async``'s future is awaited on that loop instead.

        The revoke-time commit is awaited here, not blocked on: the loop keeps running (the
        commit's request and response go through it, heartbeats too), and the JoinGroup is only
        sent after this returns, so the commit lands before any other member can be assigned
        the partitions. The wait is bounded by the client's ``request_timeout_ms``; a commit
        that timed out may still land later: never past an unacknowledged row, but possibly
        behind what the next owner committed meanwhile (replays after its next restart).
        """

        def __init__(self, processor: StreamProcessor) -> None:
            self._processor = processor

        async def on_partitions_revoked(self, revoked: Any) -> None:
            offsets = self._processor.on_revoked(list(revoked))
            if not offsets:
                return
            try:
                result = await self._processor.revoke_commit_request(offsets)
            except Exception as exc:  # CommitFailedError, RebalanceInProgressError, timeouts
                self._processor.revoke_commit_result(offsets, None, exc)
            else:
                self._processor.revoke_commit_result(offsets, result, None)

        async def on_partitions_lost(self, lost: Any) -> None:
            # The group dropped this member: its generation is gone, a commit would be refused
            # and the partitions may already have a new owner. Forget, replay elsewhere.
            self._processor.on_revoked(list(lost), lost=True)

        async def on_partitions_assigned(self, assigned: Any) -> None:
            self._processor.on_assigned(list(assigned))

else:

    class _Rebalance(ConsumerRebalanceListener):  # type: ignore[no-redef]
        """kafka-python 2.x: called inside ``poll`` on the consumer thread, where the revoke
        commit may block."""

        def __init__(self, processor: StreamProcessor) -> None:
            self._processor = processor

        def on_partitions_revoked(self, revoked: Any) -> None:
            self._processor.commit_revoked_blocking(self._processor.on_revoked(list(revoked)))

        def on_partitions_assigned(self, assigned: Any) -> None:
            self._processor.on_assigned(list(assigned))


def consumer_config(settings: ScorerSettings) -> dict[str, Any]:
    """``KafkaConsumer`` arguments: manual commits only, never ``latest``, and a request
    timeout above the session timeout (a JoinGroup may wait for the whole session)."""
    c = settings.consumer
    cfg = settings.kafka.client_kwargs()
    cfg.update(
        group_id=c.group_id,
        enable_auto_commit=False,
        # "earliest": a new group must not skip traces already on the topic; and tansu
        # answers ListOffsets(LATEST) wrongly, which "latest" would rely on.
        auto_offset_reset="earliest",
        session_timeout_ms=c.session_timeout_ms,
        heartbeat_interval_ms=c.heartbeat_interval_ms,
        max_poll_interval_ms=c.max_poll_interval_ms,
        max_poll_records=c.max_poll_records,
        max_partition_fetch_bytes=c.max_partition_fetch_bytes,
        fetch_max_bytes=c.fetch_max_bytes,
    )
    cfg["request_timeout_ms"] = max(cfg["request_timeout_ms"], c.session_timeout_ms + 5000)
    return cfg
