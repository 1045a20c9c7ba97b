"""The exporter's delivery-report accounting (one ``_Request`` per request, issue 20), against a
fake librdkafka producer: queue room, counters, the breaker and ``confirm="ack"`` must come out
as they did with one report callback per record, whatever the order and outcome of the reports."""

from __future__ import annotations

import random
import threading
import time
from types import SimpleNamespace
from typing import Any

import pytest

from ragpulse.collector.config import CollectorSettings
from ragpulse.collector.exporter import ExportUnavailable, KafkaExporter, QueueFull
from ragpulse.collector.split import TraceRecord
from ragpulse.common import partition_for_key


class FakeError:
    def __init__(self, name: str, retriable: bool = False) -> None:
        self._name, self._retriable = name, retriable

    def name(self) -> str:
        return self._name

    def str(self) -> str:
        return f"fake {self._name}"

    def fatal(self) -> bool:
        return False

    def retriable(self) -> bool:
        return self._retriable


class FakeMessage:
    def __init__(self, key: bytes | None, partition: int = 0, value: bytes = b"") -> None:
        self._key, self._partition, self._value = key, partition, value

    def key(self) -> bytes | None:
        return self._key

    def partition(self) -> int:
        return self._partition

    def value(self) -> bytes:
        return self._value


class FakeProducer:
    """Keeps produced records; the test delivers their reports (as librdkafka's poll would)."""

    def __init__(self, conf: dict[str, Any], buffer_after: int | None = None) -> None:
        self.conf = conf
        self.pending: list[tuple[bytes, int, Any]] = []
        self.values: list[tuple[bytes | None, int, bytes]] = []  # every record produced
        self.buffer_after = buffer_after
        self.produced = 0
        self.lock = threading.Lock()

    def list_topics(self, topic: str, timeout: float) -> Any:
        return SimpleNamespace(topics={topic: SimpleNamespace(error=None, partitions={0: 0, 1: 1, 2: 2})})

    def produce(self, topic: str, value: bytes, key: bytes, partition: int, callback: Any) -> None:
        if self.buffer_after is not None and self.produced >= self.buffer_after:
            raise BufferError("Local: Queue full")
        self.produced += 1
        with self.lock:
            self.pending.append((key, partition, callback))
            self.values.append((key, partition, value))

    def deliver(self, outcome: Any = lambda key: None, shuffle: bool = True,
                by_partition: bool = False) -> int:
        """Every pending report, the error ``outcome(key)`` (or ``outcome(partition)``)."""
        with self.lock:
            todo, self.pending = self.pending, []
            values = {(key, partition): value for key, partition, value in self.values}
        if shuffle:
            random.Random(7).shuffle(todo)
        for key, partition, callback in todo:
            callback(outcome(partition if by_partition else key),
                     FakeMessage(key, partition, values[(key, partition)]))
        return len(todo)

    def poll(self, timeout: float) -> int:
        time.sleep(min(timeout, 0.01))
        return 0

    def flush(self, timeout: float = 0) -> int:
        return len(self.pending)

    def purge(self) -> None:
        self.deliver(lambda key: FakeError("_PURGE_QUEUE"))


def _exporter(confirm: str = "enqueue", buffer_after: int | None = None,
              **producer: Any) -> tuple[KafkaExporter, list[FakeProducer]]:
    made: list[FakeProducer] = []

    def factory(conf: dict[str, Any]) -> FakeProducer:
        made.append(FakeProducer(conf, buffer_after))
        return made[-1]

    settings = CollectorSettings.model_validate({
        "otlp": {"http_port": 0, "grpc_port": 0},
        "kafka": {"bootstrap_servers": "127.0.0.1:1", "topic": "t"},
        "producer": {"create_topic": False, "confirm": confirm, "ack_timeout_s": 5,
                     "records": "per_trace", **producer},
    })
    exporter = KafkaExporter(settings, producer_factory=factory)
    exporter.start()
    return exporter, made


