"""The write step: score rows to the ClickHouse writer; a trace is done once they are acknowledged.

Rows submitted during a round are handed to the writer (``ragpulse.scorer.store.ScoreWriter``)
in :meth:`WriteStep.poll`, in a few large submissions (one future each), never more rows per
submission than half the writer's ``max_pending_rows``. A submission's future resolves on the
writer's thread once ClickHouse acknowledged every row of it (``BatchWriter.submit``); its
callback only posts a :class:`~.messages.WriteOutcome` to the inbox (``post``), which the chain
routes back to :meth:`WriteStep.settle` on the consumer thread; that hands each of its traces to
the commit step. Offsets therefore never pass a row that
ClickHouse did not acknowledge.

Rows the writer refused (``WriterFull``: backpressure) or gave back (its retry policy's deadline
passed, a permanent error, the writer closed) stay here and are submitted again after the retry
policy's backoff (:mod:`ragpulse.scorer.store.retry`), until they are acknowledged or the scorer
shuts down; their offsets wait. A permanent error is retried too, on purpose: dropping rows
would commit offsets past scores that were never stored, so a broken table (a schema mismatch)
stops the partition's commits, counted in ``write_errors`` and named by ``last_write_error``,
until an operator fixes it. While rows are held, :meth:`WriteStep.poll` raises
:class:`~.steps.MessageRejected` and the processor pauses its partitions.

Thread rules: every method runs on the consumer thread and never blocks (``submit`` of the
writer never blocks); ``last_error`` may be read from any thread.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any, Protocol

from ..store.errors import WriterFull
from ..store.retry import RetryPolicy
from ..store.rows import ScoreRow
from .messages import Done, Scored, TraceWork, WriteOutcome
from .steps import MessageRejected, Step, pop_due
from .telemetry import Counters

__all__ = ["RowSink", "WriteStep"]

log = logging.getLogger(__name__)


class RowSink(Protocol):
    """What the scorer needs of the writer: ``ragpulse.scorer.store.ScoreWriter`` has it.

    ``submit`` never blocks; it raises ``WriterFull`` (retryable, backpressure) and its future
    resolves once ClickHouse acknowledged the rows, or fails.
    """

    def submit(self, rows: Sequence[ScoreRow]) -> Future[Any]: ...


class WriteStep(Step[Scored]):
    """Submits score rows to a :class:`RowSink`; acknowledged traces go to the commit step.

    Consumer thread only, never blocks (see the module docstring); ``stats`` from any thread.
    ``post`` is the inbox's (called on the writer's thread); the inbox applies each
    :class:`~.messages.WriteOutcome` with :meth:`settle`.
    """

    COUNTED = ("rows_written", "rows_expired", "batches_written", "write_errors")

    def __init__(
        self,
        writer: RowSink,
        done: Step[Done],
        *,
        post: Callable[[object], None],
        retry: RetryPolicy,
        clock: Callable[[], float],
    ) -> None:
        self._writer = writer
        self._done = done
        self._post = post
        self._counters = Counters(self.COUNTED)
        self._retry = retry
        self._clock = clock
        max_pending = getattr(getattr(writer, "settings", None), "max_pending_rows", None)
        # Submissions stay well below the writer's bound so one never exceeds it.
        self._max_rows = max(1, min(20_000, (max_pending or 40_000) // 2))
        self._queued: list[TraceWork] = []  # rows to submit at the next poll
        self._held: deque[TraceWork] = deque()  # refused or failed rows, waiting for retry_at
        self.last_error: str | None = None

    def submit(self, message: Scored) -> None:
        message.work.rows = message.rows
        self._queued.append(message.work)

    def poll(self) -> None:
        """Submit again the held rows whose retry time came, then everything queued. Raises
        :class:`~.steps.MessageRejected` while rows are held."""
        self._queued.extend(pop_due(self._held, self._clock()))
        self._flush()
        if self._held:
            raise MessageRejected(f"write: {len(self._held)} traces' rows wait for a retry")

    def join(self) -> None:
        self._flush()

    @property
    def pending(self) -> int:
        return len(self._held)

    def stats(self) -> dict[str, Any]:
        """Its counters, the writer's own (prefixed ``writer_``, when the sink has ``stats()``)
        and ``last_write_error``."""
        out: dict[str, Any] = self._counters.snapshot()
        writer_stats = getattr(self._writer, "stats", None)
        if callable(writer_stats):
            for name, value in writer_stats().items():
                out[f"writer_{name}"] = value
        out["last_write_error"] = self.last_error
        return out

    def _flush(self) -> None:
        works, self._queued = self._queued, []
        cap = self._max_rows
        post = self._post
        i = 0
        while i < len(works):
            chunk: list[TraceWork] = []
            n = 0
            while i < len(works) and (not chunk or n + len(works[i].rows) <= cap):
                chunk.append(works[i])
                n += len(works[i].rows)
                i += 1
            rows = [r for w in chunk for r in w.rows]
            try:
                fut = self._writer.submit(rows)
            except WriterFull:
                self._hold(chunk, None)
                continue
            except Exception as exc:  # WriterClosed or a bug: keep the rows, retry, never commit
                self._hold(chunk, exc)
                continue
            fut.add_done_callback(lambda f, ws=tuple(chunk): post(_outcome(ws, f)))

    def _hold(self, works: Sequence[TraceWork], exc: BaseException | None) -> None:
        """Keep these traces' rows for a later submission; their records stay uncommitted.

        ``exc`` is ``None`` for a ``WriterFull`` refusal (backpressure, not an error)."""
        if exc is not None:
            self._counters.add("write_errors")
            self.last_error = f"{type(exc).__name__}: {exc}"[:500]
            log.warning(
                "write: %d traces not acknowledged (attempt %d), retrying: %s",
                len(works),
                works[0].attempts + 1,
                exc,
            )
        now = self._clock()
        for work in works:
            work.attempts += 1
            work.retry_at = now + self._retry.backoff(work.attempts)
            self._held.append(work)

    def settle(self, message: WriteOutcome) -> None:
        """One submission settled (consumer thread): acknowledged traces go to the commit step,
        failed ones are held for a retry."""
        if message.error is not None:
            self._hold(message.works, message.error)
            return
        # Rows the TTL deleted on insert are acknowledged but not stored: never "written".
        rows = sum(len(w.rows) for w in message.works)
        self._counters.add("rows_written", rows - message.expired)
        self._counters.add("rows_expired", message.expired)
        self._counters.add("batches_written")
        done = self._done.submit
        for w in message.works:
            done(Done(w.refs, w))


def _outcome(works: tuple[TraceWork, ...], future: Future[Any]) -> WriteOutcome:
    """The settled ``future`` of one submission as a message (runs on the writer's thread)."""
    error = future.exception()
    if error is not None:
        return WriteOutcome(works, error)
    return WriteOutcome(works, None, int(getattr(future.result(), "expired", 0)))
