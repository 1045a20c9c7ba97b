"""The export stage: per-trace records → Kafka, through a bounded in-flight queue.

The queue is the set of records handed to the kafka-python producer and not yet acknowledged
(kafka-python 3 has no ``buffer_memory`` bound of its own). Capacity is reserved in spans and
bytes before a request's records are sent and released by the producer's delivery callbacks, so
memory is bounded no matter how fast clients push. A request that does not fit is refused as a
whole with :class:`QueueFull` (HTTP 429 / gRPC RESOURCE_EXHAUSTED); the OTLP exporter retries it.

Kafka trouble is detected from delivery failures and from metadata timeouts in ``send()``; it
opens a small circuit breaker so that later requests get :class:`ExportUnavailable` (503 /
UNAVAILABLE) at once instead of piling into the producer. After ``retry_after_s`` one request is
let through as a probe; the first acknowledged record closes the breaker again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from kafka.errors import IllegalStateError, KafkaError, KafkaTimeoutError, UnknownError

from ragpulse.collector.config import CollectorSettings
from ragpulse.collector.kafka import ensure_topic, partitions_for_keys
from ragpulse.collector.shrink import shrink_request
from ragpulse.collector.split import TraceRecord

__all__ = [
    "ExportRefused",
    "ExportResult",
    "ExportUnavailable",
    "KafkaExporter",
    "QueueFull",
    "TraceExporter",
]

log = logging.getLogger(__name__)

# Bytes a record costs in a v2 record batch beyond key and value (varints, attributes, ...):
# used to reject a record that the producer would refuse as too large before reserving it.
_RECORD_OVERHEAD = 64


def _is_outage(exc: BaseException) -> bool:
    """Retriable Kafka errors (timeouts, connection loss, leader changes) mean "unavailable";
    so do errors without a specific Kafka error code (what kafka-python raises when the producer
    itself has failed, e.g. a fatal InitProducerId error). Permanent errors with a code concern a
    single record or request and must not refuse everybody's traffic."""
    return (
        bool(getattr(exc, "retriable", False))
        or isinstance(exc, KafkaTimeoutError)
        or type(exc) in (KafkaError, UnknownError, IllegalStateError)
    )


def _producer_is_fatal(producer: Any) -> bool:
    """Whether kafka-python's producer is in its terminal fatal-error state.

    kafka-python has no public accessor; this reads its transaction manager defensively and
    says False when the attribute is missing (a different version or producer class).
    """
    manager = getattr(producer, "_transaction_manager", None)
    check = getattr(manager, "has_fatal_error", None)
    try:
        return bool(check()) if callable(check) else False
    except Exception:
        return False


class _EveryFewSeconds:
    """A log line at most once per ``interval_s``, with how many were suppressed. Thread-safe."""

    def __init__(self, interval_s: float = 10.0) -> None:
        self._interval_s = interval_s
        self._next = 0.0
        self._suppressed = 0
        self._lock = threading.Lock()

    def warning(self, message: str, *args: object) -> None:
        now = time.monotonic()
        with self._lock:
            if now < self._next:
                self._suppressed += 1
                return
            suppressed, self._suppressed = self._suppressed, 0
            self._next = now + self._interval_s
        log.warning(message + " (%d similar suppressed)", *args, suppressed)


class ExportRefused(Exception):
    """Retryable refusal of a whole request; nothing of it was accepted."""

    def __init__(self, message: str, retry_after_s: int) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class QueueFull(ExportRefused):
    """The in-flight queue has no room for the request (HTTP 429, gRPC RESOURCE_EXHAUSTED)."""


class ExportUnavailable(ExportRefused):
    """Kafka is unreachable or the exporter is shutting down (HTTP 503, gRPC UNAVAILABLE)."""


@dataclass(frozen=True, slots=True)
class ExportResult:
    """What happened to the records of one request that were not refused as a whole."""

    accepted_spans: int
    rejected_spans: int = 0  # permanently: e.g. a trace larger than the largest Kafka record
    message: str = ""
    accepted_records: int = 0


class TraceExporter(Protocol):
    """The narrow protocol the receivers' core hands records to."""

    def export(self, records: Sequence[TraceRecord]) -> ExportResult:
        """Queue ``records`` or raise :class:`ExportRefused` (the whole request)."""
        ...


