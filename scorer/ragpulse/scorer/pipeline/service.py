"""The live scorer: the processing steps wired together, with three threads and a lifecycle.

:func:`build_chain` builds the chain of steps (each a module of this package behind the
interface of :mod:`.steps`) and makes every link of it, the inbox's routes included: the chain
and the message on each link are drawn in docs/architecture.md ("Path 2"). :class:`Scorer` hands
it to the processing loop (:mod:`.processor`), which owns the consumer group, the offset tracker
and the traces in flight, and starts and closes the steps with it. Threads:

* the **consumer thread** runs the loop and owns every step's state; other threads never touch
  it: they post typed messages (:mod:`.messages`) to its inbox (``stats()`` reads snapshots,
  from any thread);
* the **event-loop thread** runs the metric :class:`~ragpulse.scorer.Evaluator` (judges are
  asyncio components) for the evaluate step;
* the **writer** (``ragpulse.scorer.store.ScoreWriter``) batches rows into ClickHouse inserts
  and resolves a future per submission once ClickHouse acknowledged it.

Offsets are committed only after every trace a record holds spans of is in ClickHouse or
dead-lettered (at-least-once; exactly-once in ``scores FINAL``): docs/architecture.md and
docs/reliability.md say where each guarantee lives and which test holds it.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..evaluator import Evaluator
from ..store.pipeline_health import PipelineHealthRecorder
from ..store.retry import RetryPolicy
from ..traces.span_decoder import SpanDecoder
from .assemble import AssembleStep
from .commit import CommitStep
from .dead_letter import DeadLetterStep
from .decode import DecodeStep
from .evaluate import EvaluateStep, row_builder
from .messages import (
    DeadLetterOutcome,
    Scored,
    ScoringDecision,
    TracePreparer,
    Unwritable,
    WriteOutcome,
)
from .prepare import PrepareStep
from .processor import Bookkeeping, Chain, StreamProcessor
from .settings import ScorerSettings
from .steps import Inbox
from .telemetry import merge_stats
from .trace_buffer import TraceAssembler
from .write import RowSink, WriteStep

__all__ = [
    "RowSink",
    "Scorer",
    "ScorerError",
    "ScoringDecision",
    "TracePreparer",
    "build_chain",
]

log = logging.getLogger(__name__)


class ScorerError(RuntimeError):
    """The scorer cannot run (bad configuration, unreachable cluster at start, a crashed stage)."""


class Scorer:
    """The scorer service. Build with :func:`ragpulse.scorer.pipeline.build_scorer`.

    ``start()`` connects (raising :class:`ScorerError` or kafka-python's errors if the cluster is
    unreachable) and returns once the threads run (consumer thread: the processor and the
    steps; event-loop thread: the judges); ``shutdown()`` drains within
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
        self._on_close = list(on_close)
        self._stop = threading.Event()
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._started = False
        self._closed = False
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._drain_budget = settings.drain_timeout_s
        inbox = Inbox()
        self._processor = StreamProcessor(
            settings,
            functools.partial(
                build_chain,
                settings,
                inbox=inbox,
                evaluator=evaluator,
                writer=writer,
                preparer=preparer,
                decoder=decoder or SpanDecoder(),
                clock=clock,
                producer_factory=producer_factory or _kafka_producer,
                owns_judge=owns_judge,
            ),
            inbox=inbox,
            stopping=self._stop,
            clock=clock,
            consumer_factory=consumer_factory or _kafka_consumer,
        )
        # The steps, in the order the processor polls them (the commit step last).
        self._steps = self._processor.steps

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
            for step in self._steps:  # dead_letter: its topic and producer; evaluate: its loop
                step.start()
            self._processor.start()
        except BaseException:
            self._close_clients()
            self._started = False
            self._closed = True
            raise
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
            self._close_steps()  # stop the judges' loop anyway (idempotent)
        if self.health is not None:
            self.health.shutdown(10.0)  # its last sample holds the drained counts
        self._run_on_close()

    def abandon_drain(self) -> None:
        """From any thread (a signal handler too): stop waiting for held work in a drain that
        :meth:`shutdown` started or will start. What finished is committed; the rest stays
        uncommitted in Kafka and is consumed again after a restart."""
        self._processor.abandon_drain()

    def wait(self, timeout_s: float | None = None) -> bool:
        """Block until the consumer thread stopped (shutdown or a fatal error). ``True`` if so."""
        return self._stopped.wait(timeout_s)

    @property
    def error(self) -> BaseException | None:
        """The fatal error that stopped the consumer thread, if any."""
        return self._error

    def stats(self) -> dict[str, Any]:
        """Counters (:data:`telemetry.COUNTERS`), gauges (:data:`telemetry.GAUGES`) and the
        counters of the parts the steps drive (:data:`telemetry.PARTS`), merged from the
        processor's and every step's own ``stats()``. Thread-safe snapshot."""
        return merge_stats([self._processor.stats(), *(s.stats() for s in self._steps)])

    def labelled_counters(self) -> dict[str, dict[str, int]]:
        """Counters split by reason (:data:`telemetry.LABELLED`). Safe from any thread."""
        out: dict[str, dict[str, int]] = {}
        for step in self._steps:
            for name, by_label in step.labelled().items():
                out[name] = dict(by_label)
        return out

    # -- the consumer thread -------------------------------------------------------------------

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self._processor.poll()
            self._processor.join(self._drain_budget)
        except BaseException as exc:
            self._error = exc
            log.exception("scorer: the consumer thread failed")
        finally:
            self._close_clients()
            self._stopped.set()

    def _close_clients(self) -> None:
        self._processor.close()  # first: leaving the group may commit, through the consumer
        self._close_steps()

    def _close_steps(self) -> None:
        """Close every step (the dead-letter producer, the judges' event loop): in chain order,
        once the processor stopped polling them. Each close is idempotent and never raises."""
        for step in self._steps:
            step.close()

    def _run_on_close(self) -> None:
        for fn in self._on_close:
            try:
                fn()
            except Exception:
                log.exception("scorer: closing a component failed")


