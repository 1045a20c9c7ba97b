"""Topic helpers for the collector's Kafka client, librdkafka (``confluent-kafka``).

The settings, the kafka-python topic provisioning and the partitioner are the shared contract in
:mod:`ragpulse.common.kafka`; this module adds what a librdkafka process needs so it does not
load a second Kafka client library.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from typing import Any

from ragpulse.common import KafkaSettings, KafkaUnavailable, TopicError

__all__ = ["RDKAFKA_LOG", "RateLimit", "RdkafkaLog", "ensure_topic_rdkafka", "topic_partitions"]

log = logging.getLogger(__name__)

# A librdkafka FAIL line: "[thrd:HOST:PORT/bootstrap]: HOST:PORT/bootstrap: Connect to
# ipv4#HOST:PORT failed: Connection refused (after 0ms in state CONNECT)"
_FAIL = re.compile(r"(?:\[thrd:[^\]]*\]: )?(?P<broker>[^\s/\[\]]+:\d+)/\S+: (?P<what>.*)")


class RateLimit:
    """Lets an event through at most once per ``interval_s`` and counts the ones held back, for
    log lines that would otherwise repeat many times a second. Thread-safe; never blocks
    beyond its own short lock."""

    def __init__(self, interval_s: float) -> None:
        self._interval_s = interval_s
        self._next = 0.0
        self._suppressed = 0
        self._lock = threading.Lock()

    def admit(self) -> int | None:
        """``None`` while held back; otherwise how many were held back since the last one."""
        now = time.monotonic()
        with self._lock:
            if now < self._next:
                self._suppressed += 1
                return None
            suppressed, self._suppressed = self._suppressed, 0
            self._next = now + self._interval_s
        return suppressed


class RdkafkaLog(logging.Logger):
    """librdkafka's log lines (``Producer(..., logger=)``, ``AdminClient(..., logger=)``; served
    by the client's ``poll``), routed through ragpulse's logging instead of librdkafka's own
    stderr printer. While a broker is unreachable librdkafka reports every reconnect, about
    every 50 ms: those become one clear line, ``waiting for Kafka at HOST:PORT: connection
    refused; retrying``, at most once per ``interval_s`` with the count of repeats. Every other
    line is DEBUG. Thread-safe."""

    def __init__(self, name: str, interval_s: float = 10.0) -> None:
        super().__init__(name)
        self.parent = log
        self._rate = RateLimit(interval_s)

    def log(self, level: int, msg: object, *args: object, **kwargs: Any) -> None:
        """Called from the client's ``poll``, on the thread that polls: a FAIL line becomes the
        rate-limited "waiting for Kafka" warning, every other line DEBUG."""
        # confluent-kafka calls log(level, "%s [%s] %s", facility, client name, text)
        if len(args) == 3 and args[0] == "FAIL" and (m := _FAIL.match(str(args[2]))):
            self.waiting(m.group("broker"), m.group("what"))
            return
        super().log(logging.DEBUG, msg, *args, **kwargs)

    def waiting(self, broker: str, what: str) -> None:
        """The rate-limited "waiting for Kafka" line for a failed connection to ``broker``."""
        reason = what.rsplit("failed: ", 1)[-1]
        reason = re.sub(r"\s*\(after \d+ms in state \w+\)\s*$", "", reason).strip().rstrip(".")
        repeats = self._rate.admit()
        if repeats is None:
            return
        more = f" ({repeats} more attempts since the last line)" if repeats else ""
        self.warning("waiting for Kafka at %s: %s; retrying%s", broker, reason.lower(), more)


RDKAFKA_LOG = RdkafkaLog("ragpulse.collector.rdkafka")
"""The one logger every librdkafka client of the collector logs through (one rate limit)."""


def topic_partitions(client: Any, topic: str, timeout_s: float) -> int:
    """The partition count of ``topic`` as a librdkafka client (producer or admin) sees it; 0
    when the cluster answers without the topic. Blocks up to ``timeout_s``, asking once a
    second and serving the client's queued log lines in between (so "waiting for Kafka" shows
    while it waits); raises :class:`KafkaUnavailable` when the cluster does not answer."""
    from confluent_kafka import KafkaException

    deadline = time.monotonic() + timeout_s
    while True:
        step = max(0.05, min(1.0, deadline - time.monotonic()))
        try:
            meta = client.list_topics(topic, timeout=step)
            break
        except KafkaException as exc:
            _serve_logs(client)
            if time.monotonic() >= deadline:
                raise KafkaUnavailable(f"Kafka did not answer within {timeout_s:g} s: "
                                       f"{exc}") from None
    _serve_logs(client)
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
    admin = AdminClient(settings.rdkafka_config(), logger=RDKAFKA_LOG)
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


def _serve_logs(client: Any) -> None:
    """Hand the client's queued log lines (and, for a producer, due delivery reports) to their
    callbacks now. Never raises: a client that cannot poll has nothing to serve."""
    try:
        client.poll(0)
    except Exception:
        log.debug("serving librdkafka's log queue failed", exc_info=True)
