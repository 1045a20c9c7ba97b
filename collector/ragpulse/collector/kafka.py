"""Topic helpers for the collector's Kafka client, librdkafka (``confluent-kafka``).

The settings, the kafka-python topic provisioning and the partitioner are the shared contract in
:mod:`ragpulse.common.kafka`; this module adds what a librdkafka process needs so it does not
load a second Kafka client library.
"""

from __future__ import annotations

import logging
from typing import Any

from ragpulse.common import KafkaSettings, KafkaUnavailable, TopicError

__all__ = ["ensure_topic_rdkafka", "topic_partitions"]

log = logging.getLogger(__name__)


def topic_partitions(client: Any, topic: str, timeout_s: float) -> int:
    """The partition count of ``topic`` as a librdkafka client (producer or admin) sees it; 0
    when the cluster answers without the topic. Blocks up to ``timeout_s``; raises
    :class:`KafkaUnavailable` when the cluster does not answer."""
    from confluent_kafka import KafkaException

    try:
        meta = client.list_topics(topic, timeout=timeout_s)
    except KafkaException as exc:
        raise KafkaUnavailable(f"Kafka did not answer within {timeout_s:g} s: {exc}") from None
    info = meta.topics.get(topic)
    if info is None or info.error is not None:
        return 0
    return len(info.partitions)


def ensure_topic_rdkafka(settings: KafkaSettings, partitions: int, *, topic: str | None = None,
                         replication_factor: int = 1) -> bool:
    """:func:`ensure_topic` for processes whose Kafka client is librdkafka (the collector), so
    they need no second client library. Same contract: ``True`` when this call created the
    topic, :class:`TopicError` when creation is refused, :class:`KafkaUnavailable` when the
    cluster does not answer within ``settings.bootstrap_timeout_ms``."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    name = topic or settings.topic
    timeout_s = settings.bootstrap_timeout_ms / 1000
    admin = AdminClient(settings.rdkafka_config())
    existing = topic_partitions(admin, name, timeout_s)
    if existing:
        if existing < partitions:
            log.warning("topic %s exists with %d partitions (< %d requested); leaving it as is",
                        name, existing, partitions)
        return False
    future = admin.create_topics([NewTopic(name, partitions, replication_factor)],
                                 request_timeout=timeout_s)[name]
    try:
        future.result(timeout=timeout_s + 5)
    except KafkaException as exc:
        err = exc.args[0] if exc.args else None
        if getattr(err, "name", lambda: "")() == "TOPIC_ALREADY_EXISTS":
            return False
        if err is not None and (err.retriable() or err.name().startswith("_")):
            raise KafkaUnavailable(f"cannot create topic {name!r}: {err.str()}") from None
        raise TopicError(f"cannot create topic {name!r}: {exc}") from None
    except TimeoutError:
        raise KafkaUnavailable(f"creating topic {name!r} timed out") from None
    log.info("created topic %s with %d partitions", name, partitions)
    return True
