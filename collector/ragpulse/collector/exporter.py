"""The export stage: per-trace records → Kafka with librdkafka, through a bounded in-flight queue.

The producer is librdkafka (``confluent-kafka``): handing it a record costs a couple of
microseconds of C, where kafka-python's per-record Python path was most of the collector's CPU
(docs/benchmarks.md). Each record goes to the partition otelcol-contrib's kafka exporter picks
for its trace id (:func:`~ragpulse.common.kafka.partitions_for_keys`), so both collectors
can feed one topic.

The queue is the set of records handed to the producer and not yet acknowledged. Capacity is
reserved in spans and bytes before a request's records are produced and released by the
delivery reports, so memory is bounded no matter how fast clients push. A request that does not
fit is refused as a whole with :class:`QueueFull` (HTTP 429 / gRPC RESOURCE_EXHAUSTED); the OTLP
exporter retries it.

Threads: ``export()`` runs on the receivers' threads; one poll thread serves librdkafka's
delivery reports and error events (confluent-kafka calls them from ``poll()``) and refreshes the
topic's partition count. Kafka trouble is detected from failed deliveries and broker-wide errors;
it opens a small circuit breaker so that later requests get :class:`ExportUnavailable` (503 /
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

from ragpulse.collector.config import CollectorSettings
from ragpulse.collector.kafka import RateLimit
from ragpulse.collector.shrink import shrink_request
from ragpulse.collector.split import TraceRecord, _native, assemble_trace, assemble_traces
from ragpulse.common import KafkaUnavailable
from ragpulse.common import partitions_for_keys as _partitions_for_keys

# otelcol's partition of each key: in C where the collector's C module is built (the same
# numbers: tests/collector/test_native.py), else common.kafka's packed-integer FNV-1a.
partitions_for_keys = _native.partitions_for_keys if _native is not None else _partitions_for_keys

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


class _EveryFewSeconds:
    """A log line at most once per ``interval_s``, with how many were suppressed. Thread-safe."""

    def __init__(self, interval_s: float = 10.0) -> None:
        self._rate = RateLimit(interval_s)

    def warning(self, message: str, *args: object) -> None:
        suppressed = self._rate.admit()
        if suppressed is not None:
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
    """The narrow protocol the receivers' core hands records to. An exporter whose ``assembles``
    attribute is true is given records without values (``split_request(..., assemble=False)``:
    a layout and runs instead) and builds its records itself."""

    def export(self, records: Sequence[TraceRecord]) -> ExportResult:
        """Queue ``records`` or raise :class:`ExportRefused` (the whole request)."""
        ...


# librdkafka error codes that mean "Kafka is unreachable or failing", not "this record is bad".
_OUTAGE_CODES = frozenset({
    "_MSG_TIMED_OUT", "_TIMED_OUT", "_TIMED_OUT_QUEUE", "_TRANSPORT", "_ALL_BROKERS_DOWN",
    "_RESOLVE", "_DESTROY", "_PURGE_QUEUE", "_PURGE_INFLIGHT", "_FATAL", "_UNKNOWN_PARTITION",
    "_UNKNOWN_TOPIC", "UNKNOWN_TOPIC_OR_PART", "LEADER_NOT_AVAILABLE", "NOT_LEADER_FOR_PARTITION",
    "REQUEST_TIMED_OUT", "NETWORK_EXCEPTION", "BROKER_NOT_AVAILABLE", "NOT_ENOUGH_REPLICAS",
    "NOT_ENOUGH_REPLICAS_AFTER_APPEND", "UNKNOWN_PRODUCER_ID", "OUT_OF_ORDER_SEQUENCE_NUMBER",
    "INVALID_PRODUCER_EPOCH", "KAFKA_STORAGE_ERROR",
})


def _is_outage(err: Any) -> bool:
    """A delivery or producer error that concerns Kafka as a whole (open the breaker), as
    opposed to one record (e.g. MSG_SIZE_TOO_LARGE: the record is lost, Kafka is fine)."""
    return bool(err.fatal() or err.retriable() or err.name() in _OUTAGE_CODES)


class _Request:
    """One request's records in the producer, and their delivery reports.

    A report of a delivered record costs one call of :meth:`report` (a bound method, no
    ``functools.partial`` per record) and a decrement under this object's own lock; the last
    report settles the whole request with the exporter under its lock once (queue room, counters),
    instead of the exporter's lock and five counters per record. A failed record is settled at
    once (:meth:`KafkaExporter._on_failed`). With ``confirm="ack"`` the request's thread waits on
    ``done``.
    """

    __slots__ = ("_by_key", "done", "error", "exporter", "failed", "failed_bytes", "failed_spans",
                 "lock", "partitions", "pending", "records", "size", "spans")

    def __init__(self, exporter: KafkaExporter, records: list[TraceRecord], partitions: list[int],
                 spans: int, size: int, ack: bool) -> None:
        self.exporter = exporter
        self.records = records
        self.partitions = partitions  # each record's partition
        self.spans, self.size = spans, size
        self.pending = len(records)  # reports still due (records not handed over are taken off)
        self.failed = self.failed_spans = self.failed_bytes = 0
        self.error: str | None = None
        self.done = threading.Event() if ack else None
        self.lock = threading.Lock()
        self._by_key: dict[bytes, TraceRecord] | None = None

    def record_of(self, msg: Any) -> TraceRecord | None:
        """The record a failed delivery report is about: by its key (a request has one
        per-trace record per trace id), or, unkeyed (per partition), by its partition and
        value."""
        if msg is None:
            return None
        key = msg.key()
        if key:
            if self._by_key is None:
                self._by_key = {r.key: r for r in self.records}
            return self._by_key.get(key)
        partition, value = msg.partition(), msg.value()
        for record, target in zip(self.records, self.partitions):
            if target == partition and record.value == value:
                return record
        return None

    def report(self, err: Any, msg: Any) -> None:
        """librdkafka's delivery report of one record (the poll thread, or flush())."""
        exporter = self.exporter
        if err is not None:
            exporter._on_failed(self, err, msg)
        elif exporter._failing_since is not None:
            exporter._on_recovered()
        with self.lock:  # taken_off(1), inlined: one Python call less per record
            self.pending -= 1
            last = self.pending == 0
        if last:
            exporter._settle(self)
            if self.done is not None:
                self.done.set()

    def taken_off(self, count: int) -> None:
        """``count`` reports arrived (or will never come: records not handed over)."""
        with self.lock:
            self.pending -= count
            last = self.pending == 0
        if last:
            self.exporter._settle(self)
            if self.done is not None:
                self.done.set()


