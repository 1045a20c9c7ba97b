"""The evaluate step: the bridge between the consumer thread and the judges' event loop.

Judges and metrics are asyncio components (:class:`~ragpulse.scorer.Evaluator`), so they run on
an event loop in a thread of their own, started by :meth:`EvaluateStep.start`. The step admits a
kept trace only while fewer than ``evaluate.max_in_flight`` traces are between here and the
commit step (evaluating, or written and not yet acknowledged); at the bound, ``submit`` raises
:class:`~.steps.MessageRejected` (the prepare step keeps the trace and the processor pauses
its partitions). Within that bound, ``evaluate.max_concurrency`` judge calls run at once.

* An unscorable trace (no question, answer or contexts) gets one null row per metric with the
  reason, built on the consumer thread, and goes straight to the write step.
* A scorable trace is handed to the loop in :meth:`EvaluateStep.poll`: one
  ``call_soon_threadsafe`` per round for all traces admitted in it, since each call writes to
  the loop's self-pipe (a syscall and a context switch;
  https://docs.python.org/3/library/asyncio-eventloop.html#asyncio.loop.call_soon_threadsafe).
  On the loop, the evaluation's rows are posted back to the consumer thread's inbox (``post``)
  as :class:`~.messages.Scored`, which the chain routes to the write step, or as
  :class:`~.messages.Unwritable` when the row metadata is malformed, routed to
  :meth:`EvaluateStep.drop_unwritable` (the trace is then dropped and counted: it must not hold
  its records forever).
* A judge or metric that raises (a programming error) yields error rows (``judge_error``),
  counted in ``evaluate_errors``: the trace is never lost.

Threads: ``submit``/``poll``/``pending``/``close`` run on the consumer thread (``close`` after it
stopped); the coroutines and ``_spawn`` on the loop thread. ``traces_scored`` and
``evaluate_errors`` are counted on the loop thread, every other counter on the consumer thread.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
from collections.abc import Callable, Sequence

from ..evaluator import Evaluator
from ..model import Score
from ..store.rows import ScoredTraceMeta, ScoreRow, rows_from_scores
from .messages import Done, KeptTrace, Scored, TraceWork, Unwritable
from .settings import ScorerSettings
from .steps import MessageRejected, Step
from .telemetry import Counters

__all__ = ["EvaluateStep", "RowBuilder", "row_builder"]

log = logging.getLogger(__name__)

RowBuilder = Callable[[Sequence[Score], ScoredTraceMeta], list[ScoreRow]]
"""Score rows of one trace (``ragpulse.scorer.store.rows_from_scores`` with the row settings);
raises ``ValueError`` for malformed metadata. Called from both threads: must be thread-safe."""


def row_builder(settings: ScorerSettings) -> RowBuilder:
    """Rows with question/answer excerpts of ``write.max_excerpt_chars`` and up to
    ``write.max_unsupported`` unsupported statements with their closest passage
    (``write.max_evidence_chars`` each), or none of them when ``write.excerpts`` or
    ``privacy.store_text`` is off (no explanation either: it may quote the trace). The texts
    are the redacted sample's (the prepare step redacts before the judge). Thread-safe."""
    w = settings.write
    keep = w.excerpts and settings.privacy.store_text
    return functools.partial(rows_from_scores, max_excerpt_chars=w.max_excerpt_chars if keep else 0,
                             max_unsupported=w.max_unsupported if keep else 0,
                             max_evidence_chars=w.max_evidence_chars)


