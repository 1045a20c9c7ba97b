"""The live scorer: the processing steps wired together, with three threads and a lifecycle.

One Kafka record to committed score rows, step by step (each a module of this package, all
behind the interface of :mod:`.steps`, after getsentry/arroyo's processing strategies)::

    consume ─► decode ─► assemble ─► prepare ─► evaluate ─► write ─► commit
                  └────► dead_letter ──────────────────────────────────┘

* :mod:`.consume`: the consumer group; each round applies the inbox, polls every step, pauses
  the partitions while a step refuses work (``MessageRejected``), fetches records; rebalances.
* :mod:`.decode`: record to spans by trace, or a dead letter (:mod:`.dead_letter`).
* :mod:`.assemble`: spans to traces (:mod:`.trace_buffer`), released after a grace period.
* :mod:`.prepare`: extract, sample, redact; traces not scored go straight to commit.
* :mod:`.evaluate`: admit within ``evaluate.max_in_flight``, judge on the event loop.
* :mod:`.write`: rows to the ClickHouse writer; refused or failed rows are held and retried.
* :mod:`.commit`: release finished records, commit the partitions' low watermarks. Last.

Threads and who owns what:

* the **consumer thread** owns the ``KafkaConsumer`` and every step's state, and makes every
  scheduling decision. Other threads never touch that state: they post typed messages
  (:mod:`.messages`) to its inbox, applied at the start of each round.
* the **event-loop thread** runs the metric :class:`~ragpulse.scorer.Evaluator` (judges are
  asyncio components) for the evaluate step.
* the **writer** (``ragpulse.scorer.store.ScoreWriter``, its own thread) batches rows into
  ClickHouse inserts and resolves a future per submission once ClickHouse acknowledged it.

Guarantees (docs/reliability.md): offsets are committed only after ClickHouse acknowledged the
rows of every trace a record holds spans of, or after the dead-letter topic acknowledged the
record; failed writes are retried under the one retry policy (``writer.retry``) and hold the
commit back. A crash replays from the last commit, and the ``scores`` table's ReplacingMergeTree
key makes the replayed rows overwrite the first ones (at-least-once delivery, exactly-once in
``scores FINAL``). Backpressure pauses the partitions, never sleeps. Rebalances commit what this
member finished before the partitions' next owners read them (:mod:`.consume`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..evaluator import Evaluator
from ..store.pipeline_health import PipelineHealthRecorder
from ..store.retry import RetryPolicy
from ..traces.span import Span
from ..traces.span_decoder import SpanDecoder
from .assemble import AssembleStep
from .commit import CommitStep
from .consume import ConsumeStep
from .dead_letter import DeadLetterStep
from .decode import DecodeStep
from .evaluate import EvaluateStep, row_builder
from .messages import ScoringDecision, TracePreparer, TraceWork
from .offsets import OffsetTracker
from .prepare import PrepareStep
from .settings import ScorerSettings
from .steps import Inbox
from .telemetry import Counters
from .trace_buffer import TraceAssembler
from .write import RowSink, WriteStep

__all__ = ["RowSink", "Scorer", "ScorerError", "ScoringDecision", "TracePreparer"]

log = logging.getLogger(__name__)


class ScorerError(RuntimeError):
    """The scorer cannot run (bad configuration, unreachable cluster at start, a crashed stage)."""


class Scorer:
    """The scorer service. Build with :func:`ragpulse.scorer.pipeline.build_scorer`.

    ``start()`` connects (raising :class:`ScorerError` or kafka-python's errors if the cluster is
    unreachable) and returns once the threads run; ``shutdown()`` drains within
    ``settings.drain_timeout_s``: no new records are fetched, buffered traces are scored (with
    ``drain_buffered``), in-flight rows are written and the final offsets committed; it is
    idempotent and safe without ``start()``. ``stats()`` is safe from any thread.

    ``health``: the :class:`~ragpulse.scorer.store.PipelineHealthRecorder` of this scorer's
    ``pipeline_health`` rows (``build_scorer`` sets it), started by ``start()`` and stopped by
    ``shutdown()`` after the drain, before the ``on_close`` callables run.
    """

    def __init__(
        self,
        settings: ScorerSettings,
        *,
        evaluator: Evaluator,
        writer: RowSink,
        preparer: TracePreparer,
        decoder: SpanDecoder | None = None,
        clock: Callable[[], float] = time.monotonic,
        consumer_factory: Callable[[dict[str, Any]], Any] | None = None,
        producer_factory: Callable[[dict[str, Any]], Any] | None = None,
        on_close: Sequence[Callable[[], None]] = (),
        owns_judge: bool = False,
        health: PipelineHealthRecorder | None = None,
    ) -> None:
        self.settings = settings
        self.health = health
        self.counters = Counters()
        self._writer = writer
        self._decoder = decoder or SpanDecoder()
        self._on_close = list(on_close)
        self._stop = threading.Event()
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._started = False
        self._closed = False
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._drain_budget = settings.drain_timeout_s
        self._build_steps(
            evaluator,
            preparer,
            clock,
            consumer_factory or _kafka_consumer,
            producer_factory or _kafka_producer,
            owns_judge,
        )

    def _build_steps(
        self,
        evaluator: Evaluator,
        preparer: TracePreparer,
        clock: Callable[[], float],
        consumer_factory: Callable[[dict[str, Any]], Any],
        producer_factory: Callable[[dict[str, Any]], Any],
        owns_judge: bool,
    ) -> None:
        """The chain, built from its end: each step gets the steps after it."""
        s, counters = self.settings, self.counters
        self._assembler: TraceAssembler[Span] = TraceAssembler(s.assembly, clock=clock)
        self._offsets = OffsetTracker()
        inbox = Inbox()
        retry = RetryPolicy(s.writer.retry)
        # Traces between the evaluate step's admission and the commit step.
        self._in_flight: set[TraceWork] = set()
        self._consume = ConsumeStep(
            s,
            tracker=self._offsets,
            in_flight=self._in_flight,
            inbox=inbox,
            counters=counters,
            stopping=self._stop,
            clock=clock,
            consumer_factory=consumer_factory,
        )
        commit = CommitStep(
            self._consume.commit,
            tracker=self._offsets,
            in_flight=self._in_flight,
            counters=counters,
            interval_s=s.consumer.commit_interval_s,
            clock=clock,
        )
        self._write = WriteStep(
            self._writer, commit, inbox=inbox, counters=counters, retry=retry, clock=clock
        )
        self._evaluate = EvaluateStep(
            evaluator,
            self._write,
            commit,
            in_flight=self._in_flight,
            max_in_flight=s.evaluate.max_in_flight,
            max_concurrency=s.evaluate.max_concurrency,
            rows=row_builder(s),
            inbox=inbox,
            counters=counters,
            owns_judge=owns_judge,
        )
        self._prepare = PrepareStep(
            preparer,
            self._evaluate,
            commit,
            counters=counters,
            drop_evicted=s.assembly.on_evict == "drop",
        )
        assemble = AssembleStep(
            self._assembler, self._prepare, tracker=self._offsets, drain_buffered=s.drain_buffered
        )
        self._dead_letter = DeadLetterStep(
            s,
            commit,
            tracker=self._offsets,
            inbox=inbox,
            counters=counters,
            retry=retry,
            clock=clock,
            producer_factory=producer_factory,
        )
        decode = DecodeStep(self._decoder, assemble, self._dead_letter, counters=counters)
        self._consume.chain(
            decode,
            steps=(decode, self._dead_letter, assemble, self._prepare, self._evaluate,
                   self._write, commit),
            settle=(self._evaluate, self._write),
        )

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> Scorer:
        """Connect to Kafka, join the group (asynchronously, on the first poll) and run.

        Raises :class:`ScorerError` when called twice or after shutdown; kafka-python's
        ``NoBrokersAvailable`` when the cluster cannot be reached.
        """
        with self._lock:
            if self._started or self._closed:
                raise ScorerError(
                    "scorer already started" if self._started else "scorer was shut down"
                )
            self._started = True
        s = self.settings
        try:
            self._dead_letter.start()
            self._consume.start()
        except BaseException:
            self._close_clients()
            self._started = False
            self._closed = True
            raise
        self._evaluate.start()
        if self.health is not None:
            self.health.start()
        self._thread = threading.Thread(
            target=self._run, name="ragpulse-scorer-consume", daemon=True
        )
        self._thread.start()
        log.info(
            "scorer: consuming %s as group %s from %s",
            s.kafka.topic,
            s.consumer.group_id,
            s.kafka.bootstrap_servers,
        )
        return self

    def shutdown(self, timeout_s: float | None = None) -> None:
        """Drain and stop (see the class docstring). Blocks up to about ``timeout_s`` (default
        ``settings.drain_timeout_s``) plus the time to leave the group. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            started = self._started
        if not started:
            self._run_on_close()
            return
        self._drain_budget = self.settings.drain_timeout_s if timeout_s is None else timeout_s
        self._stop.set()
        assert self._thread is not None
        self._thread.join(self._drain_budget + 30.0)
        if self._thread.is_alive():
            log.error("scorer: the consumer thread did not stop within the drain budget")
        self._evaluate.close()
        if self.health is not None:
            self.health.shutdown(10.0)  # its last sample holds the drained counts
        self._run_on_close()

    def wait(self, timeout_s: float | None = None) -> bool:
        """Block until the consumer thread stopped (shutdown or a fatal error). ``True`` if so."""
        return self._stopped.wait(timeout_s)

    @property
    def error(self) -> BaseException | None:
        """The fatal error that stopped the consumer thread, if any."""
        return self._error

    def stats(self) -> dict[str, Any]:
        """Counters (:data:`telemetry.COUNTERS`) and gauges (:data:`telemetry.GAUGES`), plus the
        assembler's, decoder's and writer's counters (:data:`telemetry.PARTS`). Thread-safe
        snapshot."""
        out: dict[str, Any] = self.counters.snapshot()
        out.update(self._assembler.counters)
        out.update(self._consume.gauges)
        out["traces_buffered"] = self._assembler.traces_buffered
        out["spans_buffered"] = self._assembler.spans_buffered
        out["traces_in_flight"] = len(self._in_flight)
        out["traces_backlog"] = self._prepare.pending
        out["paused"] = int(self._consume.paused)
        out["records_undecodable"] = self._decoder.stats().get("records_failed", 0)
        writer_stats = getattr(self._writer, "stats", None)
        if callable(writer_stats):
            for k, v in writer_stats().items():
                out[f"writer_{k}"] = v
        out["last_write_error"] = self._write.last_error
        return out

    def labelled_counters(self) -> dict[str, dict[str, int]]:
        """Counters split by reason (:data:`telemetry.LABELLED`). Safe from any thread."""
        return {
            "traces_unscorable": dict(self._evaluate.unscorable_by_reason),
            "records_dead_lettered": dict(self._dead_letter.by_reason),
        }

    # -- the consumer thread -------------------------------------------------------------------

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self._consume.poll()
            self._consume.join(self._drain_budget)
        except BaseException as exc:
            self._error = exc
            log.exception("scorer: the consumer thread failed")
        finally:
            self._close_clients()
            self._stopped.set()

    def _close_clients(self) -> None:
        self._consume.close()  # first: leaving the group may commit, through the consumer
        self._dead_letter.close()

    def _run_on_close(self) -> None:
        for fn in self._on_close:
            try:
                fn()
            except Exception:
                log.exception("scorer: closing a component failed")


def _kafka_consumer(cfg: dict[str, Any]) -> Any:
    from kafka import KafkaConsumer

    return KafkaConsumer(**cfg)


def _kafka_producer(cfg: dict[str, Any]) -> Any:
    from kafka import KafkaProducer

    return KafkaProducer(**cfg)