def build_chain(
    settings: ScorerSettings,
    book: Bookkeeping,
    *,
    inbox: Inbox,
    evaluator: Evaluator,
    writer: RowSink,
    preparer: TracePreparer,
    decoder: SpanDecoder,
    clock: Callable[[], float],
    producer_factory: Callable[[dict[str, Any]], Any],
    owns_judge: bool,
) -> Chain:
    """The scorer's chain of steps over the processor's callbacks (``book``): its
    :data:`~.processor.ChainFactory`, with the other arguments bound by :class:`Scorer`.

    Every link is made here, the drawing of docs/architecture.md ("Path 2") in code: a step gets
    the steps it hands messages to (built from the end of the chain), and ``inbox.route`` sends
    each message another thread posts to the step method that applies it on the consumer
    thread; a step whose work finishes on another thread gets ``inbox.post`` only."""
    s = settings
    retry = RetryPolicy(s.writer.retry)
    post = inbox.post
    # commit, last: every path of a trace or a record ends here (Done).
    commit = CommitStep(
        release=book.release,
        trace_ended=book.trace_ended,
        commit=book.commit,
        interval_s=s.consumer.commit_interval_s,
        clock=clock,
    )
    # write -> commit (Done, once ClickHouse acknowledged the rows).
    write = WriteStep(writer, commit, post=post, retry=retry, clock=clock)
    # evaluate -> write (Scored: null rows of unscorable traces), evaluate -> commit (Done).
    evaluate = EvaluateStep(
        evaluator,
        write,
        commit,
        trace_started=book.trace_started,
        traces_in_flight=book.traces_in_flight,
        max_in_flight=s.evaluate.max_in_flight,
        max_concurrency=s.evaluate.max_concurrency,
        rows=row_builder(s),
        post=post,
        owns_judge=owns_judge,
    )
    # prepare -> evaluate (KeptTrace), prepare -> commit (Done: not RAG, sampled out, dropped).
    prepare = PrepareStep(preparer, evaluate, commit, drop_evicted=s.assembly.on_evict == "drop")
    # assemble -> prepare (AssembledTrace).
    assemble = AssembleStep(
        TraceAssembler(s.assembly, clock=clock),
        prepare,
        hold=book.hold,
        seal=book.seal,
        drain_buffered=s.drain_buffered,
    )
    # dead_letter -> commit (Done, once the dead-letter topic acknowledged the record).
    dead_letter = DeadLetterStep(
        s,
        commit,
        hold=book.hold,
        seal=book.seal,
        post=post,
        retry=retry,
        clock=clock,
        producer_factory=producer_factory,
    )
    # decode -> assemble (DecodedRecord), decode -> dead_letter (Undecodable).
    decode = DecodeStep(decoder, assemble, dead_letter)
    # The links through the inbox: what other threads post, applied on the consumer thread.
    inbox.route(Scored, write.submit)  # event-loop thread: evaluate -> write (judged rows)
    inbox.route(Unwritable, evaluate.drop_unwritable)  # event-loop thread: evaluate -> commit
    inbox.route(WriteOutcome, write.settle)  # writer thread: write -> commit
    inbox.route(DeadLetterOutcome, dead_letter.settle)  # producer thread: dead_letter -> commit
    return Chain(
        first=decode,
        # Polled in this order every round, the commit step last; stats() asks each of them.
        steps=(decode, dead_letter, assemble, prepare, evaluate, write, commit),
        settle=(evaluate, write),
    )


def _kafka_consumer(cfg: dict[str, Any]) -> Any:
    from kafka import KafkaConsumer

    return KafkaConsumer(**cfg)


def _kafka_producer(cfg: dict[str, Any]) -> Any:
    from kafka import KafkaProducer

    return KafkaProducer(**cfg)