class EvaluateStep(Step[KeptTrace]):
    """Admits kept traces within the in-flight bound and has them judged on the event loop.

    ``submit`` raises :class:`~.steps.MessageRejected` at ``max_in_flight`` traces in flight
    (``traces_in_flight``, the processor's count; ``trace_started`` adds an admitted trace to
    it). Consumer thread, never blocks; ``start``/``close`` own the event-loop thread.

    ``write`` takes the unscorable traces' null rows on the consumer thread; the judged traces'
    rows leave through ``post`` (the inbox's, from the event-loop thread) as
    :class:`~.messages.Scored`, and the chain routes them (:func:`~.service.build_chain`).
    """

    COUNTED = ("traces_unscorable", "traces_dropped", "traces_scored", "evaluate_errors")

    def __init__(
        self,
        evaluator: Evaluator,
        write: Step[Scored],
        done: Step[Done],
        *,
        trace_started: Callable[[TraceWork], None],
        traces_in_flight: Callable[[], int],
        max_in_flight: int,
        max_concurrency: int,
        rows: RowBuilder,
        post: Callable[[object], None],
        owns_judge: bool = False,
    ) -> None:
        self._evaluator = evaluator
        self._write = write
        self._done = done
        self._trace_started = trace_started
        self._traces_in_flight = traces_in_flight
        self._max_in_flight = max_in_flight
        self._max_concurrency = max_concurrency
        self._rows = rows
        self._post = post
        self._counters = Counters(self.COUNTED)
        self._owns_judge = owns_judge
        self._metrics = tuple(m.name for m in evaluator.metrics)
        self._batch: list[KeptTrace] = []  # admitted this round, for the loop
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._judge_slots: asyncio.Semaphore | None = None  # made on the loop thread
        self.unscorable_by_reason: dict[str, int] = {}  # consumer thread

    # -- lifecycle (consumer-facing) -----------------------------------------------------------

    def start(self) -> None:
        """Start the event-loop thread. Returns at once."""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._run_loop, name="ragpulse-scorer-evaluate", daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        """Cancel the evaluations still running (the processor stopped, so nothing would
        write or commit their rows: their traces stay uncommitted in Kafka and are scored after
        a restart, and a judge closed under them must not count them as errors), close the judge
        if this step owns it (on its own loop: clients such as httpx's are bound to the loop that
        made them), then stop the loop. Blocks up to about 30 s; call it once the processor
        stopped polling the steps (the scorer does, at the end of its consumer thread).
        Idempotent; never raises."""
        loop, self._loop = self._loop, None
        if loop is None:
            return
        try:
            cancelled = asyncio.run_coroutine_threadsafe(self._cancel_running(), loop).result(10.0)
        except Exception as exc:
            log.warning("scorer: cancelling the running evaluations failed: %s", exc)
        else:
            if cancelled:
                log.info("scorer: %d evaluations still running at shutdown were cancelled; their "
                         "traces stay uncommitted in Kafka and are scored after a restart", cancelled)
        if self._owns_judge:
            try:
                asyncio.run_coroutine_threadsafe(self._evaluator.judge.aclose(), loop).result(10.0)
            except Exception as exc:
                log.warning("scorer: closing the judge failed: %s", exc)
        loop.call_soon_threadsafe(loop.stop)
        assert self._thread is not None
        self._thread.join(10.0)

    # -- the step (consumer thread) ------------------------------------------------------------

    def submit(self, message: KeptTrace) -> None:
        in_flight = self._traces_in_flight()
        if in_flight >= self._max_in_flight:
            raise MessageRejected(f"evaluate: {in_flight} traces in flight")
        work, prep = message.work, message.decision
        self._trace_started(work)
        if prep.sample is not None:
            self._batch.append(message)
            return
        self._counters.add("traces_unscorable")
        reason = prep.reason or "no_sample"
        self.unscorable_by_reason[reason] = self.unscorable_by_reason.get(reason, 0) + 1
        assert prep.meta is not None
        scores = [Score(metric=m, value=None, status="null", reason=reason) for m in self._metrics]
        try:
            rows = self._rows(scores, prep.meta)
        except Exception as exc:
            self.drop_unwritable(Unwritable(work, exc))
            return
        self._write.submit(Scored(work, rows))

    def poll(self) -> None:
        """Hand this round's admitted traces to the loop. Raises
        :class:`~.steps.MessageRejected` while the in-flight bound is reached."""
        self.join()
        in_flight = self._traces_in_flight()
        if in_flight >= self._max_in_flight:
            raise MessageRejected(f"evaluate: {in_flight} traces in flight")

    def join(self) -> None:
        if self._batch:
            batch, self._batch = self._batch, []
            assert self._loop is not None
            self._loop.call_soon_threadsafe(self._spawn, batch)

    @property
    def pending(self) -> int:
        """Traces admitted and not yet at the commit step (evaluating or writing)."""
        return self._traces_in_flight()

    def stats(self) -> dict[str, int]:
        """Its counters (``traces_scored``, ``evaluate_errors`` counted on the loop thread).
        Any thread."""
        return self._counters.snapshot()

    def labelled(self) -> dict[str, dict[str, int]]:
        """Unscorable traces by the reason they could not be scored (``traces_unscorable``)."""
        return {"traces_unscorable": dict(self.unscorable_by_reason)}

    def drop_unwritable(self, message: Unwritable) -> None:
        """A trace whose rows cannot be built: logged, counted (``traces_dropped``) and done
        (consumer thread; the inbox applies the ones posted from the event loop)."""
        log.error(
            "write: trace %s dropped, its rows cannot be built: %s",
            message.work.trace_id,
            message.error,
        )
        self._counters.add("traces_dropped")
        self._done.submit(Done(message.work.refs, message.work))

    # -- the event loop ------------------------------------------------------------------------

    def _run_loop(self) -> None:
        loop = self._loop
        assert loop is not None
        asyncio.set_event_loop(loop)
        self._judge_slots = asyncio.Semaphore(self._max_concurrency)
        try:
            loop.run_forever()
        finally:
            pending = asyncio.all_tasks(loop)
            for t in pending:
                t.cancel()
            if pending:
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.close()

    async def _cancel_running(self) -> int:
        running = [t for t in self._tasks if not t.done()]
        for t in running:
            t.cancel()
        await asyncio.gather(*running, return_exceptions=True)
        return len(running)

    def _spawn(self, batch: list[KeptTrace]) -> None:
        """On the loop thread: one task per trace; ``_evaluate`` bounds judge concurrency."""
        loop = asyncio.get_running_loop()
        for message in batch:
            task = loop.create_task(self._evaluate(message))
            self._tasks.add(task)  # the loop keeps only weak references to tasks
            task.add_done_callback(self._tasks.discard)

    async def _evaluate(self, message: KeptTrace) -> None:
        work, prep = message.work, message.decision
        assert prep.sample is not None and prep.meta is not None
        assert self._judge_slots is not None
        try:
            async with self._judge_slots:
                result = await self._evaluator.evaluate(prep.sample)
            scores: Sequence[Score] = result.scores
            self._counters.add("traces_scored")
        except Exception as exc:  # a programming error in a judge/metric: record, never lose
            log.exception("evaluate: trace %s failed", work.trace_id)
            self._counters.add("evaluate_errors")
            scores = [
                Score(
                    metric=m,
                    value=None,
                    status="error",
                    reason="judge_error",
                    explanation=f"{type(exc).__name__}: {exc}"[:1000],
                )
                for m in self._metrics
            ]
        try:
            rows = self._rows(scores, prep.meta)
        except Exception as exc:  # malformed metadata (rows_from_scores validates): never hang
            self._post(Unwritable(work, exc))
            return
        self._post(Scored(work, rows))
