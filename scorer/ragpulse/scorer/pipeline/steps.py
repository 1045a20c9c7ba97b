"""The scorer's processing steps: one small interface, a typed backpressure signal, an inbox.

The scorer is a chain of steps, each in its own module named for its stage, in the shape of
getsentry/arroyo's processing strategies (``arroyo/processing/strategies/abstract.py``), driven
by the processing loop (:class:`~.processor.StreamProcessor`, which consumes); the chain is
drawn in docs/architecture.md ("Path 2").

A step knows only the steps after it and the few callbacks of the processor it needs
(:class:`~.processor.Bookkeeping`), both passed to its constructor; a step whose work finishes on
another thread gets the inbox's ``post`` only. Every link of the chain, the ones through the
inbox included, is made in one place, :func:`~.service.build_chain`. Its interface:

* ``submit(message)`` hands the step one message. Never blocks. Raises :class:`MessageRejected`
  when the step cannot take the message now: backpressure, never an error; the caller keeps the
  message and offers it again later.
* ``poll()`` runs the step's scheduled work (timers, retries, hand-offs to other threads). Never
  blocks. Raises :class:`MessageRejected` while the step holds work its next step refused: the
  processor then pauses its Kafka partitions, keeps polling (so it stays in the group) and
  resumes after a round in which no step raised. That is how arroyo's ``StreamProcessor`` pauses
  on a rejected message (``arroyo/processing/processor.py``), extended to work that a step
  emits on its own (the assembler releases traces on a timer, not per record).
* ``join()`` hands on everything the step holds, without waiting for its timers (shutdown).
  Never blocks: the steps' work finishes on other threads, so the processor's drain keeps
  polling every step until none has work ``pending`` or the drain budget is spent.
* ``start()`` starts the step's threads and clients (before the consumer thread runs);
  ``close()`` releases them. Idempotent.
* ``stats()`` and ``labelled()`` report the step's own counters and gauges (the only methods
  other threads may call).
* ``forget(partitions)`` drops the traces the step holds that read records of revoked
  partitions and returns their record references (the caller releases them; the records are
  read again by the partitions' next owner). ``pending`` counts work the step still holds.

Unlike arroyo's messages, ours carry no offsets to commit: a record is tracked once, when it is
consumed (:class:`~.offsets.OffsetTracker`), and every path of a trace or record ends in the
commit step, which releases its references and has the processor commit the partitions' low
watermarks. As in
arroyo (``arroyo/processing/strategies/commit.py``), committing is always the last step.

Threads: every step runs on the consumer thread, which owns all their state (``stats`` and
``labelled`` aside). The event-loop
thread (judges) and the threads that complete the writer's and the producer's futures never call
a step; they post typed messages (:mod:`.messages`) to the :class:`Inbox`, and the consumer
thread applies them at the start of each round, each to the step method that
:func:`~.service.build_chain` routed its type to (no step routes messages itself).
"""

from __future__ import annotations

import queue
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Generic, Protocol, TypeVar

from .offsets import RecordRef

__all__ = ["Inbox", "MessageRejected", "Partitions", "Step", "pop_due"]

T = TypeVar("T")
M = TypeVar("M")

Partitions = frozenset[tuple[str, int]]
"""A set of ``(topic, partition)``."""


class MessageRejected(Exception):
    """Backpressure: the step cannot take more work now. Retry later; never an error.

    The message says which step and why (it is logged when the processor pauses).
    """


class Step(ABC, Generic[T]):
    """One processing step; see the module docstring for the contract of each method.

    Every method but ``start`` (before the consumer thread runs) and ``stats``/``labelled``
    runs on the consumer thread only; none blocks unless its step says so (the commit step waits
    for the broker, ``start`` and ``close`` for their clients). The defaults do nothing.
    """

    @abstractmethod
    def submit(self, message: T) -> None:
        """Take one message. Raises :class:`MessageRejected` if it cannot now (keep it, offer it
        again later)."""

    def poll(self) -> None:
        """Run scheduled work. Raises :class:`MessageRejected` while holding refused work."""
        return None

    def join(self) -> None:
        """Hand on everything held, without waiting for timers (shutdown). Never raises
        :class:`MessageRejected`."""
        return None

    def start(self) -> None:
        """Start threads and clients, before the consumer thread runs. May block and raise (the
        scorer does not start then)."""
        return None

    def close(self) -> None:
        """Release threads and clients, once the processor stopped polling the steps (the
        scorer closes them at the end of its consumer thread). Idempotent; never raises."""
        return None

    def forget(self, partitions: Partitions) -> Sequence[Sequence[RecordRef]]:
        """Drop what reads records of ``partitions``; return the record references it held."""
        return ()

    @property
    def pending(self) -> int:
        """Work the step still holds (the drain waits until every step's is 0)."""
        return 0

    def stats(self) -> Mapping[str, Any]:
        """The step's own counters and gauges (names declared in :mod:`.telemetry`). Unlike the
        other methods, safe from any thread (a snapshot)."""
        return {}

    def labelled(self) -> Mapping[str, Mapping[str, int]]:
        """The step's counters split by a label (:data:`.telemetry.LABELLED`). Any thread."""
        return {}


class Inbox:
    """Messages from other threads to the consumer thread, each applied by its type's route.

    :meth:`post` is thread-safe and never blocks. :meth:`drain` runs on the consumer thread: it
    calls the handler routed for each message's exact type, in arrival order. A message of
    an unrouted type raises ``KeyError`` there (a wiring bug: it stops the scorer). Routes are
    links of the chain: only the code that builds it (:func:`~.service.build_chain`) adds them;
    steps get :meth:`post` alone.
    """

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._handlers: dict[type, Callable[[Any], None]] = {}

    def route(self, kind: type[M], handler: Callable[[M], None]) -> None:
        """Apply messages of type ``kind`` with ``handler`` (before the threads start). Raises
        ``ValueError`` if ``kind`` has a route already (one type, one link)."""
        if kind in self._handlers:
            raise ValueError(f"inbox: {kind.__name__} is routed already")
        self._handlers[kind] = handler

    @property
    def routes(self) -> Mapping[type, Callable[[Any], None]]:
        """The routes, by message type (a copy)."""
        return dict(self._handlers)

    def post(self, message: object) -> None:
        """Queue ``message`` for the consumer thread. Any thread; never blocks."""
        self._queue.put(message)

    def drain(self, block_s: float = 0.0) -> None:
        """Apply every message posted so far; with ``block_s`` > 0, first wait up to that long
        for one to arrive (the only blocking wait of the consumer thread besides Kafka's poll)."""
        get = self._queue.get
        try:
            message = get(timeout=block_s) if block_s > 0 else get(block=False)
        except queue.Empty:
            return
        handlers = self._handlers
        while True:
            handlers[type(message)](message)
            try:
                message = get(block=False)
            except queue.Empty:
                return


class _Retried(Protocol):
    retry_at: float


R = TypeVar("R", bound=_Retried)


def pop_due(held: deque[R], now: float) -> list[R]:
    """Remove from ``held`` and return the items whose ``retry_at`` is not after ``now``; the
    others stay, in their order. O(len(held))."""
    due: list[R] = []
    for _ in range(len(held)):
        item = held.popleft()
        if item.retry_at > now:
            held.append(item)
        else:
            due.append(item)
    return due