def _records(n: int, seed: int = 0) -> list[TraceRecord]:
    rng = random.Random(seed)
    return [TraceRecord(rng.randbytes(16).hex().encode(), rng.randbytes(rng.randrange(10, 300)), rng.randrange(1, 9), True)
            for _ in range(n)]


def test_delivered_requests_release_their_room_and_count_once() -> None:
    exporter, (producer,) = _exporter()
    try:
        requests = [_records(20, seed=i) for i in range(5)]
        for records in requests:
            assert exporter.export(records).accepted_records == 20
        stats = exporter.stats()
        assert stats["queue_spans"] == sum(r.spans for rs in requests for r in rs) and stats["records_sent"] == 100
        assert producer.deliver() == 100
        stats = exporter.stats()
        assert stats["queue_spans"] == 0 and stats["queue_bytes"] == 0
        assert stats["records_acked"] == 100
        assert stats["spans_acked"] == sum(r.spans for rs in requests for r in rs)
        assert stats["bytes_acked"] == sum(len(r.value) for rs in requests for r in rs)
    finally:
        exporter.shutdown(0.1)


def test_failed_records_are_released_counted_and_open_then_close_the_breaker() -> None:
    exporter, (producer,) = _exporter()
    try:
        records = _records(10, seed=1)
        exporter.export(records)
        failing = {r.key for r in records[7:]}  # the last three reports (an acknowledgement
        # after a failure closes the breaker again, as it did with one callback per record)
        producer.deliver(lambda key: FakeError("_MSG_TIMED_OUT", retriable=True) if key in failing else None,
                         shuffle=False)
        stats = exporter.stats()
        assert stats["queue_spans"] == 0 and stats["queue_bytes"] == 0
        assert stats["records_failed"] == 3 and stats["spans_failed"] == sum(r.spans for r in records[7:])
        assert stats["records_acked"] == 7 and stats["spans_acked"] == sum(r.spans for r in records[:7])
        assert not exporter.healthy and stats["kafka_unavailable"] == 1
        with pytest.raises(ExportUnavailable):  # the breaker is open: refused at once
            exporter.export(_records(1, seed=2))
        exporter._last_probe = 0.0  # the retry_after_s wait is over: the next request is the probe
        exporter.export(_records(2, seed=3))
        producer.deliver()
        assert exporter.healthy and exporter.stats()["queue_spans"] == 0
    finally:
        exporter.shutdown(0.1)


def test_a_record_level_error_does_not_open_the_breaker() -> None:
    exporter, (producer,) = _exporter()
    try:
        records = _records(4, seed=4)
        exporter.export(records)
        producer.deliver(lambda key: FakeError("MSG_SIZE_TOO_LARGE") if key == records[0].key else None)
        stats = exporter.stats()
        assert exporter.healthy and stats["records_failed"] == 1 and stats["records_acked"] == 3
        assert stats["queue_spans"] == 0 and stats["queue_bytes"] == 0
    finally:
        exporter.shutdown(0.1)


def test_producer_queue_full_mid_request_settles_the_records_sent() -> None:
    exporter, (producer,) = _exporter(buffer_after=3)
    try:
        records = _records(8, seed=5)
        with pytest.raises(QueueFull):
            exporter.export(records)
        stats = exporter.stats()
        assert stats["records_sent"] == 3 and stats["queue_spans"] == sum(r.spans for r in records[:3])
        assert stats["spans_refused_unavailable"] == sum(r.spans for r in records[3:])
        producer.deliver()
        stats = exporter.stats()
        assert stats["queue_spans"] == 0 and stats["queue_bytes"] == 0 and stats["records_acked"] == 3
    finally:
        exporter.shutdown(0.1)


