"""Shared pieces of the scorer-service tests: a real tansu broker (one per module, topics and
groups unique per test), real chDB (the session directory, a database per test), and judges that
implement the Judge protocol for real (a fact table, and one gated by an event)."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

from ragpulse.common import KafkaSettings, ensure_topic
from ragpulse.scorer import Fact
from ragpulse.scorer.judges.base import Needs
from ragpulse.scorer.model import Finding, Sample
from ragpulse.scorer.pipeline import ScorerSettings
from ragpulse.scorer.store import ScoreWriter, WriterSettings

from ..doubles import TableJudge

METRICS = ("faithfulness", "answer_relevancy", "context_precision")

FACTS = {
    Fact.STATEMENTS: ["The warranty covers parts.", "It lasts years."],
    Fact.STATEMENT_SUPPORT: [1, 0],
    Fact.QUESTION_SIMILARITY: {"questions": ["q"], "similarities": [0.8], "noncommittal": False},
    Fact.CONTEXT_USEFUL: [1, 0],
}


def table_judge() -> TableJudge:
    return TableJudge(FACTS)


class GatedJudge(TableJudge):
    """A table judge whose answers wait until ``open()`` (to hold work in flight)."""

    def __init__(self) -> None:
        super().__init__(FACTS)
        self._gate = threading.Event()
        self.waiting = 0

    def open(self) -> None:
        self._gate.set()

    async def gather(self, sample: Sample, needs: Needs) -> dict[Fact, Finding]:
        self.waiting += 1
        while not self._gate.is_set():
            await asyncio.sleep(0.01)  # a judge waiting on its model; the loop stays free
        return await super().gather(sample, needs)


def wait_for(pred: Callable[[], bool], timeout_s: float = 60.0, what: str = "condition") -> None:
    """Poll ``pred`` until true; fail after ``timeout_s`` (a bound, not a timing claim)."""
    deadline = time.monotonic() + timeout_s
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@pytest.fixture
def topic(kafka_broker_module: Any) -> str:
    """A fresh 3-partition spans topic on the module's broker."""
    name = f"spans_{uuid.uuid4().hex[:8]}"
    ensure_topic(
        KafkaSettings(
            bootstrap_servers=kafka_broker_module.bootstrap, topic=name, dlq_topic=f"{name}.dlq"
        ),
        partitions=3,
    )
    return name


@pytest.fixture
def make_settings(
    kafka_broker_module: Any, topic: str, rag_schema: Any
) -> Callable[..., ScorerSettings]:
    def make(**over: Any) -> ScorerSettings:
        base: dict[str, Any] = {
            "kafka": {
                "bootstrap_servers": kafka_broker_module.bootstrap,
                "topic": topic,
                "dlq_topic": f"{topic}.dlq",
            },
            # Short sessions make tansu's group join ~1 s instead of ~3 s (INFRA.md 1.3).
            "consumer": {
                "group_id": f"g_{uuid.uuid4().hex[:8]}",
                "session_timeout_ms": 2000,
                "heartbeat_interval_ms": 500,
                "commit_interval_s": 0.2,
            },
            "assembly": {"grace_s": 0.3, "max_wait_s": 5.0},
            "evaluate": {"metrics": list(METRICS)},
            "database": rag_schema.database,
            "drain_timeout_s": 20.0,
            "status_interval_s": 0.5,
        }
        for k, v in over.items():
            if isinstance(v, dict) and isinstance(base.get(k), dict):
                base[k] = {**base[k], **v}
            else:
                base[k] = v
        return ScorerSettings.model_validate(base)

    return make


@pytest.fixture
def writer(chdb_client: Any, rag_schema: Any) -> Iterator[ScoreWriter]:
    w = ScoreWriter(chdb_client, rag_schema.database, WriterSettings(flush_interval_s=0.1))
    w.start()
    yield w
    w.shutdown(10)


def produce(
    bootstrap: str,
    topic: str,
    records: Sequence[tuple[bytes | None, bytes]],
    partition: int | None = None,
) -> None:
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap, compression_type="lz4", acks="all", linger_ms=5)
    try:
        for key, value in records:
            p.send(topic, key=key, value=value, partition=partition)
        p.flush(30)
    finally:
        p.close(5)


def committed(bootstrap: str, group: str) -> dict[int, int]:
    """The group's committed offsets per partition (empty when nothing was committed)."""
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        got = admin.list_group_offsets({group: None}).get(group, {})
    except Exception:
        return {}
    finally:
        admin.close()
    return {tp.partition: om.offset for tp, om in got.items() if om.offset >= 0}


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    """Records per partition, counted by reading the topic (tansu's ListOffsets is wrong)."""
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        parts = [TopicPartition(topic, p) for p in sorted(c.partitions_for_topic(topic) or ())]
        c.assign(parts)
        c.seek_to_beginning(*parts)
        out = {tp.partition: 0 for tp in parts}
        idle = 0
        while idle < 3:
            batch = c.poll(timeout_ms=300)
            if not batch:
                idle += 1
            for tp, recs in batch.items():
                out[tp.partition] = max(out[tp.partition], recs[-1].offset + 1)
        return out
    finally:
        c.close()