class KafkaExporter:
    """Produces per-trace records to ``settings.kafka.topic`` with librdkafka.

    ``export()`` is thread-safe and called concurrently by the receivers; it never blocks on
    Kafka except with ``confirm="ack"``, where it waits until Kafka acknowledged the request's
    records (at most ``ack_timeout_s``). ``start()`` creates the topic if configured, connects
    and reads the topic's partitions; it raises :class:`~ragpulse.common.kafka.KafkaUnavailable`
    when the cluster cannot be reached within ``kafka.bootstrap_timeout_ms``. ``shutdown()`` is
    idempotent, safe without ``start()``, refuses new work at once and flushes what was accepted
    for up to ``drain_timeout_s``.
    """

    def __init__(
        self,
        settings: CollectorSettings,
        *,
        producer_factory: Callable[[dict[str, Any]], Any] | None = None,
    ) -> None:
        self._settings = settings
        self._kafka = settings.kafka
        self._topic = settings.kafka.topic
        self._max_spans = settings.queue.max_spans
        self._max_bytes = settings.queue.max_bytes
        self._retry_after_s = settings.otlp.retry_after_s
        self._per_partition = settings.producer.records == "per_partition"
        #: export() takes records without values (``split_request(..., assemble=False)``) and
        #: builds the per-partition records from their layout, skipping a message per trace.
        self.assembles = self._per_partition
        self._producer_factory = producer_factory
        self._producer: Any = None
        self._partitions = 0
        self._lock = threading.Lock()
        self._closed = False
        self._queued_spans = 0
        self._queued_bytes = 0
        self._failing_since: float | None = None
        self._fatal = False
        self._last_probe = 0.0
        self._last_error = ""
        self._refusals = _EveryFewSeconds()
        self._rebuilding = False
        self._last_rebuild = 0.0
        self._rebuild_after_s = max(2.0 * settings.producer.delivery_timeout_ms / 1000.0, float(self._retry_after_s))
        self._poller: threading.Thread | None = None
        self._stop_polling = threading.Event()
        self._stats = {
            "producers_rebuilt": 0,
            "records_sent": 0,
            "records_acked": 0,
            "records_failed": 0,
            "records_rejected": 0,
            "records_truncated": 0,
            "attribute_values_truncated": 0,
            "list_items_dropped": 0,
            "spans_acked": 0,
            "spans_failed": 0,
            "spans_refused_queue_full": 0,
            "spans_refused_unavailable": 0,
            "bytes_acked": 0,
        }

    # lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        """Create the topic if configured, connect the producer, read the partition count and
        start the poll thread. Blocks up to ``kafka.bootstrap_timeout_ms`` (+ topic creation)."""
        with self._lock:
            if self._closed:
                raise RuntimeError("exporter was shut down")
            if self._producer is not None:
                return
        producer, partitions = self._connect()
        with self._lock:
            self._producer, self._partitions = producer, partitions
        self._poller = threading.Thread(target=self._poll_loop, name="kafka-export-poll", daemon=True)
        self._poller.start()

    def _connect(self) -> tuple[Any, int]:
        """A new producer and the topic's partition count. Blocks; raises KafkaUnavailable."""
        from ragpulse.collector.kafka import RDKAFKA_LOG, ensure_topic_rdkafka, topic_partitions

        p = self._settings.producer
        conf = self._kafka.rdkafka_config()
        if p.create_topic:
            ensure_topic_rdkafka(self._kafka, p.partitions)
        conf.update({
            "acks": {"all": -1, "1": 1, "0": 0}[p.acks],
            "enable.idempotence": p.idempotent,
            "compression.type": self._kafka.compression,
            "linger.ms": p.linger_ms,
            "batch.size": p.batch_size,
            # The request size bounds a whole batch; records are checked against
            # p.max_request_size in export() so one oversized trace cannot fail a batch.
            "message.max.bytes": max(p.max_request_size, p.batch_size) + 65_536,
            "message.timeout.ms": p.delivery_timeout_ms,
            "request.timeout.ms": min(self._kafka.request_timeout_ms, p.delivery_timeout_ms - p.linger_ms - 1),
            # This exporter's own queue (spans, bytes) is the bound: librdkafka's must be larger.
            "queue.buffering.max.messages": max(100_000, self._max_spans + 1),
            "queue.buffering.max.kbytes": min(2_097_151, self._max_bytes // 1024 + 65_536),
            "error_cb": self._on_producer_error,
        })
        factory = self._producer_factory
        if factory is None:
            from confluent_kafka import Producer

            def factory(c: dict[str, Any]) -> Any:
                return Producer(c, logger=RDKAFKA_LOG)

        producer = factory(conf)
        try:
            partitions = topic_partitions(producer, self._topic, self._kafka.bootstrap_timeout_ms / 1000)
        except BaseException:
            producer.flush(0)
            raise
        return producer, partitions

    def _poll_loop(self) -> None:
        """Serve delivery reports and error events; refresh the partition count now and then."""
        from ragpulse.collector.kafka import topic_partitions

        refresh_at = time.monotonic() + _PARTITION_REFRESH_S
        while not self._stop_polling.is_set():
            producer = self._producer
            if producer is None:
                return
            try:
                producer.poll(0.05)
            except Exception:  # a callback bug must not end the thread that serves the rest
                log.exception("export: delivery report handling failed")
            now = time.monotonic()
            if now >= refresh_at:
                refresh_at = now + _PARTITION_REFRESH_S
                try:
                    n = topic_partitions(producer, self._topic, 1.0)
                except Exception:  # Kafka down: deliveries fail and open the breaker
                    continue
                with self._lock:
                    if n != self._partitions:
                        log.warning("export: topic %s now has %d partitions (was %d)",
                                    self._topic, n, self._partitions)
                    self._partitions = n

    def _maybe_rebuild(self, now: float) -> None:
        """Replace a producer that cannot recover by itself. Run on its own thread, started by
        the probe request (blocks on Kafka up to its bootstrap timeout; the request does not).

        librdkafka reconnects and retries by itself; what it cannot leave is a fatal error (the
        idempotent producer's state lost, e.g. a broker restarted without its producer state as
        tansu's memory storage does). A producer that has failed for longer than
        ``2 * delivery_timeout`` is replaced too. The old one's pending records are purged: their
        reports count them as failed, and their clients already got 503 or will retry.
        """
        with self._lock:
            old = self._producer
            if old is None or self._closed or self._rebuilding:
                return
            stale = self._failing_since is not None and now - self._failing_since > self._rebuild_after_s
            if not (self._fatal or stale) or now - self._last_rebuild < self._rebuild_after_s:
                return
            self._rebuilding = True
            self._last_rebuild = now
        try:
            new, partitions = self._connect()
        except Exception as exc:  # Kafka still down: keep refusing, try again later
            log.warning("export: cannot rebuild the producer yet: %s", exc)
            with self._lock:
                self._rebuilding = False
            return
        with self._lock:
            self._rebuilding = False
            if self._closed:
                new.flush(0)
                return
            self._producer, self._partitions, self._fatal = new, partitions, False
            self._stats["producers_rebuilt"] += 1
        log.warning("export: replaced the Kafka producer after unrecoverable failures")
        _purge(old)

    def shutdown(self, drain_timeout_s: float = 10.0) -> None:
        """Refuse new records, flush accepted ones (bounded by ``drain_timeout_s``), close."""
        with self._lock:
            self._closed = True
            producer = self._producer
        if producer is None:
            return
        self._stop_polling.set()
        if self._poller is not None:
            self._poller.join(timeout=5)
        left = producer.flush(drain_timeout_s)  # serves the remaining delivery reports too
        if left:
            log.warning("export: %d record(s) not acknowledged at shutdown", left)
        _purge(producer)  # what is left fails now; the reports count it
        with self._lock:
            self._producer = None

    # hot path -------------------------------------------------------------------------------

    def export(self, records: Sequence[TraceRecord]) -> ExportResult:
        """Hand one request's trace records to the producer. Thread-safe; blocks only with
        ``confirm="ack"`` (until Kafka acknowledges or ``ack_timeout_s``). Raises
        :class:`QueueFull` (429) or :class:`ExportUnavailable` (503); a record over the Kafka
        record limit is cut to fit, or rejected (counted, reported as partial success)."""
        if records and records[0].value is None:  # from split_request(..., assemble=False)
            direct = self._export_assembled(records)
            if direct is not None:
                return direct
            records = [TraceRecord(r.key, assemble_trace(*r.layout), r.spans, r.rag)  # type: ignore[misc]
                       for r in records]
        keep, spans, size, rejected_spans, message = self._fit(records)
        producer, partitions = self._admit(spans, size)
        # Partition as otelcol does (FNV-1a, sarama-compatible), not librdkafka's own
        # partitioners (its fnv1a takes the hash unsigned: other partitions).
        targets = partitions_for_keys([r.key for r in keep], partitions)
        if self._per_partition:
            units, targets = self._group(keep, targets)
        else:
            units = keep
        request = _Request(self, units, targets, spans, size,
                           self._settings.producer.confirm == "ack" and bool(keep))
        self._produce(producer, units, targets, request, keyed=not self._per_partition)
        if request.done is not None:
            self._await(request)
        return ExportResult(
            accepted_spans=spans,
            rejected_spans=rejected_spans,
            message=message,
            accepted_records=len(keep),
        )

    def _export_assembled(self, records: Sequence[TraceRecord]) -> ExportResult | None:
        """Per-partition records built straight from the request's layout (the traces of
        ``records``, all from one :func:`split_request` with ``assemble=False``): per partition
        one ``ExportTraceServiceRequest`` with each resource and scope once and the spans of
        every trace the partition gets. No per-trace message is built, fitted and joined. Returns
        None where this does not apply, and the caller takes the per-trace way: a request larger
        than the record limit (one of its records could be too), or a partition count that
        changed while the records were built."""
        layout = records[0].layout[0]  # type: ignore[index]
        partitions = self._partitions
        if (not self._per_partition or not partitions
                or layout.size > self._settings.producer.max_request_size - _RECORD_OVERHEAD):
            return None
        # Partition as otelcol does for the keyed record (see export()).
        by_partition: dict[int, list[list]] = {}
        for rec, partition in zip(records, partitions_for_keys([r.key for r in records], partitions)):
            if partition in by_partition:
                by_partition[partition].append(rec.layout[1])  # type: ignore[index]
            else:
                by_partition[partition] = [rec.layout[1]]  # type: ignore[index]
        units = [TraceRecord(b"", assemble_traces(layout, entries), sum([e[0] for e in entries]), True)
                 for entries in by_partition.values()]
        targets = list(by_partition)
        spans = sum([r.spans for r in records])
        size = sum([len(u.value) for u in units])  # type: ignore[arg-type]
        producer, admitted = self._admit(spans, size)
        if admitted != partitions:  # the topic changed meanwhile (rare): start over
            with self._lock:
                self._queued_spans -= spans
                self._queued_bytes -= size
            return None
        request = _Request(self, units, targets, spans, size, self._settings.producer.confirm == "ack")
        self._produce(producer, units, targets, request, keyed=False)
        if request.done is not None:
            self._await(request)
        return ExportResult(accepted_spans=spans, accepted_records=len(records))

    def _fit(self, records: Sequence[TraceRecord]) -> tuple[list[TraceRecord], int, int, int, str]:
        """The records that fit the Kafka record limit (the longest attribute values of an
        oversized one cut), their spans and value bytes, the spans of those that cannot, and the
        partial-success message."""
        limit = self._settings.producer.max_request_size
        keep: list[TraceRecord] = []
        spans = size = rejected_spans = truncated = 0
        for rec in records:
            room = limit - len(rec.key) - _RECORD_OVERHEAD
            n = len(rec.value)
            if n > room:
                shrunk = shrink_request(rec.value, room)
                with self._lock:
                    self._stats["records_truncated" if shrunk.value else "records_rejected"] += 1
                    self._stats["attribute_values_truncated"] += shrunk.values_cut
                    self._stats["list_items_dropped"] += shrunk.items_dropped
                if shrunk.value is None:
                    rejected_spans += rec.spans
                    continue
                truncated += 1
                rec = TraceRecord(rec.key, shrunk.value, rec.spans, rec.rag)
                n = len(rec.value)
            keep.append(rec)
            spans += rec.spans
            size += n
        messages = []
        if rejected_spans:
            messages.append(f"{rejected_spans} span(s) in traces larger than the {limit}-byte "
                            "Kafka record limit")
        if truncated:  # accepted, with a warning (OTLP partial success with 0 rejected)
            messages.append(f"{truncated} trace(s) over the {limit}-byte Kafka record limit "
                            "had their longest attribute values truncated or the last items "
                            "of their lists (contexts, messages, events) dropped")
        return keep, spans, size, rejected_spans, "; ".join(messages)

    def _group(self, keep: list[TraceRecord],
               targets: list[int]) -> tuple[list[TraceRecord], list[int]]:
        """``producer.records=per_partition``: one record per partition holding the traces of
        ``keep`` that go there (their values joined: an ``ExportTraceServiceRequest`` is a
        repeated field, so the concatenation is one request with all their resource spans), in
        request order; a partition's traces beyond the record limit go on in another record.
        Returns the records and their partitions; :meth:`_produce` sends them without a key."""
        by_partition: dict[int, list[TraceRecord]] = {}
        for rec, partition in zip(keep, targets):
            if partition in by_partition:
                by_partition[partition].append(rec)
            else:
                by_partition[partition] = [rec]
        room = self._settings.producer.max_request_size - _RECORD_OVERHEAD
        units: list[TraceRecord] = []
        unit_targets: list[int] = []
        for partition, group in by_partition.items():
            if len(group) == 1:
                units.append(group[0])
                unit_targets.append(partition)
                continue
            values = [rec.value for rec in group]
            if sum(map(len, values)) <= room:  # the usual case: one record
                units.append(TraceRecord(b"", b"".join(values), sum([r.spans for r in group]), True))
                unit_targets.append(partition)
                continue
            start, size = 0, 0
            for i, value in enumerate(values):
                if i > start and size + len(value) > room:  # each trace alone fits (_fit)
                    units.append(_joined(group[start:i]))
                    unit_targets.append(partition)
                    start, size = i, 0
                size += len(value)
            units.append(_joined(group[start:]))
            unit_targets.append(partition)
        return units, unit_targets

    def _admit(self, spans: int, size: int) -> tuple[Any, int]:
        """Reserve queue room for ``spans``/``size`` and return the producer and partition
        count to use, or raise: unavailable while Kafka is failing (one request per
        ``retry_after_s`` goes through as a probe), queue full otherwise."""
        now = time.monotonic()
        with self._lock:
            probe = (
                self._failing_since is not None
                and now - self._last_probe >= self._retry_after_s
                and not self._closed
            )
        if probe:  # in the background: a request never waits for Kafka metadata round trips
            threading.Thread(target=self._maybe_rebuild, args=(now,), daemon=True,
                             name="kafka-producer-rebuild").start()
        with self._lock:
            producer, partitions = self._producer, self._partitions
            if self._closed or producer is None:
                self._stats["spans_refused_unavailable"] += spans
                raise ExportUnavailable("collector is shutting down", self._retry_after_s)
            if self._failing_since is not None:
                if now - self._last_probe < self._retry_after_s:
                    self._stats["spans_refused_unavailable"] += spans
                    self._refusals.warning("export: Kafka unavailable, refusing with 503: %s", self._last_error)
                    raise ExportUnavailable(f"Kafka unavailable: {self._last_error}", self._retry_after_s)
                self._last_probe = now  # let this request through as a probe
            if not partitions:  # metadata without the topic (e.g. a broker that just restarted)
                self._stats["spans_refused_unavailable"] += spans
                raise ExportUnavailable(f"no partitions known for topic {self._topic!r}",
                                        self._retry_after_s)
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
        return producer, partitions

    def _produce(self, producer: Any, keep: list[TraceRecord], targets: list[int],
                 request: _Request, *, keyed: bool = True) -> None:
        """Produce the admitted records, each to its partition (``targets``): the one otelcol
        picks for its trace id; keyed by it, or (per-partition records) without a key."""
        sent = 0
        try:
            produce, report, topic = producer.produce, request.report, self._topic
            if keyed:
                for rec, partition in zip(keep, targets):
                    produce(topic, rec.value, rec.key, partition, report)
                    sent += 1
            else:
                for rec, partition in zip(keep, targets):
                    produce(topic, rec.value, None, partition, report)
                    sent += 1
        except (BufferError, Exception) as exc:
            # librdkafka's own queue is full (BufferError) or the producer is gone (a concurrent
            # rebuild or shutdown): release what was not handed over and refuse the rest. Records
            # already produced stay in flight; the client's retry may duplicate them
            # (at-least-once).
            unsent = keep[sent:]
            unsent_spans = sum(r.spans for r in unsent)
            with self._lock:
                self._queued_spans -= unsent_spans
                self._queued_bytes -= sum(len(r.value) for r in unsent)
                self._stats["records_sent"] += sent
                self._stats["spans_refused_unavailable"] += unsent_spans
            # Their reports will never come; the request settles with the records sent.
            request.records = keep[:sent]
            request.partitions = targets[:sent]
            request.spans -= unsent_spans
            request.size -= sum(len(r.value) for r in unsent)
            if unsent:
                request.taken_off(len(unsent))
            if isinstance(exc, BufferError):
                raise QueueFull(f"Kafka producer queue full: {exc}", self._retry_after_s) from exc
            if not _is_kafka_error(exc):
                raise  # a bug, not Kafka: the receiver answers 500
            raise ExportUnavailable(f"Kafka unavailable: {exc}", self._retry_after_s) from exc
        with self._lock:
            self._stats["records_sent"] += sent

    def _await(self, request: _Request) -> None:
        assert request.done is not None
        if not request.done.wait(self._settings.producer.ack_timeout_s):
            raise ExportUnavailable("Kafka did not acknowledge in time", self._retry_after_s)
        if request.error is not None:
            raise ExportUnavailable(f"Kafka did not acknowledge: {request.error}", self._retry_after_s)

    # producer callbacks (poll thread) ----------------------------------------------------------

    def _settle(self, request: _Request) -> None:
        """Every record of ``request`` was reported: release the delivered ones' queue room
        (failed ones were released by :meth:`_on_failed`) and count them."""
        delivered = len(request.records) - request.failed
        spans = request.spans - request.failed_spans
        size = request.size - request.failed_bytes
        with self._lock:
            self._queued_spans -= spans
            self._queued_bytes -= size
            stats = self._stats
            stats["records_acked"] += delivered
            stats["spans_acked"] += spans
            stats["bytes_acked"] += size

    def _on_recovered(self) -> None:
        """A record was acknowledged while the breaker is open: close it (unless fatal)."""
        with self._lock:
            if self._failing_since is not None and not self._fatal:
                log.info("export: Kafka acknowledges again after %.1fs", time.monotonic() - self._failing_since)
                self._failing_since = None

    def _on_failed(self, request: _Request, err: Any, msg: Any) -> None:
        """A record of ``request`` was not delivered: release it, count it, maybe open the breaker."""
        rec = request.record_of(msg)
        spans = rec.spans if rec is not None else 0
        size = len(rec.value) if rec is not None else 0
        outage = _is_outage(err)
        with request.lock:
            request.failed += 1
            request.failed_spans += spans
            request.failed_bytes += size
            request.error = request.error or f"{err.name()}: {err.str()}"
        with self._lock:
            self._queued_spans -= spans
            self._queued_bytes -= size
            self._stats["records_failed"] += 1
            self._stats["spans_failed"] += spans
            first = outage and self._failing_since is None
            if outage:
                self._mark_failing(err)
        if first:
            log.error("export: record delivery failed, refusing requests until Kafka recovers: %s", err.str())
        elif not outage:
            # A record-level, permanent error (e.g. the broker's own size limit): the record is
            # lost but Kafka is up, so the breaker stays closed.
            self._refusals.warning("export: record rejected by Kafka: %s: %s", err.name(), err.str())

    def _on_producer_error(self, err: Any) -> None:
        """librdkafka's error events: all brokers down, a fatal idempotence error, ..."""
        if err.fatal():
            with self._lock:
                self._fatal = True
                self._mark_failing(err)
            log.error("export: the Kafka producer failed fatally: %s", err.str())
        elif err.name() == "_ALL_BROKERS_DOWN":
            with self._lock:
                self._mark_failing(err)
            self._refusals.warning("export: Kafka unreachable: %s", err.str())
        else:
            log.debug("export: Kafka client event: %s", err.str())

    def _mark_failing(self, err: Any) -> None:
        # caller holds self._lock
        if self._failing_since is None:
            self._failing_since = time.monotonic()
            self._last_probe = self._failing_since
        self._last_error = f"{err.name()}: {err.str()}" if hasattr(err, "str") else str(err)

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


_PARTITION_REFRESH_S = 30.0


def _joined(group: list[TraceRecord]) -> TraceRecord:
    """One unkeyed record holding every trace of ``group`` (see :meth:`KafkaExporter._group`)."""
    return TraceRecord(b"", b"".join([rec.value for rec in group]),
                       sum(rec.spans for rec in group), True)


def _is_kafka_error(exc: BaseException) -> bool:
    from confluent_kafka import KafkaException

    return isinstance(exc, (KafkaException, KafkaUnavailable, RuntimeError))


def _purge(producer: Any) -> None:
    """Fail whatever ``producer`` still holds, now, and serve those reports."""
    try:
        producer.purge()
        producer.flush(0)
    except Exception as exc:  # a broken producer may fail to purge; it is dropped anyway
        log.warning("export: discarding the old producer: %s", exc)