class KafkaExporter:
    """Produces per-trace records to ``settings.kafka.topic`` with kafka-python.

    ``export()`` is thread-safe and called concurrently by the receivers; it blocks only for
    topic metadata (at most ``producer.max_block_ms``) or, with ``confirm="ack"``, until Kafka
    acknowledged the request's records. ``start()`` raises ``kafka.errors.KafkaTimeoutError``
    when the cluster cannot be reached. ``shutdown()`` is idempotent, safe without ``start()``,
    refuses new work at once and flushes what was accepted for up to ``drain_timeout_s``.
    """

    def __init__(
        self,
        settings: CollectorSettings,
        *,
        producer_factory: Callable[..., Any] | None = None,
    ) -> None:
        self._settings = settings
        self._kafka = settings.kafka
        self._topic = settings.kafka.topic
        self._max_spans = settings.queue.max_spans
        self._max_bytes = settings.queue.max_bytes
        self._retry_after_s = settings.otlp.retry_after_s
        self._producer_factory = producer_factory
        self._producer: Any = None
        self._lock = threading.Lock()
        self._closed = False
        self._queued_spans = 0
        self._queued_bytes = 0
        self._failing_since: float | None = None
        self._last_probe = 0.0
        self._last_error = ""
        self._refusals = _EveryFewSeconds()
        self._rebuilding = False
        self._last_rebuild = 0.0
        self._rebuild_after_s = max(2.0 * settings.producer.delivery_timeout_ms / 1000.0, float(self._retry_after_s))
        self._stats = {
            "producers_rebuilt": 0,
            "records_sent": 0,
            "records_acked": 0,
            "records_failed": 0,
            "records_rejected": 0,
            "records_truncated": 0,
            "attribute_values_truncated": 0,
            "spans_acked": 0,
            "spans_failed": 0,
            "spans_refused_queue_full": 0,
            "spans_refused_unavailable": 0,
            "bytes_acked": 0,
        }

    # lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        """Create the topic if configured, then connect the producer. Blocks up to ~30 s."""
        with self._lock:
            if self._closed:
                raise RuntimeError("exporter was shut down")
            if self._producer is not None:
                return
        self._producer = self._connect()

    def _connect(self) -> Any:
        """A new producer (and the topic, if configured). Blocks; raises KafkaError when Kafka
        cannot be reached within ``kafka.bootstrap_timeout_ms``."""
        p = self._settings.producer
        if p.create_topic:
            ensure_topic(self._kafka, p.partitions)
        factory = self._producer_factory
        if factory is None:
            from kafka import KafkaProducer

            factory = KafkaProducer
        kwargs = self._kafka.client_kwargs()
        # kafka-python requires delivery_timeout_ms > linger_ms + request_timeout_ms.
        kwargs["request_timeout_ms"] = min(self._kafka.request_timeout_ms, p.delivery_timeout_ms - p.linger_ms - 1)
        return factory(
            **kwargs,
            acks="all" if p.acks == "all" else int(p.acks),
            enable_idempotence=p.idempotent,
            compression_type=self._kafka.producer_compression(),
            linger_ms=p.linger_ms,
            batch_size=p.batch_size,
            # The producer's own limit covers a whole request of batches; records are checked
            # against p.max_request_size in export() so one oversized trace cannot fail a batch.
            max_request_size=max(p.max_request_size, p.batch_size) + 65_536,
            delivery_timeout_ms=p.delivery_timeout_ms,
            max_block_ms=p.max_block_ms,
        )

    def _maybe_rebuild(self, now: float) -> None:
        """Replace a producer that cannot recover by itself. Called by the probe request.

        kafka-python's idempotent producer enters a fatal state when InitProducerId fails (seen
        when a broker restarts without its producer state, as tansu's memory storage does) and
        then aborts every batch forever; any producer that has failed for longer than
        ``2 * delivery_timeout`` gets the same treatment. The old producer is closed at once:
        its pending records fail (counted) and their clients already got 503 or will retry.
        """
        with self._lock:
            old = self._producer
            if old is None or self._closed or self._rebuilding:
                return
            stale = self._failing_since is not None and now - self._failing_since > self._rebuild_after_s
            if not (_producer_is_fatal(old) or stale) or now - self._last_rebuild < self._rebuild_after_s:
                return
            self._rebuilding = True
            self._last_rebuild = now
        try:
            new = self._connect()
        except Exception as exc:  # Kafka still down: keep refusing, try again later
            log.warning("export: cannot rebuild the producer yet: %s", exc)
            with self._lock:
                self._rebuilding = False
            return
        with self._lock:
            self._rebuilding = False
            if self._closed:
                replaced, swap = new, False
            else:
                replaced, self._producer, swap = old, new, True
                self._stats["producers_rebuilt"] += 1
        log.warning("export: replaced the Kafka producer after unrecoverable failures")
        try:
            # Fails the old producer's pending batches at once (their errbacks count them).
            (replaced if swap else new).close(timeout=0)
        except Exception as exc:  # a broken producer may fail to close cleanly; it is dropped anyway
            log.warning("export: closing the replaced producer: %s", exc)

    def shutdown(self, drain_timeout_s: float = 10.0) -> None:
        """Refuse new records, flush accepted ones (bounded by ``drain_timeout_s``), close."""
        with self._lock:
            self._closed = True
            producer, self._producer = self._producer, None
        if producer is None:
            return
        try:
            producer.flush(timeout=drain_timeout_s)
        except Exception as exc:  # KafkaTimeoutError: what is left is counted by close()
            log.warning("export: flush incomplete at shutdown: %s", exc)
        # close() fails the remaining batches, whose errbacks count them as failed.
        producer.close(timeout=max(1.0, drain_timeout_s / 2))

    # hot path -------------------------------------------------------------------------------

    def export(self, records: Sequence[TraceRecord]) -> ExportResult:
        limit = self._settings.producer.max_request_size
        keep: list[TraceRecord] = []
        rejected_spans = truncated = 0
        for rec in records:
            room = limit - len(rec.key) - _RECORD_OVERHEAD
            if len(rec.value) > room:
                # Cut the longest attribute values rather than lose the whole trace.
                shrunk = shrink_request(rec.value, room)
                with self._lock:
                    self._stats["records_truncated" if shrunk.value else "records_rejected"] += 1
                    self._stats["attribute_values_truncated"] += shrunk.values_cut
                if shrunk.value is None:
                    rejected_spans += rec.spans
                    continue
                truncated += 1
                rec = TraceRecord(rec.key, shrunk.value, rec.spans, rec.rag)
            keep.append(rec)
        messages = []
        if rejected_spans:
            messages.append(f"{rejected_spans} span(s) in traces larger than the {limit}-byte "
                            "Kafka record limit")
        if truncated:  # accepted, with a warning (OTLP partial success with 0 rejected)
            messages.append(f"{truncated} trace(s) over the {limit}-byte Kafka record limit "
                            "had their longest attribute values truncated")
        message = "; ".join(messages)
        spans = sum(r.spans for r in keep)
        size = sum(len(r.value) for r in keep)
        now = time.monotonic()
        producer = self._producer
        if producer is not None and _producer_is_fatal(producer):
            with self._lock:
                if self._failing_since is None:
                    self._mark_failing(RuntimeError("producer in a fatal error state"))
        with self._lock:
            probe = (
                self._failing_since is not None
                and now - self._last_probe >= self._retry_after_s
                and not self._closed
            )
        if probe:
            self._maybe_rebuild(now)
        with self._lock:
            producer = self._producer
            if self._closed or producer is None:
                self._stats["spans_refused_unavailable"] += spans
                raise ExportUnavailable("collector is shutting down", self._retry_after_s)
            if self._failing_since is not None:
                if now - self._last_probe < self._retry_after_s:
                    self._stats["spans_refused_unavailable"] += spans
                    self._refusals.warning("export: Kafka unavailable, refusing with 503: %s", self._last_error)
                    raise ExportUnavailable(f"Kafka unavailable: {self._last_error}", self._retry_after_s)
                self._last_probe = now  # let this request through as a probe
            # A request larger than the whole queue is still taken when the queue is empty (it is
            # bounded by the body limits), otherwise it could never be delivered at all.
            over = self._queued_spans + spans > self._max_spans or self._queued_bytes + size > self._max_bytes
            if over and (self._queued_spans or self._queued_bytes):
                self._stats["spans_refused_queue_full"] += spans
                self._refusals.warning(
                    "export: queue full (%d spans, %d bytes), refusing with 429",
                    self._queued_spans, self._queued_bytes,
                )
                raise QueueFull(
                    f"export queue full ({self._queued_spans} spans, {self._queued_bytes} bytes queued)",
                    self._retry_after_s,
                )
            self._queued_spans += spans
            self._queued_bytes += size
        futures = []
        sent = 0
        try:
            # Partition as otelcol does (FNV-1a, sarama-compatible), not kafka-python's murmur2.
            partitions = producer.partitions_for(self._topic)
            if not partitions:  # metadata without the topic (e.g. a broker that just restarted)
                raise KafkaTimeoutError(f"no partitions known for topic {self._topic!r}")
            targets = partitions_for_keys([r.key for r in keep], len(partitions))
            for rec, partition in zip(keep, targets):
                fut = producer.send(self._topic, key=rec.key, value=rec.value, partition=partition)
                sent += 1
                fut.add_callback(self._on_ack, rec.spans, len(rec.value))
                fut.add_errback(self._on_error, rec.spans, len(rec.value))
                futures.append(fut)
        except Exception as exc:
            # Metadata timeout (Kafka down before we knew the partitions) or producer closed by a
            # concurrent shutdown: release what was not handed over and refuse the rest. Records
            # already sent stay in flight; the client's retry may duplicate them (at-least-once).
            unsent = keep[sent:]
            kafka_error = isinstance(exc, KafkaError)
            with self._lock:
                self._queued_spans -= sum(r.spans for r in unsent)
                self._queued_bytes -= sum(len(r.value) for r in unsent)
                if kafka_error:
                    self._stats["spans_refused_unavailable"] += sum(r.spans for r in unsent)
                    if _is_outage(exc):
                        self._mark_failing(exc)
            if not kafka_error:
                raise  # a bug, not Kafka: the receiver answers 500
            raise ExportUnavailable(f"Kafka unavailable: {exc}", self._retry_after_s) from exc
        with self._lock:
            self._stats["records_sent"] += sent
        if self._settings.producer.confirm == "ack":
            self._await(futures)
        return ExportResult(
            accepted_spans=spans,
            rejected_spans=rejected_spans,
            message=message,
            accepted_records=len(keep),
        )

    def _await(self, futures: list[Any]) -> None:
        deadline = time.monotonic() + self._settings.producer.ack_timeout_s
        for fut in futures:
            try:
                fut.get(timeout=max(0.0, deadline - time.monotonic()))
            except Exception as exc:
                raise ExportUnavailable(f"Kafka did not acknowledge: {exc}", self._retry_after_s) from exc

    # producer callbacks (sender thread) --------------------------------------------------------

    def _on_ack(self, spans: int, size: int, _metadata: Any) -> None:
        with self._lock:
            self._queued_spans -= spans
            self._queued_bytes -= size
            self._stats["records_acked"] += 1
            self._stats["spans_acked"] += spans
            self._stats["bytes_acked"] += size
            if self._failing_since is not None:
                log.info("export: Kafka acknowledges again after %.1fs", time.monotonic() - self._failing_since)
                self._failing_since = None

    def _on_error(self, spans: int, size: int, exc: BaseException) -> None:
        outage = _is_outage(exc)
        with self._lock:
            self._queued_spans -= spans
            self._queued_bytes -= size
            self._stats["records_failed"] += 1
            self._stats["spans_failed"] += spans
            first = outage and self._failing_since is None
            if outage:
                self._mark_failing(exc)
        if first:
            log.error("export: record delivery failed, refusing requests until Kafka recovers: %s", exc)
        elif not outage:
            # A record-level, permanent error (e.g. the broker's own size limit): the record is
            # lost but Kafka is up, so the breaker stays closed.
            self._refusals.warning("export: record rejected by Kafka: %s: %s", type(exc).__name__, exc)

    def _mark_failing(self, exc: BaseException) -> None:
        # caller holds self._lock
        if self._failing_since is None:
            self._failing_since = time.monotonic()
            self._last_probe = self._failing_since
        self._last_error = f"{type(exc).__name__}: {exc}"

    # introspection ------------------------------------------------------------------------------

    @property
    def healthy(self) -> bool:
        """False while the circuit breaker is open (recent delivery failures)."""
        with self._lock:
            return self._failing_since is None and not self._closed

    def stats(self) -> dict[str, int]:
        """Counters since start plus the current queue depth. Thread-safe snapshot."""
        with self._lock:
            out = dict(self._stats)
            out["queue_spans"] = self._queued_spans
            out["queue_bytes"] = self._queued_bytes
            out["kafka_unavailable"] = int(self._failing_since is not None)
            return out
