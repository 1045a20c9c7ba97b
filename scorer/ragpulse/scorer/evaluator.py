"""Evaluate samples: ask the judge once per sample for every fact the metrics need, then compute.

The evaluator is the engine's entry point for both the batch CLI (``ragpulse score``) and the
live scorer. It is an asyncio component: ``evaluate`` is a coroutine that never blocks the loop
(judges run model inference in worker threads); ``evaluate_many`` bounds how many samples are in
flight at once.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, replace

from .judges.base import Judge, Needs
from .metrics import Metric, resolve_metrics, to_score
from .model import ZERO_COST, Cost, Fact, Finding, Reason, Sample, Score

__all__ = ["Evaluator", "SampleResult"]


@dataclass(frozen=True)
class SampleResult:
    """All scores of one sample, in the order the metrics were requested."""

    sample_id: str
    scores: tuple[Score, ...]
    latency_ms: float

    @property
    def cost(self) -> Cost:
        total = ZERO_COST
        for s in self.scores:
            total = total + s.cost
        return total


class _SampleFlags:
    """What :meth:`Metric.precondition` reads of a sample, computed once per sample instead of
    once per metric (each check strips the texts). Metrics that override ``precondition`` keep
    their own."""

    __slots__ = ("answer", "contexts", "question", "reference", "sample")

    def __init__(self, sample: Sample) -> None:
        self.sample = sample
        self.reference = bool(sample.reference and sample.reference.strip())
        self.question = bool(sample.question.strip())
        self.contexts = any(c.strip() for c in sample.contexts)
        self.answer = bool(sample.answer.strip())

    def precondition(self, m: Metric) -> Reason | None:
        if type(m).precondition is not Metric.precondition:
            return m.precondition(self.sample)
        # Same checks, same order as Metric.precondition.
        if m.needs_reference and not self.reference:
            return Reason.NO_REFERENCE
        if m.needs_question and not self.question:
            return Reason.NO_QUESTION
        if m.needs_contexts and not self.contexts:
            return Reason.NO_CONTEXTS
        if m.needs_answer and not self.answer:
            return Reason.NO_ANSWER
        return None


class Evaluator:
    """Scores samples with one judge and a fixed list of metrics.

    Thread-safety: use from one event loop. ``evaluate`` never raises for judge trouble: a failed
    judge call becomes a score with status ``error`` and a reason.
    """

    def __init__(
        self,
        judge: Judge,
        metrics: Sequence[Metric] | Sequence[str] | None = None,
        *,
        max_concurrency: int = 8,
    ) -> None:
        if metrics is None or (metrics and isinstance(metrics[0], str)):
            metrics = resolve_metrics(metrics)  # type: ignore[arg-type]
        self.judge = judge
        self.metrics: tuple[Metric, ...] = tuple(metrics)  # type: ignore[arg-type]
        if not self.metrics:
            raise ValueError("no metrics to evaluate")
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1")
        self.max_concurrency = max_concurrency
        self.criteria = tuple(m.criterion for m in self.metrics if m.criterion is not None)
        # What every sample asks of the judge when all its metrics are runnable (the usual
        # case): built once, not per sample. Needs is frozen, so sharing it is safe.
        self._all_users: dict[Fact, int] = {}
        for m in self.metrics:
            for f in m.facts:
                self._all_users[f] = self._all_users.get(f, 0) + 1
        self._all_needs = Needs(facts=frozenset(self._all_users), criteria=self.criteria)
        self._all_for = self.metrics  # what they were computed for (``metrics`` is public)

    async def evaluate(self, sample: Sample) -> SampleResult:
        """Score one sample with every metric. Never raises for judge trouble."""
        t0 = time.perf_counter()
        runnable: list[Metric] = []
        pre: dict[str, Reason] = {}
        flags = _SampleFlags(sample)
        for m in self.metrics:
            reason = flags.precondition(m)
            if reason is None:
                runnable.append(m)
            else:
                pre[m.name] = reason
        if not pre and self.metrics is self._all_for:
            # every metric runs: the facts, their sharing and the needs are precomputed
            users = self._all_users
            needs: Needs | None = self._all_needs if users else None
        else:
            # How many runnable metrics share each fact: each pays its share of the fact's cost.
            users = {}
            for m in runnable:
                for f in m.facts:
                    users[f] = users.get(f, 0) + 1
            needs = (
                Needs(facts=frozenset(users),
                      criteria=tuple(m.criterion for m in runnable if m.criterion is not None))
                if users else None
            )
        findings: dict[Fact, Finding] = {}
        if needs is not None:
            findings = await self.judge.gather(sample, needs)
        judge_name, judge_model = self.judge.name, self.judge.model
        scores: list[Score] = []
        for m in self.metrics:
            if pre and m.name in pre:
                scores.append(Score.missing(m.name, pre[m.name], judge=judge_name,
                                            model=judge_model))
                continue
            cost = ZERO_COST
            versions: list[str] = []
            model = judge_model
            for fact in m.facts:
                fd = findings.get(fact)
                if fd is None:
                    continue
                if fd.cost is not ZERO_COST:
                    cost = cost + fd.cost.scaled(1.0 / users[fact])
                if fd.prompt_version and fd.prompt_version not in versions:
                    versions.append(fd.prompt_version)
                model = fd.model or model
            result = m.compute(sample, findings)
            if result.value is None and result.explanation is None:
                # Why the judge failed (an API error, a timeout, garbage), from the finding:
                # without it an error score says only "judge_error".
                why = next((fd.detail for fact in m.facts
                            if (fd := findings.get(fact)) is not None and fd.value is None
                            and fd.detail), None)
                if why:
                    result = replace(result, explanation=why[:1000])
            scores.append(
                to_score(m, result, judge=judge_name, model=model,
                         prompt_version="+".join(versions) or None, cost=cost)
            )
        return SampleResult(sample.id, tuple(scores), (time.perf_counter() - t0) * 1000.0)

    async def evaluate_many(self, samples: Iterable[Sample]) -> AsyncIterator[SampleResult]:
        """Score samples with at most ``max_concurrency`` in flight; yields in completion order."""
        sem = asyncio.Semaphore(self.max_concurrency)
        queue: asyncio.Queue[SampleResult | BaseException] = asyncio.Queue()

        async def one(s: Sample) -> None:
            try:
                queue.put_nowait(await self.evaluate(s))
            except BaseException as exc:  # surfaced to the consumer below
                queue.put_nowait(exc)
            finally:
                sem.release()

        tasks: list[asyncio.Task[None]] = []
        pending = 0
        try:
            for s in samples:
                await sem.acquire()
                tasks.append(asyncio.create_task(one(s)))
                pending += 1
                while not queue.empty():
                    item = queue.get_nowait()
                    pending -= 1
                    if isinstance(item, BaseException):
                        raise item
                    yield item
            while pending:
                item = await queue.get()
                pending -= 1
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            for t in tasks:
                t.cancel()
