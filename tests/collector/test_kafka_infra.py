"""The shared Kafka pieces: settings validation, topic provisioning, the tansu broker lifecycle."""

from __future__ import annotations

import socket

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from pydantic import ValidationError

from ragpulse.common import KafkaSettings, ensure_topic
from ragpulse.deploy.broker import TansuBroker
from tests.infra_kafka import unique_topic


def test_settings_defaults_and_validation() -> None:
    s = KafkaSettings()
    assert (s.bootstrap_servers, s.topic, s.dlq_topic, s.compression) == (
        "127.0.0.1:9092",
        "otlp_spans",
        "otlp_spans.dlq",
        "lz4",
    )
    assert KafkaSettings(bootstrap_servers=" a:1 , b:2 ").servers == ["a:1", "b:2"]
    with pytest.raises(ValidationError, match="not host:port"):
        KafkaSettings(bootstrap_servers="localhost")
    with pytest.raises(ValidationError, match="invalid topic"):
        KafkaSettings(topic="spans/with/slash")
    with pytest.raises(ValidationError, match="must differ"):
        KafkaSettings(topic="x", dlq_topic="x")
    with pytest.raises(ValidationError, match="needs sasl_mechanism"):
        KafkaSettings(security_protocol="SASL_SSL")
    with pytest.raises(ValidationError, match="sasl_username"):
        KafkaSettings(security_protocol="SASL_SSL", sasl_mechanism="PLAIN")
    with pytest.raises(ValidationError):
        KafkaSettings(compression="brotli")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        s.topic = "other"  # type: ignore[misc]  # frozen
    sasl = KafkaSettings(
        security_protocol="SASL_SSL", sasl_mechanism="PLAIN", sasl_username="u", sasl_password="s3cr3t-pw"
    )
    kwargs = sasl.client_kwargs()
    assert kwargs["sasl_plain_password"] == "s3cr3t-pw" and "s3cr3t-pw" not in repr(sasl)


def test_broker_round_trip_and_ensure_topic(kafka_broker: TansuBroker) -> None:
    settings = KafkaSettings(bootstrap_servers=kafka_broker.bootstrap, topic=unique_topic())
    assert ensure_topic(settings, partitions=3) is True
    assert ensure_topic(settings, partitions=3) is False  # idempotent
    admin = KafkaAdminClient(**settings.client_kwargs())
    try:
        (described,) = admin.describe_topics([settings.topic])
        assert len(described["partitions"]) == 3
    finally:
        admin.close()

    producer = KafkaProducer(
        **settings.client_kwargs(), acks="all", compression_type=settings.producer_compression()
    )
    producer.send(settings.topic, key=b"k" * 32, value=b"hello").get(timeout=10)
    producer.close()
    consumer = KafkaConsumer(**settings.client_kwargs(), enable_auto_commit=False)
    tps = [TopicPartition(settings.topic, p) for p in range(3)]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    got = []
    for _ in range(20):
        for records in consumer.poll(timeout_ms=500).values():
            got.extend((r.key, r.value) for r in records)
        if got:
            break
    consumer.close()
    assert got == [(b"k" * 32, b"hello")]


def test_broker_lifecycle_frees_port_and_is_idempotent() -> None:
    broker = TansuBroker()
    broker.shutdown()  # safe without start
    broker.start()
    port, pid = broker.port, broker.pid
    assert broker.running and pid is not None
    broker.shutdown()
    broker.shutdown()
    assert not broker.running
    # The process is reaped and the port is bindable again: a restart on it works.
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
    with TansuBroker(port=port) as again:
        assert again.bootstrap == f"127.0.0.1:{port}" and again.running


def test_partition_for_key_matches_sarama_fnv1a() -> None:
    from ragpulse.common import partition_for_key

    # FNV-1a 32 reference values (http://www.isthe.com/chongo/tech/comp/fnv/): "" → 0x811c9dc5,
    # "a" → 0xe40c292c, "foobar" → 0xbf9cf968. As int32 these are negative, so abs() applies.
    assert partition_for_key(b"", 1 << 31) == (1 << 32) - 0x811C9DC5
    assert partition_for_key(b"a", 1000) == ((1 << 32) - 0xE40C292C) % 1000
    assert partition_for_key(b"foobar", 7) == ((1 << 32) - 0xBF9CF968) % 7
    keys = [f"{i:032x}".encode() for i in range(600)]
    assert {partition_for_key(k, 6) for k in keys} == set(range(6))


def test_partitions_for_keys_vectorized_equals_scalar() -> None:
    import random

    from ragpulse.common import partition_for_key, partitions_for_keys

    rng = random.Random(4)
    keys = [rng.randbytes(16).hex().encode() for _ in range(500)]
    for n in (1, 3, 6, 7, 64):
        assert partitions_for_keys(keys, n) == [partition_for_key(k, n) for k in keys]
    assert partitions_for_keys([b"a", b"foobar"], 7) == [partition_for_key(b"a", 7), partition_for_key(b"foobar", 7)]
