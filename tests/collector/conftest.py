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
        "producer": {"partitions": 3},
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


def read_records(settings: KafkaSettings, expected: int, timeout_s: float = 20.0) -> list[Any]:
    """All records of ``settings.topic`` from the beginning, once at least ``expected`` arrived.

    Uses assign + seek_to_beginning (no group, no ListOffsets: both are unreliable on tansu).
    """
    consumer = KafkaConsumer(**settings.client_kwargs(), enable_auto_commit=False)
    try:
        partitions = consumer.partitions_for_topic(settings.topic) or set()
        tps = [TopicPartition(settings.topic, p) for p in sorted(partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
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
