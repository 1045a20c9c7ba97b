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
no longer touch the new state.
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
    records: deque[RecordRef] = field(default_factory=deque)
    next_offset: int | None = None  # one past the newest record seen
    committed: int | None = None  # what was last committed (or found committed)


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

    def assign(self, topic: str, partition: int) -> None:
        """Start tracking a partition (a new epoch: older references to it become inert)."""
        self._epoch += 1
        self._parts[(topic, partition)] = _PartitionState(self._epoch)

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
        # Offsets only grow within one assignment; a seek backwards (rebalance replay) comes
        # with a new epoch. Be defensive anyway: a smaller offset restarts the bookkeeping.
        if state.next_offset is not None and offset < state.next_offset:
            state.records.clear()
        state.records.append(ref)
        state.next_offset = offset + 1
        return ref

    @staticmethod
    def hold(ref: RecordRef, n: int = 1) -> None:
        """``n`` more traces depend on this record."""
        ref.pending += n

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
            records = state.records
            while records and records[0].done:
                records.popleft()
            if records:
                low = records[0].offset
            elif state.next_offset is not None:
                low = state.next_offset
            else:
                continue
            if state.committed is None or low > state.committed:
                out[key] = low
        return out

    def low_watermark(self, topic: str, partition: int) -> int | None:
        """The offset to resume the partition from: its oldest unfinished record, else one past
        the newest record seen; ``None`` when no record was seen."""
        state = self._parts.get((topic, partition))
        if state is None:
            return None
        for ref in state.records:
            if not ref.done:
                return ref.offset
        return state.next_offset

    def mark_committed(self, offsets: dict[tuple[str, int], int]) -> None:
        """Record a successful commit (so the same offsets are not committed again)."""
        for key, offset in offsets.items():
            state = self._parts.get(key)
            if state is not None:
                state.committed = offset

    def pending_records(self) -> int:
        """Records not yet done, over all partitions (for stats)."""
        return sum(sum(1 for r in s.records if not r.done) for s in self._parts.values())

    def position(self, topic: str, partition: int) -> int | None:
        """One past the newest record seen on the partition, or ``None``."""
        state = self._parts.get((topic, partition))
        return None if state is None else state.next_offset

    def last_committed(self, topic: str, partition: int) -> int | None:
        state = self._parts.get((topic, partition))
        return None if state is None else state.committed
