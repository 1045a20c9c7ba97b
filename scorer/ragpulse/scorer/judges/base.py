"""The protocol every judge implements, and the aspect-critique criteria."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, runtime_checkable

from ..model import BUILTIN_CRITERIA, Cost, Criterion, Fact, Finding, Sample

T = TypeVar("T")

__all__ = ["BUILTIN_CRITERIA", "BlockingWorkers", "Criterion", "Judge", "Needs"]


def _timed(fn: Callable[..., T], *args: Any) -> tuple[T, float]:
    t0 = time.perf_counter()
    out = fn(*args)
    return out, (time.perf_counter() - t0) * 1000.0


@dataclass(frozen=True)
class Needs:
    """What the requested metrics need from the judge for one sample."""

    facts: frozenset[Fact]
    criteria: tuple[Criterion, ...] = field(default=())


@runtime_checkable
class Judge(Protocol):
    """Turns a sample into findings.

    ``gather`` returns one :class:`Finding` for every fact in ``needs.facts`` (a finding without a
    value carries its reason); it never raises for judge or model trouble, only for programming
    errors. It is a coroutine and must never block the event loop; many calls may run
    concurrently. Each finding's ``cost`` is its share of the calls made, so the shares sum to
    what was spent.
    """

    name: str
    """``"llm"`` or ``"local"``: stored beside every score."""
    model: str
    """The model behind the judge, stored beside every score."""

    async def gather(self, sample: Sample, needs: Needs) -> dict[Fact, Finding]: ...

    async def aclose(self) -> None:
        """Release connections and threads. Idempotent."""
        ...


class BlockingWorkers:
    """The worker threads of a judge whose work blocks (a CPU model): at most ``workers``
    samples run at once, and at most ``max_pending`` wait for a thread, so a burst applies
    backpressure to the caller instead of queueing without bound.

    :meth:`run` is called from one event loop at a time (the admission semaphore belongs to the
    loop it was created on, and is made again for a new loop). :meth:`aclose` waits for running
    work; it is idempotent.
    """

    def __init__(self, workers: int, max_pending: int, name: str) -> None:
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=name)
        self._max_pending = max_pending
        self._admit: tuple[asyncio.AbstractEventLoop, asyncio.Semaphore] | None = None
        self.closed = False

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on a worker thread, once admitted."""
        loop = asyncio.get_running_loop()
        if self._admit is None or self._admit[0] is not loop:
            self._admit = (loop, asyncio.Semaphore(self._max_pending))
        async with self._admit[1]:
            return await loop.run_in_executor(self._executor, fn, *args)

    async def run_findings(self, fn: Callable[..., dict[Fact, Finding]],
                           *args: Any) -> dict[Fact, Finding]:
        """:meth:`run` for a judge's blocking core: the milliseconds ``fn`` ran on its worker
        thread (not the wait for a thread or for admission) become the findings' latency cost,
        split evenly, so the scores of a sample add up to the judge's own time."""
        findings, ms = await self.run(_timed, fn, *args)
        if not findings:
            return findings
        share = Cost(latency_ms=ms / len(findings))
        return {f: dataclasses.replace(fd, cost=fd.cost + share) for f, fd in findings.items()}

    async def aclose(self) -> None:
        if self.closed:
            return
        self.closed = True
        await asyncio.to_thread(self._executor.shutdown, True)
