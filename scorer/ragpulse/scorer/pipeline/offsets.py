"""Which Kafka offsets may be committed: the per-partition low watermark of unfinished records.

A record may carry spans of many traces (rotel, otelcol without ``partition_traces_by_id``) and a
trace may be spread over many records (spans exported in several batches). A record is *done*
when every trace it contributed spans to has been written to ClickHouse or intentionally dropped
(sampled out, ignored as late, dead-lettered). The committable offset of a partition is the
offset of its oldest record that is not done yet, or one past the newest record seen when all are
done: committing it never skips a record whose traces are still buffered or in flight, so a crash
replays them (at-least-once), and the idempotent score rows make the replay harmless.

Partition state is keyed by an *assignment epoch*: when a partition is revoked and later assigned
again, references held by traces of the old assignment (still being evaluated in another thread)
no longer touch the new state: they belong to the old state object, which the tracker dropped.

Two rebalance rules keep the committed offsets honest (see ``pipeline.service``):

* a partition assigned again to the consumer that just gave it up starts at ``resume_at``, the
  low watermark it had at the revoke, and that offset is committable at once: if the revoke-time
  commit did not land, the next regular commit closes the gap even when no record follows;
* a record offset below one already seen within one assignment (a position reset by the
  client) never drops records that traces still hold: they stay in the low watermark until
  released, so a re-delivery cannot let a commit pass them.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

__all__ = ["OffsetTracker", "RecordRef"]


@dataclass(eq=False, slots=True)
class RecordRef:
    """One consumed record: its partition, offset and how many traces still hold it."""

    topic: str
    partition: int
    offset: int
    epoch: int
    pending: int = 0
    sealed: bool = False

    @property
    def done(self) -> bool:
        return self.sealed and self.pending <= 0


@dataclass(slots=True)
class _PartitionState:
    epoch: int
    records: deque[RecordRef] = field(default_factory=deque)  # ascending offsets
    next_offset: int | None = None  # one past the newest record seen (or the resume offset)
    committed: int | None = None  # what was last committed (or found committed)
    # Records still held when the client re-delivered from a lower offset: out of the ordered
    # queue, but they bound the low watermark until their traces release them.
    displaced: list[RecordRef] = field(default_factory=list)


class OffsetTracker:
    """Low-watermark bookkeeping for the partitions this consumer owns.

    Not thread-safe: it lives on the consumer thread; other threads report completions through a
    queue that the consumer thread drains (see ``pipeline.service``). Memory is bounded by the
    records of traces that are buffered or in flight, which the assembler and the in-flight limit
    bound in turn.
    """

    def __init__(self) -> None:
        self._parts: dict[tuple[str, int], _PartitionState] = {}
        self._epoch = 0

    # -- assignment ----------------------------------------------------------------------------

    def assign(self, topic: str, partition: int, *, resume_at: int | None = None) -> None:
        """Start tracking a partition (a new epoch: older references to it become inert).

        ``resume_at``: this consumer owned the partition until the rebalance that gave it back,
        every record before that offset is done, and the consumer resumes reading there. It is
        committable right away (the group's committed offset may be behind it if the
        revoke-time commit failed); without it the first record read marks the starting point.
        """
        if resume_at is not None and resume_at < 0:
            raise ValueError(f"resume_at must be >= 0, got {resume_at}")
        self._epoch += 1
        self._parts[(topic, partition)] = _PartitionState(self._epoch, next_offset=resume_at)

    def revoke(self, topic: str, partition: int) -> None:
        """Forget a partition; references of its records are ignored from now on."""
        self._parts.pop((topic, partition), None)

    def assigned(self) -> list[tuple[str, int]]:
        return list(self._parts)

    # -- records -------------------------------------------------------------------------------

    def track(self, topic: str, partition: int, offset: int) -> RecordRef:
        """Register a consumed record. Hold it with :meth:`hold`, then :meth:`seal` it.

        A partition seen for the first time is assigned implicitly (manual assignment).
        """
        state = self._parts.get((topic, partition))
        if state is None:
            self.assign(topic, partition)
            state = self._parts[(topic, partition)]
        if state.next_offset is None and state.committed is None:
            # The first record after an assignment sits at the position the group resumed from
            # (its committed offset, or the log start): committing that again is a no-op.
            state.committed = offset
        ref = RecordRef(topic, partition, offset, state.epoch)
        # Offsets only grow within one assignment (our rebalance seeks come with a new epoch),
        # but the client may move the position back on its own (an offset reset, a truncation
        # after a leader change). Then records from ``offset`` on are delivered again: the done
        # ones are dropped (they come back as new references), the held ones are displaced but
        # keep bounding the watermark. Dropping them would let the next commit pass records
        # whose traces are still buffered or in flight.
        if state.next_offset is not None and offset < state.next_offset:
            while state.records and state.records[-1].offset >= offset:
                old = state.records.pop()
                if not old.done:
                    state.displaced.append(old)
        state.records.append(ref)
        state.next_offset = offset + 1
        return ref

    @staticmethod
    def hold(ref: RecordRef, traces: int = 1) -> None:
        """``traces`` more traces depend on this record."""
        ref.pending += traces

    def seal(self, ref: RecordRef) -> None:
        """Every trace of the record has been attached: it is done once they are released."""
        ref.sealed = True

    def release(self, refs: list[RecordRef] | tuple[RecordRef, ...]) -> None:
        """One trace that held each of these records is finished (written or dropped)."""
        for ref in refs:
            ref.pending -= 1

    # -- committing ----------------------------------------------------------------------------

    def committable(self) -> dict[tuple[str, int], int]:
        """Per partition, the offset to commit now if it advanced past the last commit.

        Pops finished records from the front of each partition's queue (amortised O(1)).
        """
        out: dict[tuple[str, int], int] = {}
        for key, state in self._parts.items():
            low = self._low(state)
            if low is None:
                continue
            if state.committed is None or low > state.committed:
                out[key] = low
        return out

    @staticmethod
    def _low(state: _PartitionState) -> int | None:
        records = state.records
        while records and records[0].done:
            records.popleft()
        if records:
            low: int | None = records[0].offset
        else:
            low = state.next_offset
        if state.displaced:
            state.displaced = [r for r in state.displaced if not r.done]
            if state.displaced:
                oldest = min(r.offset for r in state.displaced)
                low = oldest if low is None else min(low, oldest)
        return low

    def low_watermark(self, topic: str, partition: int) -> int | None:
        """The offset to resume the partition from: its oldest unfinished record, else one past
        the newest record seen (or the ``resume_at`` it was assigned with); ``None`` when
        neither is known."""
        state = self._parts.get((topic, partition))
        return None if state is None else self._low(state)

    def mark_committed(self, offsets: dict[tuple[str, int], int]) -> None:
        """Record a successful commit (so the same offsets are not committed again)."""
        for key, offset in offsets.items():
            state = self._parts.get(key)
            if state is not None:
                state.committed = offset

    def pending_records(self) -> int:
        """Records not yet done, over all partitions (for stats)."""
        return sum(
            sum(1 for r in s.records if not r.done) + sum(1 for r in s.displaced if not r.done)
            for s in self._parts.values()
        )

    def position(self, topic: str, partition: int) -> int | None:
        """One past the newest record seen on the partition, or ``None``."""
        state = self._parts.get((topic, partition))
        return None if state is None else state.next_offset

    def last_committed(self, topic: str, partition: int) -> int | None:
        """The offset last committed (or found committed) for the partition, or ``None``."""
        state = self._parts.get((topic, partition))
        return None if state is None else state.committed
