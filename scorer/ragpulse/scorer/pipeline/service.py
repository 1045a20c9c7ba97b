"""The live scorer: Kafka consumer group → decode → assemble → sample → evaluate → write → commit.

Threads and who owns what (the shape of getsentry/arroyo's processing strategies, with the
commit step last):

* the **consumer thread** owns the ``KafkaConsumer``, the :class:`TraceAssembler`, the
  :class:`OffsetTracker` and every scheduling decision. It polls (which also keeps the group
  membership alive), decodes records, assembles traces, extracts and samples them, hands samples to
  the event loop, submits rows to the writer, and commits offsets. Other threads never touch its
  state: they post messages to its inbox (a ``queue.SimpleQueue``) that it drains every loop.
* the **event-loop thread** runs the metric :class:`~ragpulse.scorer.Evaluator` (judges are
  asyncio components) and posts each trace's rows back to the inbox.
* the **writer** (``ragpulse.scorer.store.ScoreWriter``, its own thread) batches rows into
  ClickHouse inserts and resolves a future per submission once ClickHouse acknowledged it.

Offsets are committed only after the rows are acknowledged: a record is done when every trace it
holds spans of has been written or dropped on purpose, and each partition commits its low
watermark (:mod:`.offsets`). Failed writes are retried with backoff and hold the commit back;
a crash replays from the last commit, and the ``scores`` table's ReplacingMergeTree key makes the
replayed rows overwrite the first ones (at-least-once delivery, exactly-once in ``scores FINAL``).

Backpressure is a typed signal, never a sleep: when ``max_in_flight`` traces are being evaluated or
written, assembled traces wait in a backlog and the consumer pauses its partitions (it keeps
polling, so it stays in the group) until the backlog drains; a ``WriterFull`` refusal does the same.

Undecodable records go to the dead-letter topic with headers saying why and where they came from
(``ragpulse.dlq.*``); the record counts as done once the dead-letter topic acknowledged it.

Rebalances (eager: every partition is revoked, then the new assignment is handed out). The
revoke listener waits a bounded time for in-flight traces of the revoked partitions, computes
their low watermarks *before* it forgets buffered traces, commits them and awaits the broker's
answer before the client sends its JoinGroup, so the partitions' next owners start after what
this member finished. kafka-python 3 calls listeners on its network thread, where a blocking
``commit()`` raises ("Cannot block on net.run() from the IO thread itself"): the listener is an
``AsyncConsumerRebalanceListener`` that awaits ``commit_async``'s future on that loop instead.
A partition given back to the same member resumes at its watermark, and that offset is
committed by the next regular commit too, so a revoke commit that failed (a fenced generation,
a lost coordinator) costs replays elsewhere but never leaves the group's offset behind here.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Protocol

from kafka import ConsumerRebalanceListener

try:  # kafka-python >= 3: listeners run on the client's network thread (see _Rebalance)
    from kafka import AsyncConsumerRebalanceListener
except ImportError:  # kafka-python 2.x: listeners run inside poll() on the consumer thread
    AsyncConsumerRebalanceListener = None

from ..evaluator import Evaluator
from ..model import Sample, Score
from ..store.errors import WriterFull
from ..store.rows import ScoreRow, TraceMeta, rows_from_scores
from ..traces.decode import DecodeError, SpanDecoder, group_by_trace
from ..traces.reasons import NOT_RAG
from ..traces.span import Span
from .assembly import AssembledTrace, TraceAssembler
from .health import HealthReporter
from .offsets import OffsetTracker, RecordRef
from .settings import ScorerSettings
from .telemetry import Counters

__all__ = ["Prepared", "RowSink", "Scorer", "ScorerError", "TracePreparer"]

log = logging.getLogger(__name__)

DLQ_HEADER_PREFIX = "ragpulse.dlq."


class ScorerError(RuntimeError):
    """The scorer cannot run (bad configuration, unreachable cluster at start, a crashed stage)."""


class RowSink(Protocol):
    """What the scorer needs of the writer: ``ragpulse.scorer.store.ScoreWriter`` has it.

    ``submit`` never blocks; it raises ``WriterFull`` (retryable, backpressure) and its future
    resolves once ClickHouse acknowledged the rows, or fails.
    """

    def submit(self, rows: Sequence[ScoreRow]) -> Future[Any]: ...


@dataclass(frozen=True, slots=True)
class Prepared:
    """What the scorer does with one assembled trace.

    ``keep`` is the sampling decision and ``rate`` its probability (stored on every row for
    reweighting). A kept trace with ``sample=None`` is unscorable: it is written as one null row
    per metric carrying ``reason``. A trace that is no RAG query at all (``reason`` ``not_rag``,
    ``keep`` false) is counted and gets no rows. ``meta`` is the row metadata (``None`` drops the trace, e.g.
    when its spans carry no usable trace id; counted).
    """

    keep: bool
    rate: float
    sample: Sample | None
    reason: str | None
    meta: TraceMeta | None


TracePreparer = Callable[[AssembledTrace[Span]], Prepared]
"""Extract and sample one assembled trace (default: ``pipeline.prepare.build_preparer``)."""


@dataclass(eq=False, slots=True)
class _Work:
    """One trace between assembly and acknowledgement."""

    trace_id: str
    refs: list[RecordRef]
    rows: list[ScoreRow] = field(default_factory=list)
    record: Any = None  # (key, value, headers) of a record on its way to the dead-letter topic
    attempts: int = 0
    retry_at: float = 0.0


class Scorer:
    """The scorer service. Build with :func:`ragpulse.scorer.pipeline.build_scorer`.

    ``start()`` connects (raising :class:`ScorerError` or kafka-python's errors if the cluster is
    unreachable) and returns once the threads run; ``shutdown()`` drains within
    ``settings.drain_timeout_s``: no new records are fetched, buffered traces are scored (with
    ``drain_buffered``), in-flight rows are written and the final offsets committed; it is
    idempotent and safe without ``start()``. ``stats()`` is safe from any thread.
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
        health: HealthReporter | None = None,
    ) -> None:
        self.settings = settings
        self._owns_judge = owns_judge
        self._health = health
        self._evaluator = evaluator
        self._writer = writer
        self._prepare = preparer
        self._decoder = decoder or SpanDecoder()
        self._clock = clock
        self._consumer_factory = consumer_factory or _kafka_consumer
        self._producer_factory = producer_factory or _kafka_producer
        self._on_close = list(on_close)
        self._metrics = tuple(m.name for m in evaluator.metrics)

        self.counters = Counters()
        self._assembler: TraceAssembler[Span] = TraceAssembler(settings.assembly, clock=clock)
        self._offsets = OffsetTracker()
        self._inbox: queue.SimpleQueue[tuple[str, Any, Any]] = queue.SimpleQueue()
        self._to_submit: list[_Work] = []
        self._resume: dict[tuple[str, int], int] = {}  # revoked partition -> offset to resume at
        self._tasks: set[asyncio.Task[None]] = set()
        self._judge_slots: asyncio.Semaphore | None = None  # made on the loop thread
        max_pending = getattr(getattr(writer, "settings", None), "max_pending_rows", None)
        # Submissions stay well below the writer's bound so one never exceeds it.
        self._submit_rows_cap = max(1, min(20_000, (max_pending or 40_000) // 2))
        self._backlog: deque[tuple[_Work, Prepared]] = deque()  # assembled, waiting for a slot
        self._unsubmitted: deque[_Work] = deque()  # rows the writer refused or failed, to retry
        self._dlq_retry: deque[tuple[_Work, Any]] = deque()
        self._in_flight: dict[int, _Work] = {}  # id(work) -> work: evaluating or writing
        self._paused = False
        self._gauges: dict[str, int] = dict.fromkeys(
            ("consumer_lag", "commit_lag", "partitions_assigned", "records_pending"), 0
        )
        self._consumer: Any = None
        self._producer: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: threading.Thread | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._started = False
        self._closed = False
        self._error: BaseException | None = None
        self._last_commit = 0.0
        self._last_gauges = 0.0
        self._last_write_error: str | None = None
        # Counters split by reason, for pipeline_health labels (consumer thread only).
        self._unscorable_by_reason: dict[str, int] = {}
        self._dead_letter_by_reason: dict[str, int] = {}

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
            if s.consumer.dead_letter:
                self._ensure_dead_letter_topic()
                self._producer = self._producer_factory(_producer_config(s))
            self._consumer = self._consumer_factory(_consumer_config(s))
            self._consumer.subscribe([s.kafka.topic], listener=_Rebalance(self))
        except BaseException:
            self._close_clients()
            self._started = False
            self._closed = True
            raise
        self._loop = asyncio.new_event_loop()
        self._loop_thread = threading.Thread(
            target=self._run_loop, name="ragpulse-scorer-evaluate", daemon=True
        )
        self._loop_thread.start()
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

    def _ensure_dead_letter_topic(self) -> None:
        """Create the dead-letter topic if missing: brokers that do not auto-create topics would
        otherwise refuse every dead letter and hold the partition's commits back. Best effort:
        without admin rights the topic must exist already (the first send says so)."""
        from ragpulse.collector.kafka import ensure_topic

        try:
            ensure_topic(self.settings.kafka, 1, topic=self.settings.kafka.dlq_topic, timeout_s=10)
        except Exception as exc:
            log.warning("dead-letter: cannot ensure topic %s: %s", self.settings.kafka.dlq_topic,
                        exc)

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
        budget = self.settings.drain_timeout_s if timeout_s is None else timeout_s
        self._drain_budget = budget
        self._stop.set()
        assert self._thread is not None
        self._thread.join(budget + 30.0)
        if self._thread.is_alive():
            log.error("scorer: the consumer thread did not stop within the drain budget")
        if self._loop is not None:
            loop = self._loop
            if self._owns_judge:
                # On its own loop: clients such as httpx's are bound to the loop that made them.
                try:
                    asyncio.run_coroutine_threadsafe(self._evaluator.judge.aclose(), loop).result(
                        10.0
                    )
                except Exception as exc:
                    log.warning("scorer: closing the judge failed: %s", exc)
            loop.call_soon_threadsafe(loop.stop)
            assert self._loop_thread is not None
            self._loop_thread.join(10.0)
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
        assembler's, decoder's and writer's counters. Thread-safe snapshot."""
        out: dict[str, Any] = self.counters.snapshot()
        out.update(self._assembler.counters)
        out.update(self._gauges)
        out["traces_buffered"] = self._assembler.traces_buffered
        out["spans_buffered"] = self._assembler.spans_buffered
        out["traces_in_flight"] = len(self._in_flight)
        out["traces_backlog"] = len(self._backlog)
        out["paused"] = int(self._paused)
        dec = self._decoder.stats()
        out["records_undecodable"] = dec.get("records_failed", 0)
        writer_stats = getattr(self._writer, "stats", None)
        if callable(writer_stats):
            for k, v in writer_stats().items():
                out[f"writer_{k}"] = v
        out["last_write_error"] = self._last_write_error
        return out

    # -- the event loop ------------------------------------------------------------------------

    def _run_loop(self) -> None:
        assert self._loop is not None
        asyncio.set_event_loop(self._loop)
        self._judge_slots = asyncio.Semaphore(self.settings.evaluate.max_concurrency)
        try:
            self._loop.run_forever()
        finally:
            pending = asyncio.all_tasks(self._loop)
            for t in pending:
                t.cancel()
            if pending:
                self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self._loop.close()

    async def _evaluate(self, work: _Work, prep: Prepared) -> None:
        assert prep.sample is not None and prep.meta is not None
        assert self._judge_slots is not None
        try:
            # max_in_flight bounds traces held (evaluating or writing); this bounds judge calls.
            async with self._judge_slots:
                result = await self._evaluator.evaluate(prep.sample)
            scores: Sequence[Score] = result.scores
            self.counters.add("traces_scored")
        except Exception as exc:  # a programming error in a judge/metric: record, never lose
            log.exception("evaluate: trace %s failed", work.trace_id)
            self.counters.add("evaluate_errors")
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
            self._inbox.put(("dropped", work, exc))
            return
        self._inbox.put(("rows", work, rows))

    def _rows(self, scores: Sequence[Score], meta: TraceMeta) -> list[ScoreRow]:
        w = self.settings.write
        # privacy.store_text=false: no excerpt and no explanation (which may quote the trace)
        keep = w.excerpts and self.settings.privacy.store_text
        return rows_from_scores(scores, meta, max_excerpt_chars=w.max_excerpt_chars if keep else 0)

    # -- the consumer thread -------------------------------------------------------------------

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self._step()
            self._drain()
        except BaseException as exc:
            self._error = exc
            log.exception("scorer: the consumer thread failed")
        finally:
            self._close_clients()
            self._stopped.set()

    def _step(self) -> None:
        s = self.settings.consumer
        self._process_inbox()
        self._retry_pending()
        self._dispatch_backlog()  # also flushes the rows queued above to the writer
        self._update_pause()
        batches = self._consumer.poll(timeout_ms=s.poll_timeout_ms, max_records=s.max_poll_records)
        for tp, records in batches.items():
            for rec in records:
                self._consume(tp.topic, tp.partition, rec)
        self._dispatch(self._assembler.pop_ready())
        now = self._clock()
        if now - self._last_commit >= s.commit_interval_s:
            self._commit()
        if now - self._last_gauges >= min(self.settings.status_interval_s, 1.0):
            self._update_gauges()
            self._last_gauges = now
        if self._health is not None and self._health.due():  # stats() is not free: only when due
            self._health.maybe_flush(self.stats(), self._labelled())

    def _consume(self, topic: str, partition: int, rec: Any) -> None:
        self.counters.add("records_consumed")
        ref = self._offsets.track(topic, partition, rec.offset)
        try:
            spans = self._decoder.decode(rec.value)
        except DecodeError as exc:
            self._dead_letter(ref, rec, exc.reason, exc.detail)
            return
        self.counters.add("spans_consumed", len(spans))
        for trace_id, trace_spans in group_by_trace(spans).items():
            if self._assembler.add(trace_id, trace_spans, ref):
                self._offsets.hold(ref)
        self._offsets.seal(ref)

    def _dispatch(self, traces: list[AssembledTrace[Span]]) -> None:
        for trace in traces:
            work = _Work(trace.trace_id, trace.refs)
            if trace.cause == "evicted" and self.settings.assembly.on_evict == "drop":
                self.counters.add("traces_dropped")
                self._finish(work)
                continue
            try:
                prep = self._prepare(trace)
            except Exception:
                # The preparer is pure code over decoded spans; a bug there must not kill the
                # consumer nor stall its partition forever: count, log, drop.
                log.exception("prepare: trace %s failed; dropped", trace.trace_id)
                self.counters.add("traces_dropped")
                self._finish(work)
                continue
            if prep.reason == NOT_RAG:
                self.counters.add("traces_not_rag")
                self._finish(work)
                continue
            if not prep.keep:
                self.counters.add("traces_sampled_out")
                self._finish(work)
                continue
            if prep.meta is None:
                self.counters.add("traces_dropped")
                self._finish(work)
                continue
            self.counters.add("traces_sampled")
            self._backlog.append((work, prep))
        self._dispatch_backlog()

    def _dispatch_backlog(self) -> None:
        limit = self.settings.evaluate.max_in_flight
        batch: list[tuple[_Work, Prepared]] = []
        while self._backlog and len(self._in_flight) < limit:
            work, prep = self._backlog.popleft()
            self._in_flight[id(work)] = work
            if prep.sample is None:
                self.counters.add("traces_unscorable")
                reason = prep.reason or "no_sample"
                self._unscorable_by_reason[reason] = self._unscorable_by_reason.get(reason, 0) + 1
                assert prep.meta is not None
                scores = [
                    Score(metric=m, value=None, status="null", reason=reason) for m in self._metrics
                ]
                try:
                    rows = self._rows(scores, prep.meta)
                except Exception as exc:
                    self._inbox.put(("dropped", work, exc))
                    continue
                self._submit(work, rows)
            else:
                batch.append((work, prep))
        if batch:
            # One cross-thread wake-up per batch, not per trace: call_soon_threadsafe writes to
            # the loop's self-pipe, a syscall and a context switch each time.
            assert self._loop is not None
            self._loop.call_soon_threadsafe(self._spawn, batch)
        self._flush_submits()

    def _spawn(self, batch: list[tuple[_Work, Prepared]]) -> None:
        """On the loop thread: one task per trace; ``_evaluate`` bounds judge concurrency."""
        assert self._loop is not None
        for work, prep in batch:
            task = self._loop.create_task(self._evaluate(work, prep))
            self._tasks.add(task)  # the loop keeps only weak references to tasks
            task.add_done_callback(self._tasks.discard)

    def _submit(self, work: _Work, rows: list[ScoreRow]) -> None:
        """Queue a trace's rows; :meth:`_flush_submits` hands the queued ones to the writer."""
        work.rows = rows
        self._to_submit.append(work)

    def _flush_submits(self) -> None:
        """Submit queued rows to the writer in a few large submissions (one future each)."""
        works, self._to_submit = self._to_submit, []
        cap = self._submit_rows_cap
        i = 0
        while i < len(works):
            chunk: list[_Work] = []
            n = 0
            while i < len(works) and (not chunk or n + len(works[i].rows) <= cap):
                chunk.append(works[i])
                n += len(works[i].rows)
                i += 1
            rows = [r for w in chunk for r in w.rows]
            try:
                fut = self._writer.submit(rows)
            except WriterFull:
                self._schedule_retry(chunk, None)
                continue
            except Exception as exc:  # WriterClosed or a bug: keep the rows, retry, never commit
                self._schedule_retry(chunk, exc)
                continue
            fut.add_done_callback(lambda f, ws=chunk: self._inbox.put(("written", ws, f)))

    def _schedule_retry(self, works: list[_Work], exc: BaseException | None) -> None:
        """Resubmit these traces' rows after a backoff; their records stay uncommitted meanwhile.

        ``exc`` is ``None`` for a ``WriterFull`` refusal (backpressure, not an error)."""
        w = self.settings.write
        if exc is not None:
            self.counters.add("write_errors")
            self._last_write_error = f"{type(exc).__name__}: {exc}"[:500]
            log.warning(
                "write: %d traces not acknowledged (attempt %d), retrying: %s",
                len(works),
                works[0].attempts + 1,
                exc,
            )
        now = self._clock()
        for work in works:
            work.attempts += 1
            work.retry_at = now + min(
                w.retry_max_s, w.retry_initial_s * 2 ** min(work.attempts, 20)
            )
            self._unsubmitted.append(work)

    def _retry_pending(self, *, dead_letters: bool = True) -> None:
        now = self._clock()
        for _ in range(len(self._unsubmitted)):
            work = self._unsubmitted.popleft()
            if work.retry_at > now:
                self._unsubmitted.append(work)
                continue
            self._submit(work, work.rows)
        if not dead_letters:
            return
        for _ in range(len(self._dlq_retry)):
            work, rec = self._dlq_retry.popleft()
            if work.retry_at > now:
                self._dlq_retry.append((work, rec))
                continue
            self._send_dead_letter(work, rec)

    def _process_inbox(self, block_s: float = 0.0) -> None:
        """Apply what the other threads reported. ``block_s`` waits for the first message."""
        first = True
        while True:
            try:
                kind, work, payload = (
                    self._inbox.get(timeout=block_s)
                    if first and block_s > 0
                    else self._inbox.get_nowait()
                )
            except queue.Empty:
                return
            first = False
            if kind == "rows":
                self._submit(work, payload)
            elif kind == "dropped":
                log.error(
                    "write: trace %s dropped, its rows cannot be built: %s", work.trace_id, payload
                )
                self.counters.add("traces_dropped")
                self._finish(work)
            elif kind == "written":
                exc = payload.exception()
                if exc is None:
                    self.counters.add("rows_written", sum(len(w.rows) for w in work))
                    self.counters.add("batches_written")
                    for w in work:
                        self._finish(w)
                else:
                    self._schedule_retry(work, exc)
            elif kind == "dlq":
                exc = payload
                if exc is None:
                    self.counters.add("records_dead_lettered")
                    self._offsets.release(work.refs)
                else:
                    self.counters.add("dead_letter_errors")
                    log.warning("dead-letter: send failed (attempt %d): %s", work.attempts + 1, exc)
                    work.attempts += 1
                    w = self.settings.write
                    work.retry_at = self._clock() + min(
                        w.retry_max_s, w.retry_initial_s * 2**work.attempts
                    )
                    self._dlq_retry.append((work, work.record))

    def _finish(self, work: _Work) -> None:
        """The trace is written or dropped on purpose: its records may be committed."""
        self._in_flight.pop(id(work), None)
        self._offsets.release(work.refs)
        self.counters.add("traces_done")

    # -- dead letters --------------------------------------------------------------------------

    def _dead_letter(self, ref: RecordRef, rec: Any, reason: str, detail: str) -> None:
        self._dead_letter_by_reason[reason] = self._dead_letter_by_reason.get(reason, 0) + 1
        log.warning(
            "decode: %s[%d]@%d undecodable (%s)%s",
            ref.topic,
            ref.partition,
            ref.offset,
            reason,
            "; dead-lettered" if self._producer is not None else "; skipped",
        )
        if self._producer is None:
            self._offsets.seal(ref)  # dead-lettering disabled: the record is skipped (counted)
            return
        self._offsets.hold(ref)
        self._offsets.seal(ref)
        work = _Work(f"dlq:{ref.partition}:{ref.offset}", [ref])
        headers = list(rec.headers or []) + [
            (DLQ_HEADER_PREFIX + "reason", reason.encode()),
            (DLQ_HEADER_PREFIX + "detail", detail[:1000].encode("utf-8", "replace")),
            (DLQ_HEADER_PREFIX + "topic", ref.topic.encode()),
            (DLQ_HEADER_PREFIX + "partition", str(ref.partition).encode()),
            (DLQ_HEADER_PREFIX + "offset", str(ref.offset).encode()),
            (DLQ_HEADER_PREFIX + "group", self.settings.consumer.group_id.encode()),
        ]
        self._send_dead_letter(work, (rec.key, rec.value, headers))

    def _send_dead_letter(self, work: _Work, record: Any) -> None:
        key, value, headers = record
        work.record = record  # kept for a retry
        try:
            fut = self._producer.send(
                self.settings.kafka.dlq_topic, key=key, value=value, headers=headers
            )
        except Exception as exc:  # buffer full, closed: retry later
            self._inbox.put(("dlq", work, exc))
            return
        fut.add_callback(lambda _md, w=work: self._inbox.put(("dlq", w, None)))
        fut.add_errback(lambda exc, w=work: self._inbox.put(("dlq", w, exc)))

    # -- backpressure, commits, gauges ---------------------------------------------------------

    def _update_pause(self) -> None:
        want = (
            bool(self._backlog)
            or bool(self._unsubmitted)
            or len(self._in_flight) >= self.settings.evaluate.max_in_flight
        )
        if want == self._paused:
            return
        parts = list(self._consumer.assignment())
        if want:
            self._consumer.pause(*parts)
            self.counters.add("partitions_paused")
            log.info(
                "consume: paused %d partitions (%d in flight, %d waiting)",
                len(parts),
                len(self._in_flight),
                len(self._backlog),
            )
        else:
            self._consumer.resume(*parts)
            log.info("consume: resumed %d partitions", len(parts))
        self._paused = want

    def _commit(self) -> None:
        """Commit every partition's low watermark that advanced (blocking: consumer thread)."""
        self._last_commit = self._clock()
        offsets = self._offsets.committable()
        if not offsets:
            return
        try:
            self._consumer.commit(_kafka_offsets(offsets))
        except Exception as exc:  # CommitFailedError during a rebalance, a timeout: retry later
            self.counters.add("commit_errors")
            log.warning("commit: %s", exc)
            return
        self._offsets.mark_committed(offsets)
        self.counters.add("commits")

    def _update_gauges(self) -> None:
        lag = commit_lag = 0
        assigned = 0
        for tp in self._consumer.assignment():
            assigned += 1
            hw = self._consumer.highwater(tp)  # from fetch responses: correct on tansu
            if hw is None:
                continue
            pos = self._offsets.position(tp.topic, tp.partition)
            if pos is not None:
                lag += max(0, hw - pos)
            committed = self._offsets.last_committed(tp.topic, tp.partition)
            commit_lag += max(0, hw - (committed if committed is not None else 0))
        self._gauges = {
            "consumer_lag": lag,
            "commit_lag": commit_lag,
            "partitions_assigned": assigned,
            "records_pending": self._offsets.pending_records(),
        }

    # -- rebalance -----------------------------------------------------------------------------

    def _on_revoked(
        self, revoked: Sequence[Any], *, lost: bool = False
    ) -> dict[tuple[str, int], int]:
        """Finish (within a budget) what revoked partitions hold, forget the rest, and return
        the offsets to commit for them (their low watermarks, taken *before* buffered traces
        are forgotten: forgetting releases their records, which must not look done).

        Runs while the consumer thread is blocked in ``poll``/``close`` (kafka-python calls the
        listener from there: on the consumer thread in 2.x, on its network thread in 3.x), so
        it owns the consumer-thread state meanwhile. The caller commits the returned offsets;
        an exception here is re-raised by kafka-python from ``poll`` and stops the scorer.
        ``lost``: the group already dropped this member (session expired, fenced): nothing is
        committed or waited for, and no resume offset is kept (another member may have moved
        the partitions on meanwhile; the group's committed offsets are authoritative again).
        """
        gone = {(tp.topic, tp.partition) for tp in revoked}
        if not gone:
            return {}
        c = self.settings.consumer
        # Heartbeats stop while this blocks (kafka-python 3 runs it on the network loop): wait at
        # most half a session, and not at all when shutting down (the drain already waited;
        # what is left is replayed by the next owner) or when the membership is already lost.
        budget = (
            0.0
            if self._stop.is_set() or lost
            else min(c.revoke_drain_timeout_s, c.session_timeout_ms / 2000.0)
        )
        deadline = self._clock() + budget

        def touches(work: _Work) -> bool:
            return any((r.topic, r.partition) in gone for r in work.refs)

        # Dead-letter retries are left for later: KafkaProducer.send may block up to its
        # max_block_ms on missing metadata, and this wait holds kafka-python's network loop.
        while any(touches(w) for w in self._in_flight.values()) and self._clock() < deadline:
            self._process_inbox(block_s=0.1)
            self._retry_pending(dead_letters=False)
            self._flush_submits()
        # Offsets first: everything below releases records of traces that were NOT written.
        offsets = {} if lost else {
            k: v for k, v in self._offsets.committable().items() if k in gone
        }
        # kafka-python keeps the fetch position of a partition that is assigned to this member
        # again (eager rebalances revoke everything first), but what is forgotten below must be
        # read again: remember where each partition's unfinished records start.
        # A partition this member no longer tracks (revoked twice with no assignment between:
        # kafka-python re-runs the revoke when an assignment fails) keeps the resume offset its
        # first revoke recorded; dropping it would skip the records forgotten back then.
        for key in gone:
            if lost:
                self._resume.pop(key, None)
                continue
            low = self._offsets.low_watermark(*key)
            if low is not None:
                self._resume[key] = low
        # What is still buffered or queued here will be read again by the partitions' next owner.
        # (In-flight traces go on: their rows are written, their references are inert now.)
        for trace in self._assembler.forget(gone):
            self.counters.add("traces_revoked")
            self._offsets.release(trace.refs)
        kept: deque[tuple[_Work, Prepared]] = deque()
        for work, prep in self._backlog:
            if touches(work):
                self.counters.add("traces_revoked")
                self._offsets.release(work.refs)
            else:
                kept.append((work, prep))
        self._backlog = kept
        for key in gone:
            self._offsets.revoke(*key)
        log.info(
            "rebalance: %s %s; resume at %s",
            "lost" if lost else "revoked",
            sorted(gone),
            {f"{t}[{p}]": o for (t, p), o in sorted(self._resume.items()) if (t, p) in gone},
        )
        return offsets

    def _revoke_commit_request(self, offsets: dict[tuple[str, int], int]) -> Any:
        """Send the revoke-time commit without blocking; returns kafka-python's future.

        ``commit_async`` never blocks, so it is allowed on kafka-python 3's network thread.
        Awaited on that loop (``_Rebalance``), it completes before the JoinGroup is sent, so
        the partitions' next owners fetch these offsets. If the coordinator is unknown, the
        returned future is its lookup (it resolves to the coordinator id, where the commit's
        resolves to ``None``) and the commit is sent right after it, still ahead of the
        JoinGroup. Raises what ``commit_async`` raises (not in a group any more).
        """

        def done(_offsets: Any, result: Any) -> None:
            # Called later from whichever thread next polls or commits; the awaited future
            # already reported the outcome (_revoke_commit_result), except after a lookup.
            log.debug("commit (revoke): completed: %r", result)

        return self._consumer.commit_async(_kafka_offsets(offsets), callback=done)

    def _revoke_commit_result(
        self, offsets: dict[tuple[str, int], int], result: Any, exc: BaseException | None
    ) -> None:
        """Count and log the outcome of a revoke-time commit. Same thread rules as
        :meth:`_on_revoked` (the consumer thread is blocked meanwhile), so the counters keep
        their single writer."""
        if exc is not None:
            # A fenced generation or a lost coordinator: the next owner replays these finished
            # records (idempotent rows); a partition given back to this member is committed
            # again from its resume offset (_on_assigned).
            self.counters.add("commit_errors")
            log.warning("commit (revoke): %s not committed: %s", _fmt_offsets(offsets), exc)
        elif result is not None:
            log.info(
                "commit (revoke): %s sent after a coordinator lookup (outcome not awaited)",
                _fmt_offsets(offsets),
            )
        else:
            self.counters.add("commits")
            log.info("commit (revoke): %s", _fmt_offsets(offsets))

    def _commit_revoked_blocking(self, offsets: dict[tuple[str, int], int]) -> None:
        """kafka-python 2.x: the listener runs inside ``poll`` on the consumer thread, where a
        blocking commit is allowed."""
        if not offsets:
            return
        try:
            self._consumer.commit(_kafka_offsets(offsets))
        except Exception as exc:  # CommitFailedError (fenced), timeouts: replayed elsewhere
            self._revoke_commit_result(offsets, None, exc)
        else:
            self._revoke_commit_result(offsets, None, None)

    def _on_assigned(self, assigned: Sequence[Any]) -> None:
        for tp in assigned:
            resume = self._resume.pop((tp.topic, tp.partition), None)
            # Given back to this member: resume where its unfinished records start, and let the
            # next regular commit commit that offset (the revoke commit may not have landed).
            self._offsets.assign(tp.topic, tp.partition, resume_at=resume)
            if resume is not None:
                self._consumer.seek(tp, resume)  # replay what was forgotten at the revoke
        self._resume.clear()  # partitions that went elsewhere: their next owner resumes them
        if self._paused and assigned:
            self._consumer.pause(*assigned)  # new partitions join the paused state
        log.info("rebalance: assigned %s", sorted((tp.topic, tp.partition) for tp in assigned))

    # -- draining ------------------------------------------------------------------------------

    def _drain(self) -> None:
        budget = getattr(self, "_drain_budget", self.settings.drain_timeout_s)
        deadline = self._clock() + budget
        parts = list(self._consumer.assignment())
        if parts:
            self._consumer.pause(*parts)
        # The polls below keep the membership alive and may complete a rebalance: partitions
        # assigned meanwhile join the paused state (_on_assigned), since records returned here
        # would be thrown away.
        self._paused = True
        if self.settings.drain_buffered:
            self._dispatch(self._assembler.pop_ready() + self._assembler.drain())
        while (
            self._in_flight or self._backlog or self._unsubmitted or self._dlq_retry
        ) and self._clock() < deadline:
            self._process_inbox(block_s=0.05)
            self._retry_pending()
            self._dispatch_backlog()
            # Keep the membership alive while draining: poll returns nothing (all paused).
            self._consumer.poll(timeout_ms=0)
        if self._in_flight or self._backlog:
            log.warning(
                "drain: %d traces in flight and %d waiting after %.1fs; they stay "
                "uncommitted and will be replayed",
                len(self._in_flight),
                len(self._backlog),
                budget,
            )
        self._commit()
        self._update_gauges()
        if self._health is not None:
            self._health.maybe_flush(self.stats(), self._labelled(), force=True)

    def _labelled(self) -> dict[str, dict[str, int]]:
        return {
            "traces_unscorable": dict(self._unscorable_by_reason),
            "records_dead_lettered": dict(self._dead_letter_by_reason),
        }

    def _close_clients(self) -> None:
        consumer = self._consumer
        if consumer is not None:
            # close() leaves the group through the revoke listener, whose commit needs
            # self._consumer: it is cleared only once close() returned.
            try:
                consumer.close(autocommit=False)
            except Exception as exc:
                log.warning("consume: close failed: %s", exc)
            finally:
                self._consumer = None
        producer, self._producer = self._producer, None
        if producer is not None:
            try:
                producer.close(timeout=5)
            except Exception as exc:
                log.warning("dead-letter: producer close failed: %s", exc)

    def _run_on_close(self) -> None:
        for fn in self._on_close:
            try:
                fn()
            except Exception:
                log.exception("scorer: closing a component failed")


def _kafka_offsets(offsets: dict[tuple[str, int], int]) -> dict[Any, Any]:
    from kafka.structs import OffsetAndMetadata, TopicPartition

    return {TopicPartition(t, p): OffsetAndMetadata(o, "", -1) for (t, p), o in offsets.items()}


def _fmt_offsets(offsets: dict[tuple[str, int], int]) -> str:
    return ", ".join(f"{t}[{p}]@{o}" for (t, p), o in sorted(offsets.items()))


if AsyncConsumerRebalanceListener is not None:

    class _Rebalance(AsyncConsumerRebalanceListener):  # type: ignore[misc,valid-type]
        """kafka-python 3: awaited on the client's network loop while the consumer thread is
        blocked in ``poll`` (or ``close``), so it may touch the scorer's consumer-thread state.

        The revoke-time commit is awaited here, not blocked on: the loop keeps running (the
        commit's request and response go through it, heartbeats too), and the JoinGroup is only
        sent after this returns, so the commit lands before any other member can be assigned
        the partitions. The wait is bounded by the client's ``request_timeout_ms``; a commit
        that timed out may still land later: never past an unacknowledged row, but possibly
        behind what the next owner committed meanwhile (replays after its next restart).
        """

        def __init__(self, scorer: Scorer) -> None:
            self._scorer = scorer

        async def on_partitions_revoked(self, revoked: Any) -> None:
            offsets = self._scorer._on_revoked(list(revoked))
            if not offsets:
                return
            try:
                result = await self._scorer._revoke_commit_request(offsets)
            except Exception as exc:  # CommitFailedError, RebalanceInProgressError, timeouts
                self._scorer._revoke_commit_result(offsets, None, exc)
            else:
                self._scorer._revoke_commit_result(offsets, result, None)

        async def on_partitions_lost(self, lost: Any) -> None:
            # The group dropped this member: its generation is gone, a commit would be refused
            # and the partitions may already have a new owner. Forget, replay elsewhere.
            self._scorer._on_revoked(list(lost), lost=True)

        async def on_partitions_assigned(self, assigned: Any) -> None:
            self._scorer._on_assigned(list(assigned))

else:

    class _Rebalance(ConsumerRebalanceListener):  # type: ignore[no-redef]
        """kafka-python 2.x: called inside ``poll`` on the consumer thread, where the revoke
        commit may block."""

        def __init__(self, scorer: Scorer) -> None:
            self._scorer = scorer

        def on_partitions_revoked(self, revoked: Any) -> None:
            self._scorer._commit_revoked_blocking(self._scorer._on_revoked(list(revoked)))

        def on_partitions_assigned(self, assigned: Any) -> None:
            self._scorer._on_assigned(list(assigned))


def _consumer_config(s: ScorerSettings) -> dict[str, Any]:
    c = s.consumer
    cfg = s.kafka.client_kwargs()
    cfg.update(
        group_id=c.group_id,
        enable_auto_commit=False,
        # Never "latest": tansu answers ListOffsets(LATEST) wrongly (INFRA.md 1.3), and a new
        # group must not skip traces anyway.
        auto_offset_reset="earliest",
        session_timeout_ms=c.session_timeout_ms,
        heartbeat_interval_ms=c.heartbeat_interval_ms,
        max_poll_interval_ms=c.max_poll_interval_ms,
        max_poll_records=c.max_poll_records,
        max_partition_fetch_bytes=c.max_partition_fetch_bytes,
        fetch_max_bytes=c.fetch_max_bytes,
    )
    cfg["request_timeout_ms"] = max(cfg["request_timeout_ms"], c.session_timeout_ms + 5000)
    return cfg


def _producer_config(s: ScorerSettings) -> dict[str, Any]:
    cfg = s.kafka.client_kwargs()
    cfg.update(
        acks="all",
        compression_type=s.kafka.producer_compression(),
        linger_ms=50,
        max_request_size=s.consumer.max_partition_fetch_bytes + 1024 * 1024,
    )
    return cfg


def _kafka_consumer(cfg: dict[str, Any]) -> Any:
    from kafka import KafkaConsumer

    return KafkaConsumer(**cfg)


def _kafka_producer(cfg: dict[str, Any]) -> Any:
    from kafka import KafkaProducer

    return KafkaProducer(**cfg)
