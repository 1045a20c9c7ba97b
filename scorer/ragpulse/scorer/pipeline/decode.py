"""The decode step: a Kafka record's value to spans grouped by trace, or a dead letter.

Record values are OTLP ``TracesData`` protobuf, as the ragpulse collector and otelcol's Kafka
exporter produce them (``ragpulse.scorer.traces.span_decoder.SpanDecoder``). A record the decoder
refuses (``DecodeError``: not protobuf, not OTLP, over the size limits) goes to the dead-letter
step with the decoder's reason; any other record goes on to the assemble step with its spans
grouped by trace id, even when it holds none (the assemble step seals it either way).

Consumer thread only; never blocks. Never raises :class:`~.steps.MessageRejected` (nor do the
steps it submits to): a record read from Kafka is always taken, and backpressure acts on the
fetching instead (the processor pauses).
"""

from __future__ import annotations

from ..traces.span_decoder import DecodeError, SpanDecoder, group_by_trace
from .messages import DecodedRecord, Record, Undecodable
from .steps import Step
from .telemetry import Counters

__all__ = ["DecodeStep"]


class DecodeStep(Step[Record]):
    """Decodes records; hands spans to ``assemble`` and refused records to ``dead_letter``.

    Consumer thread only (``stats`` aside); never blocks; ``submit`` never raises."""

    COUNTED = ("spans_consumed",)

    def __init__(
        self,
        decoder: SpanDecoder,
        assemble: Step[DecodedRecord],
        dead_letter: Step[Undecodable],
    ) -> None:
        self._decoder = decoder
        self._assemble = assemble
        self._dead_letter = dead_letter
        self._counters = Counters(self.COUNTED)

    def submit(self, message: Record) -> None:
        try:
            spans = self._decoder.decode(message.value)
        except DecodeError as exc:
            self._dead_letter.submit(Undecodable(message, exc.reason, exc.detail))
            return
        self._counters.add("spans_consumed", len(spans))
        self._assemble.submit(DecodedRecord(message.ref, group_by_trace(spans)))

    def stats(self) -> dict[str, int]:
        """``spans_consumed`` and the decoder's ``records_undecodable``."""
        return {
            **self._counters.snapshot(),
            "records_undecodable": self._decoder.stats().get("records_failed", 0),
        }