@pytest.mark.parametrize("fail", [False, True])
def test_confirm_ack_waits_for_every_report(fail: bool) -> None:
    exporter, (producer,) = _exporter(confirm="ack")
    try:
        records = _records(6, seed=6)
        outcome: list[Any] = []

        def call() -> None:
            try:
                outcome.append(exporter.export(records))
            except ExportUnavailable as exc:
                outcome.append(exc)

        thread = threading.Thread(target=call)
        thread.start()
        while len(producer.pending) < 6:
            time.sleep(0.01)
        producer.deliver(shuffle=False, outcome=lambda key: None)  # not yet: only the first five
        thread.join(0.2)
        assert not thread.is_alive() and outcome[0].accepted_records == 6
        outcome.clear()
        thread = threading.Thread(target=call)
        thread.start()
        while len(producer.pending) < 6:
            time.sleep(0.01)
        with producer.lock:
            first, producer.pending = producer.pending[:5], producer.pending[5:]
        for key, _, callback in first:
            callback(FakeError("MSG_SIZE_TOO_LARGE") if fail and key == records[0].key else None, FakeMessage(key))
        thread.join(0.2)
        assert thread.is_alive()  # one report is still due
        producer.deliver()
        thread.join(5)
        assert isinstance(outcome[0], ExportUnavailable) if fail else outcome[0].accepted_records == 6
        assert exporter.stats()["queue_spans"] == 0
    finally:
        exporter.shutdown(0.1)


def test_per_partition_records_hold_a_requests_traces_of_one_partition() -> None:
    """Issue 41, item 3: one unkeyed record per partition, holding (joined, in request order)
    the per-trace values that the keyed records would have put in that partition."""
    exporter, (producer,) = _exporter(records="per_partition")
    try:
        records = _records(20, seed=8)
        result = exporter.export(records)
        assert result.accepted_records == 20 and result.accepted_spans == sum(r.spans for r in records)
        by_partition: dict[int, list[TraceRecord]] = {}
        for rec in records:
            by_partition.setdefault(partition_for_key(rec.key, 3), []).append(rec)
        assert sorted((p, v) for _, p, v in producer.values) == sorted(
            (p, b"".join(r.value for r in recs)) for p, recs in by_partition.items())
        assert all(key is None for key, _, _ in producer.values)
        assert producer.deliver() == len(by_partition) == exporter.stats()["records_sent"]
        stats = exporter.stats()
        assert stats["records_acked"] == len(by_partition) and stats["queue_spans"] == 0
        assert stats["spans_acked"] == sum(r.spans for r in records) and stats["queue_bytes"] == 0
    finally:
        exporter.shutdown(0.1)


def test_a_failed_per_partition_record_fails_every_trace_in_it() -> None:
    exporter, (producer,) = _exporter(records="per_partition")
    try:
        records = _records(12, seed=9)
        exporter.export(records)
        lost = [r for r in records if partition_for_key(r.key, 3) == 1]
        assert lost
        producer.deliver(lambda partition: FakeError("MSG_SIZE_TOO_LARGE") if partition == 1 else None,
                         by_partition=True)
        stats = exporter.stats()
        assert stats["records_failed"] == 1 and stats["spans_failed"] == sum(r.spans for r in lost)
        assert stats["spans_acked"] == sum(r.spans for r in records) - stats["spans_failed"]
        assert stats["queue_spans"] == 0 and stats["queue_bytes"] == 0
    finally:
        exporter.shutdown(0.1)


def test_per_partition_records_stay_within_the_record_limit() -> None:
    """A partition's traces that together pass producer.max_request_size go on in another
    record; each trace is in exactly one record, in request order."""
    exporter, (producer,) = _exporter(records="per_partition", max_request_size=16_384)
    try:
        rng = random.Random(10)
        records = [TraceRecord(rng.randbytes(16).hex().encode(), bytes([i]) * 3000, 2, True)
                   for i in range(30)]
        exporter.export(records)
        assert all(len(v) <= 16_384 for _, _, v in producer.values)
        assert len(producer.values) > 3
        for partition in range(3):
            mine = [r.value for r in records if partition_for_key(r.key, 3) == partition]
            got = b"".join(v for _, p, v in producer.values if p == partition)
            assert got == b"".join(mine)
        producer.deliver()
        assert exporter.stats()["spans_acked"] == 60 and exporter.stats()["queue_bytes"] == 0
    finally:
        exporter.shutdown(0.1)


