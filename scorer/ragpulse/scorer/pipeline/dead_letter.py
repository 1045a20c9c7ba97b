"""The dead-letter step: undecodable records go to the dead-letter topic, with why and whence.

A record the span decoder refuses is produced unchanged (key, value, its own headers) to
``kafka.dlq_topic`` with ``ragpulse.dlq.*`` headers: ``reason`` (a short code), ``detail``,
``topic``, ``partition``, ``offset`` and ``group``. The record counts as done (its offset may be
committed) only once the dead-letter topic acknowledged it (``acks=all``); a failed send is
retried after the scorer's retry policy's backoff (:mod:`ragpulse.scorer.store.retry`), for as
long as the scorer runs, and holds its partition's commits back meanwhile. With
``consumer.dead_letter = false`` the record is skipped and counted instead. This is arroyo's
dead-letter policy (``arroyo/dlq.py``) without its limits: a decoder refusal is a property of
the record, never of the scorer, so there is no invalid-ratio cut-off.

Threads: the step runs on the consumer thread. ``KafkaProducer.send`` returns a future that
kafka-python completes on its I/O thread; the callbacks only post a
:class:`~.messages.DeadLetterOutcome` to the inbox (``post``), which the chain routes back to
:meth:`DeadLetterStep.settle` on the consumer thread. ``send`` may block up to the producer's
``max_block_ms`` when the topic's metadata is missing, so the processor does not poll this
step while a revoke listener waits on kafka-python's network loop.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from typing import Any

from ..store.retry import RetryPolicy
from .messages import DeadLetter, DeadLetterOutcome, Done, Undecodable
from .offsets import RecordRef
from .settings import ScorerSettings
from .steps import Step, pop_due
from .telemetry import Counters

__all__ = ["DLQ_HEADER_PREFIX", "DeadLetterStep", "producer_config"]

log = logging.getLogger(__name__)

DLQ_HEADER_PREFIX = "ragpulse.dlq."


class DeadLetterStep(Step[Undecodable]):
    """Sends undecodable records to the dead-letter topic; done once acknowledged.

    ``start()`` (before the consumer joins) creates the topic if it is missing and the
    producer; it raises what ``KafkaProducer`` raises (``NoBrokersAvailable``). ``close()``
    closes the producer (blocks up to 5 s to flush). Everything else runs on the consumer
    thread, never raises and never blocks, except ``send`` (see the module docstring).
    ``pending`` counts the letters waiting for a retry (sent ones are not waited for at
    shutdown: unacknowledged, their records are read and dead-lettered again by the next run).
    """

    COUNTED = ("records_dead_lettered", "dead_letter_errors")

    def __init__(
        self,
        settings: ScorerSettings,
        done: Step[Done],
        *,
        hold: Callable[[RecordRef], None],
        seal: Callable[[RecordRef], None],
        post: Callable[[object], None],
        retry: RetryPolicy,
        clock: Callable[[], float],
        producer_factory: Callable[[dict[str, Any]], Any],
    ) -> None:
        self._settings = settings
        self._done = done
        self._hold = hold
        self._seal = seal
        self._post = post
        self._counters = Counters(self.COUNTED)
        self._retry = retry
        self._clock = clock
        self._producer_factory = producer_factory
        self._producer: Any = None
        self._held: deque[DeadLetter] = deque()  # failed sends, waiting for their retry time
        self.by_reason: dict[str, int] = {}  # undecodable records by reason (consumer thread)

    def start(self) -> None:
        """Ensure the topic and create the producer (blocks; raises ``NoBrokersAvailable``)."""
        if self._settings.consumer.dead_letter:
            self._ensure_topic()
            self._producer = self._producer_factory(producer_config(self._settings))

    def _ensure_topic(self) -> None:
        """Create the dead-letter topic if missing: brokers that do not auto-create topics would
        otherwise refuse every dead letter and hold the partition's commits back. Best effort:
        without admin rights the topic must exist already (the first send says so)."""
        from ragpulse.common import ensure_topic

        s = self._settings
        try:
            ensure_topic(s.kafka, 1, topic=s.kafka.dlq_topic, timeout_s=10)
        except Exception as exc:
            log.warning("dead-letter: cannot ensure topic %s: %s", s.kafka.dlq_topic, exc)

    def submit(self, message: Undecodable) -> None:
        rec, ref = message.record, message.record.ref
        self.by_reason[message.reason] = self.by_reason.get(message.reason, 0) + 1
        log.warning(
            "decode: %s[%d]@%d undecodable (%s)%s",
            ref.topic,
            ref.partition,
            ref.offset,
            message.reason,
            "; dead-lettered" if self._producer is not None else "; skipped",
        )
        if self._producer is None:
            self._seal(ref)  # dead-lettering disabled: the record is skipped (counted)
            return
        self._hold(ref)
        self._seal(ref)
        headers = list(rec.headers or []) + [
            (DLQ_HEADER_PREFIX + "reason", message.reason.encode()),
            (DLQ_HEADER_PREFIX + "detail", message.detail[:1000].encode("utf-8", "replace")),
            (DLQ_HEADER_PREFIX + "topic", ref.topic.encode()),
            (DLQ_HEADER_PREFIX + "partition", str(ref.partition).encode()),
            (DLQ_HEADER_PREFIX + "offset", str(ref.offset).encode()),
            (DLQ_HEADER_PREFIX + "group", self._settings.consumer.group_id.encode()),
        ]
        self._send(DeadLetter(ref, rec.key, rec.value, headers))

    def poll(self) -> None:
        """Send again the letters whose retry time came."""
        for letter in pop_due(self._held, self._clock()):
            self._send(letter)

    @property
    def pending(self) -> int:
        return len(self._held)

    def stats(self) -> dict[str, int]:
        """``records_dead_lettered`` and ``dead_letter_errors``. Any thread."""
        return self._counters.snapshot()

    def labelled(self) -> dict[str, dict[str, int]]:
        """Undecodable records by the decoder's reason (``records_dead_lettered``)."""
        return {"records_dead_lettered": dict(self.by_reason)}

    def close(self) -> None:
        """Close the producer (blocks up to 5 s to flush); idempotent, never raises."""
        producer, self._producer = self._producer, None
        if producer is not None:
            try:
                producer.close(timeout=5)
            except Exception as exc:
                log.warning("dead-letter: producer close failed: %s", exc)

    def _send(self, letter: DeadLetter) -> None:
        post = self._post
        try:
            fut = self._producer.send(
                self._settings.kafka.dlq_topic,
                key=letter.key,
                value=letter.value,
                headers=letter.headers,
            )
        except Exception as exc:  # buffer full, closed: retry later
            post(DeadLetterOutcome(letter, exc))
            return
        fut.add_callback(lambda _md, d=letter: post(DeadLetterOutcome(d, None)))
        fut.add_errback(lambda exc, d=letter: post(DeadLetterOutcome(d, exc)))

    def settle(self, message: DeadLetterOutcome) -> None:
        """One send settled (consumer thread): an acknowledged letter's record is done, a failed
        one waits for its retry."""
        letter = message.letter
        if message.error is None:
            self._counters.add("records_dead_lettered")
            self._done.submit(Done((letter.ref,)))
            return
        self._counters.add("dead_letter_errors")
        log.warning("dead-letter: send failed (attempt %d): %s", letter.attempts + 1, message.error)
        letter.attempts += 1
        letter.retry_at = self._clock() + self._retry.backoff(letter.attempts)
        self._held.append(letter)


def producer_config(settings: ScorerSettings) -> dict[str, Any]:
    """``KafkaProducer`` arguments for dead letters: every replica acknowledges (``acks=all``),
    and a record as large as the consumer may fetch fits in one request."""
    cfg = settings.kafka.client_kwargs()
    cfg.update(
        acks="all",
        compression_type=settings.kafka.producer_compression(),
        linger_ms=50,
        max_request_size=settings.consumer.max_partition_fetch_bytes + 1024 * 1024,
    )
    return cfg
