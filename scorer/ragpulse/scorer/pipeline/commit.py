"""The commit step, always the last: records whose traces are finished become committed offsets.

Every path of a trace or an undecodable record ends here with a :class:`~.messages.Done`: rows
acknowledged by ClickHouse (write), traces dropped on purpose or sampled out (prepare, evaluate),
dead letters acknowledged by the dead-letter topic (dead_letter). The step releases the records
those held (:class:`~.offsets.OffsetTracker`) and, every ``consumer.commit_interval_s``, commits
each partition's low watermark: the oldest record not done yet. So an offset is never committed
past a record whose rows are not acknowledged, and a crash replays from there (at-least-once;
the ``scores`` table's ReplacingMergeTree key makes the replayed rows overwrite the first ones).

As arroyo's ``CommitOffsets`` (``arroyo/processing/strategies/commit.py``), the step commits
through a function it is given: the consume step's blocking ``KafkaConsumer.commit``
(https://kafka-python.readthedocs.io/en/master/apidoc/KafkaConsumer.html#kafka.KafkaConsumer.commit).
Commits at a rebalance do not go through here: the consume step's revoke listener sends them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from .messages import Done, TraceWork
from .offsets import OffsetTracker
from .steps import Step
from .telemetry import Counters

__all__ = ["CommitStep", "Offsets"]

log = logging.getLogger(__name__)

Offsets = dict[tuple[str, int], int]
"""``{(topic, partition): offset}``: the next offset to read, as Kafka commits it."""


class CommitStep(Step[Done]):
    """Releases finished records and commits the partitions' low watermarks.

    Consumer thread only. ``submit`` never raises :class:`~.steps.MessageRejected`. ``poll``
    commits when the interval passed and ``join`` commits now; both block for the broker's
    answer (``commit`` blocks) and never raise: a failed commit is counted (``commit_errors``),
    logged, and retried at the next interval with the offsets of then.

    ``in_flight`` is the set of traces between the evaluate step's admission and here (the
    evaluate step adds, this step removes: ``evaluate.max_in_flight`` bounds it).
    """

    def __init__(
        self,
        commit: Callable[[Offsets], None],
        *,
        tracker: OffsetTracker,
        in_flight: set[TraceWork],
        counters: Counters,
        interval_s: float,
        clock: Callable[[], float],
    ) -> None:
        self._commit = commit
        self._tracker = tracker
        self._in_flight = in_flight
        self._counters = counters
        self._interval_s = interval_s
        self._clock = clock
        self._last = 0.0

    def submit(self, message: Done) -> None:
        trace = message.trace
        if trace is not None:
            self._in_flight.discard(trace)
            self._counters.add("traces_done")
        self._tracker.release(message.refs)

    def poll(self) -> None:
        if self._clock() - self._last >= self._interval_s:
            self.commit_now()

    def join(self) -> None:
        self.commit_now()

    def commit_now(self) -> None:
        """Commit every partition's low watermark that advanced. Blocks for the broker."""
        self._last = self._clock()
        offsets = self._tracker.committable()
        if not offsets:
            return
        try:
            self._commit(offsets)
        except Exception as exc:  # CommitFailedError during a rebalance, a timeout: retry later
            self._counters.add("commit_errors")
            log.warning("commit: %s", exc)
            return
        self._tracker.mark_committed(offsets)
        self._counters.add("commits")
