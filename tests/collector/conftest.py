"""Collector fixtures: a started collector on free loopback ports in front of a real tansu broker,
and a kafka-python reader for what it produced."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kafka import KafkaConsumer, TopicPartition

from ragpulse.collector.config import CollectorSettings
from ragpulse.collector.service import Collector, build_collector
from ragpulse.common import KafkaSettings
from ragpulse.deploy.broker import TansuBroker
from tests.infra_kafka import unique_topic


def collector_settings(bootstrap: str, topic: str, **overrides: Any) -> CollectorSettings:
    """Test settings: free ports, small partitions count, overrides per section."""
    sections: dict[str, dict[str, Any]] = {
        "otlp": {"http_port": 0, "grpc_port": 0},
        "kafka": {"bootstrap_servers": bootstrap, "topic": topic},
        # Per-trace records (otelcol's partition_traces_by_id format): these tests read one
        # record per trace; the per-partition default has its own (test_record_forms.py,
        # test_exporter_reports.py, and the CLI tests run it).
        "producer": {"partitions": 3, "records": "per_trace"},
    }
    for section, values in overrides.items():
        sections.setdefault(section, {}).update(values)
    # Built from explicit values only: RAGPULSE_* variables of the developer's shell must not leak in.
    return CollectorSettings.model_validate(sections)


@pytest.fixture
def make_collector(kafka_broker: TansuBroker) -> Iterator[Callable[..., Collector]]:
    """Factory: ``make_collector(otlp={...}, producer={...})`` → a started collector on its own topic."""
    started: list[Collector] = []

    def make(**overrides: Any) -> Collector:
        settings = collector_settings(kafka_broker.bootstrap, unique_topic("spans"), **overrides)
        collector = build_collector(settings).start()
        started.append(collector)
        return collector

    yield make
    for collector in started:
        collector.shutdown(drain_timeout_s=2.0)


def _from_the_beginning(settings: KafkaSettings) -> KafkaConsumer:
    """A consumer assigned every partition of ``settings.topic`` at its first offset: assign +
    seek_to_beginning (no group, no ListOffsets: both are unreliable on tansu)."""
    consumer = KafkaConsumer(**settings.client_kwargs(), enable_auto_commit=False)
    try:
        partitions = consumer.partitions_for_topic(settings.topic) or set()
        tps = [TopicPartition(settings.topic, p) for p in sorted(partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
    except BaseException:
        consumer.close()
        raise
    return consumer


def read_records(settings: KafkaSettings, expected: int, timeout_s: float = 20.0) -> list[Any]:
    """All records of ``settings.topic`` from the beginning, once at least ``expected`` arrived
    (:func:`_from_the_beginning`)."""
    consumer = _from_the_beginning(settings)
    try:
        records: list[Any] = []
        deadline = time.monotonic() + timeout_s
        while len(records) < expected and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=300).values():
                records.extend(batch)
        # One more short poll: extra (unexpected) records must show up in the assertions too.
        for batch in consumer.poll(timeout_ms=300).values():
            records.extend(batch)
        return records
    finally:
        consumer.close()


def read_traces(settings: KafkaSettings, expected: int, timeout_s: float = 20.0) -> dict[str, list[int]]:
    """Trace id (hex) -> the partition of each of its spans, from every record of
    ``settings.topic`` (whatever the record form: per trace or per partition), once at least
    ``expected`` traces arrived and the topic has no more records (three empty polls), or
    ``timeout_s`` passed (:func:`_from_the_beginning`)."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    consumer = _from_the_beginning(settings)
    try:
        where: dict[str, list[int]] = {}
        deadline = time.monotonic() + timeout_s
        idle = 0
        while time.monotonic() < deadline and (len(where) < expected or idle < 3):
            batches = consumer.poll(timeout_ms=300)
            idle = 0 if batches else idle + 1
            for batch in batches.values():
                for record in batch:
                    for rs in ExportTraceServiceRequest.FromString(record.value).resource_spans:
                        for ss in rs.scope_spans:
                            for span in ss.spans:
                                where.setdefault(span.trace_id.hex(), []).append(record.partition)
        return where
    finally:
        consumer.close()
