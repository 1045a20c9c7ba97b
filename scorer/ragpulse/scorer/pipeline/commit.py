"""The commit step, always the last: records whose traces are finished become committed offsets.

Every path of a trace or an undecodable record ends here with a :class:`~.messages.Done`: rows
acknowledged by ClickHouse (write), traces dropped on purpose or sampled out (prepare, evaluate),
dead letters acknowledged by the dead-letter topic (dead_letter). The step releases the records
those held (through the processor's :class:`~.processor.Bookkeeping`) and, every
``consumer.commit_interval_s``, has the processor commit each partition's low watermark: the
oldest record not done yet. So an offset is never committed
past a record whose rows are not acknowledged, and a crash replays from there (at-least-once;
the ``scores`` table's ReplacingMergeTree key makes the replayed rows overwrite the first ones).

As arroyo's ``CommitOffsets`` (``arroyo/processing/strategies/commit.py``), the step commits
through a function it is given: the processor's blocking ``KafkaConsumer.commit``
(https://kafka-python.readthedocs.io/en/master/apidoc/KafkaConsumer.html#kafka.KafkaConsumer.commit).
Commits at a rebalance do not go through here: the processor's revoke listener sends them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .messages import Done, TraceWork
from .offsets import RecordRef
from .steps import Step
from .telemetry import Counters

__all__ = ["CommitStep"]


class CommitStep(Step[Done]):
    """Releases finished records and has the partitions' low watermarks committed.

    Consumer thread only. ``submit`` never raises :class:`~.steps.MessageRejected`. ``poll``
    commits when the interval passed and ``join`` commits now; both block for the broker's
    answer and never raise (``commit``, :attr:`~.processor.Bookkeeping.commit`, counts and
    logs a failure; the next interval retries with the offsets of then).

    ``release`` and ``trace_ended`` are the processor's callbacks: records no longer held by
    the finished trace, and the trace leaving the in-flight set.
    """

    COUNTED = ("traces_done",)

    def __init__(
        self,
        *,
        release: Callable[[Sequence[RecordRef]], None],
        trace_ended: Callable[[TraceWork], None],
        commit: Callable[[], None],
        interval_s: float,
        clock: Callable[[], float],
    ) -> None:
        self._release = release
        self._trace_ended = trace_ended
        self._commit = commit
        self._interval_s = interval_s
        self._clock = clock
        self._last = 0.0
        self._counters = Counters(self.COUNTED)

    def submit(self, message: Done) -> None:
        """Release the records ``message`` held; a trace leaves the in-flight set."""
        trace = message.trace
        if trace is not None:
            self._trace_ended(trace)
            self._counters.add("traces_done")
        self._release(message.refs)

    def poll(self) -> None:
        if self._clock() - self._last >= self._interval_s:
            self.commit_now()

    def join(self) -> None:
        self.commit_now()

    def commit_now(self) -> None:
        """Commit every partition's low watermark that advanced. Blocks for the broker."""
        self._last = self._clock()
        self._commit()

    def stats(self) -> dict[str, int]:
        """``traces_done``. Any thread."""
        return self._counters.snapshot()