@pytest.mark.parametrize(("confirm", "producer", "linger"), [
    ("enqueue", {}, 50),  # the answer never waits for Kafka: fill batches longer
    ("ack", {}, 5),  # every request waits out the linger
    ("enqueue", {"linger_ms": 0}, 0),
    ("ack", {"linger_ms": 20}, 20),
])
def test_the_linger_default_follows_confirm_and_reaches_librdkafka(
        confirm: str, producer: dict[str, Any], linger: int) -> None:
    exporter, (made,) = _exporter(confirm, **producer)
    try:
        assert made.conf["linger.ms"] == linger
        assert made.conf["request.timeout.ms"] < 30_000 - linger
    finally:
        exporter.shutdown(0.1)


def _trace_partitions(values: list[tuple[bytes | None, int, bytes]]) -> dict[str, set[int]]:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    where: dict[str, set[int]] = {}
    for _, partition, value in values:
        for rs in ExportTraceServiceRequest.FromString(value).resource_spans:
            for ss in rs.scope_spans:
                for span in ss.spans:
                    where.setdefault(span.trace_id.hex(), set()).add(partition)
    return where


def test_per_partition_records_built_from_the_layout() -> None:
    """The default form takes records without values (split_request(..., assemble=False)) and
    builds one record per partition from the request's layout: every trace in the partition its
    id picks, each span once, within the request's size; counted and settled as before."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    from ragpulse.collector.split import split_request
    from testkit.payloads import rag_request

    exporter, (producer,) = _exporter(records="per_partition")
    assert exporter.assembles
    try:
        body = rag_request(20, seed=3, services=3).SerializeToString()
        records = split_request(body, assemble=False).records
        result = exporter.export(records)
        assert result.accepted_records == 20 and result.accepted_spans == sum(r.spans for r in records)
        assert all(key is None for key, _, _ in producer.values)
        assert len(producer.values) == len({partition_for_key(r.key, 3) for r in records}) <= 3
        assert all(len(v) <= len(body) for _, _, v in producer.values)
        where = _trace_partitions(producer.values)
        assert where == {r.key.decode(): {partition_for_key(r.key, 3)} for r in records}
        spans = [s.SerializeToString() for _, _, v in producer.values
                 for rs in ExportTraceServiceRequest.FromString(v).resource_spans
                 for ss in rs.scope_spans for s in ss.spans]
        want = [s.SerializeToString() for rs in ExportTraceServiceRequest.FromString(body).resource_spans
                for ss in rs.scope_spans for s in ss.spans]
        assert sorted(spans) == sorted(want)
        assert exporter.stats()["queue_bytes"] == sum(len(v) for _, _, v in producer.values)
        assert producer.deliver() == len(producer.values)
        stats = exporter.stats()
        assert stats["queue_spans"] == stats["queue_bytes"] == 0
        assert stats["spans_acked"] == result.accepted_spans
    finally:
        exporter.shutdown(0.1)


def test_a_request_over_the_record_limit_takes_the_per_trace_way() -> None:
    """A request larger than producer.max_request_size (one partition's record could be too):
    the records are built per trace, fitted (an oversized trace's values cut) and grouped as
    before, so no record passes the limit."""
    from ragpulse.collector.split import split_request
    from testkit.payloads import rag_request

    exporter, (producer,) = _exporter(records="per_partition", max_request_size=16_384)
    try:
        request = rag_request(40, seed=4, words=400)
        body = request.SerializeToString()
        assert len(body) > 16_384
        records = split_request(body, assemble=False).records
        result = exporter.export(records)
        assert result.accepted_records == 40
        assert all(len(v) <= 16_384 for _, _, v in producer.values)
        where = _trace_partitions(producer.values)
        assert where == {r.key.decode(): {partition_for_key(r.key, 3)} for r in records}
        producer.deliver()
        assert exporter.stats()["queue_bytes"] == 0
    finally:
        exporter.shutdown(0.1)


def test_per_trace_records_are_assembled_by_the_split() -> None:
    exporter, _ = _exporter(records="per_trace")
    try:
        assert not exporter.assembles
    finally:
        exporter.shutdown(0.1)
