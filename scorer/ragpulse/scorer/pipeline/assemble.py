"""The assemble step: spans into traces (:class:`~.trace_buffer.TraceAssembler`), traces on.

Each decoded record's spans are added to the assembler trace by trace; every trace that now holds
the record counts as pending on it, and the record is sealed once all its traces are attached
(:class:`~.offsets.OffsetTracker`: a sealed record is done when no trace holds it any more). Spans
that arrive late for a trace already emitted hold nothing, so a record of only late spans is
done at once. :meth:`AssembleStep.poll` hands the traces the assembler released (complete after
the grace period, timed out, evicted) to the prepare step, oldest first.

At shutdown, :meth:`AssembleStep.join` hands on every buffered trace when ``drain_buffered`` is
set (they are scored now instead of being assembled again by the next run), or nothing; after
it the step emits nothing more.

Consumer thread only; never blocks; never raises :class:`~.steps.MessageRejected`. The buffer is
bounded by ``assembly.max_traces`` and ``assembly.max_spans`` (the oldest trace is evicted).
"""

from __future__ import annotations

from collections.abc import Callable

from ..traces.span import Span
from .messages import DecodedRecord
from .offsets import RecordRef
from .steps import Partitions, Step
from .trace_buffer import AssembledTrace, TraceAssembler

__all__ = ["AssembleStep"]


class AssembleStep(Step[DecodedRecord]):
    """Feeds the assembler and hands the traces it releases to the prepare step.

    ``hold`` and ``seal`` are the processor's callbacks (:class:`~.processor.Bookkeeping`): a
    trace now holds the record; every trace of the record is attached.
    """

    def __init__(
        self,
        assembler: TraceAssembler[Span],
        prepare: Step[AssembledTrace[Span]],
        *,
        hold: Callable[[RecordRef], None],
        seal: Callable[[RecordRef], None],
        drain_buffered: bool,
    ) -> None:
        self._assembler = assembler
        self._prepare = prepare
        self._hold = hold
        self._seal = seal
        self._drain_buffered = drain_buffered
        self._joined = False

    def submit(self, message: DecodedRecord) -> None:
        ref, add, hold = message.ref, self._assembler.add, self._hold
        for trace_id, spans in message.traces.items():
            if add(trace_id, spans, ref):
                hold(ref)
        self._seal(ref)

    def poll(self) -> None:
        if not self._joined:
            self._hand_on(self._assembler.pop_ready())

    def join(self) -> None:
        """Hand on every buffered trace with ``drain_buffered``, else nothing; after it the step
        emits nothing more."""
        if self._joined:
            return
        self._joined = True
        if self._drain_buffered:
            self._hand_on(self._assembler.pop_ready() + self._assembler.drain())

    def forget(self, partitions: Partitions) -> list[list[RecordRef]]:
        return [trace.refs for trace in self._assembler.forget(partitions)]

    def stats(self) -> dict[str, int]:
        """The assembler's counters, and the traces and spans it buffers."""
        assembler = self._assembler
        return {
            **assembler.counters,
            "traces_buffered": assembler.traces_buffered,
            "spans_buffered": assembler.spans_buffered,
        }

    def _hand_on(self, traces: list[AssembledTrace[Span]]) -> None:
        submit = self._prepare.submit
        for trace in traces:
            submit(trace)
