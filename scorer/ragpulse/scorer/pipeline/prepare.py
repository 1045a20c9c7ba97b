"""The prepare step: from an assembled trace to a :class:`~.messages.ScoringDecision`.

The preparer (:func:`build_preparer`) extracts, samples and redacts. Extraction
(``ragpulse.scorer.traces.extract``) finds the question, contexts and answer and the row metadata;
the sampler (``ragpulse.scorer.traces.Sampler``) decides deterministically from the trace id, the
service and the always-score rules. Sampling runs *after* extraction because the always-score
rules (error status, negative feedback) need the metadata. With a redactor, the sample is redacted
once, here, before the judge or the store sees it.

The row timestamp is the trace's end time from its spans, never the wall clock: the scores table
is keyed on it, so a replayed trace must produce the same key to overwrite its first rows.

:class:`PrepareStep` runs the preparer on every trace the assemble step emits. Traces it will not
score go straight to the commit step, counted: no RAG query at all (``traces_not_rag``), sampled
out (``traces_sampled_out``), evicted with
``assembly.on_evict = "drop"``, without usable metadata, or whose preparation raised
(``traces_dropped``). Kept traces wait in a backlog, in arrival order, until the evaluate step
admits them (it refuses beyond ``evaluate.max_in_flight``); while traces wait,
:meth:`PrepareStep.poll` raises :class:`~.steps.MessageRejected` and the processor pauses.
The backlog is bounded by what the assembler can emit while consumption is paused.
"""

from __future__ import annotations

import logging
from collections import deque
from datetime import UTC, datetime

from ragpulse.common.schema import NOT_RAG

from ..model import Sample
from ..privacy import Redactor
from ..store.rows import ScoredTraceMeta
from ..traces.extract import ExtractionSettings, extract
from ..traces.sampling import Sampler
from ..traces.span import Span
from .messages import Done, KeptTrace, ScoringDecision, TracePreparer, TraceWork
from .offsets import RecordRef
from .segments import SegmentReader
from .steps import MessageRejected, Partitions, Step
from .telemetry import Counters
from .trace_buffer import AssembledTrace

__all__ = ["PrepareStep", "build_preparer", "utc_from_ns"]

log = logging.getLogger(__name__)


def utc_from_ns(ns: int) -> datetime:
    """A UTC datetime from Unix nanoseconds, truncated to the column's milliseconds."""
    return datetime.fromtimestamp((ns // 1_000_000) / 1000.0, tz=UTC)


def build_preparer(
    sampler: Sampler,
    extraction: ExtractionSettings | None = None,
    *,
    excerpts: bool = True,
    redactor: Redactor | None = None,
    segments: SegmentReader | None = None,
) -> TracePreparer:
    """A :data:`TracePreparer` over the real extractor and sampler.

    With a ``redactor``, the sample is redacted here, once, before anything else sees it: the
    judge and the stored excerpts get the same redacted text (``ragpulse.scorer.privacy``).
    ``segments`` reads each row's configured span attributes and, when asked, its language
    (default: none); they are stored whether or not excerpts are (labels, not trace text).

    The returned callable is not thread-safe (the sampler keeps counters): the scorer calls it
    from its consumer thread only. It never raises for odd span content.
    """

    read_segments = segments if segments is not None else SegmentReader()

    def prepare(trace: AssembledTrace[Span]) -> ScoringDecision:
        ex = extract(trace.spans, extraction)
        if ex.reason == NOT_RAG:  # not a query: neither sampled nor written
            return ScoringDecision(False, 1.0, None, NOT_RAG, None)
        decision = sampler.decide(ex, trace.spans)
        if not decision.keep:
            return ScoringDecision(False, decision.rate, None, None, None)
        m = ex.meta
        root = next((s for s in trace.spans if not s.parent_span_id), None)
        end_ns = m.end_ns or max((s.end_ns for s in trace.spans), default=0)
        sample = ex.sample
        if redactor is not None and sample is not None:
            sample = redactor.redact_sample(sample)
        # Null rows keep what extraction found, redacted like a sample would be.
        found = sample
        if found is None and excerpts and (ex.question or ex.answer):
            found = Sample(id=trace.trace_id, question=ex.question or "", answer=ex.answer or "")
            if redactor is not None:
                found = redactor.redact_sample(found)
        text = " ".join(t for t in (ex.question, ex.answer) if t)
        meta = ScoredTraceMeta(
            trace_id=trace.trace_id,
            ts=utc_from_ns(end_ns),
            service=m.service or (root.service_name if root else None) or "unknown",
            environment=m.environment or "",
            model=m.model or "",
            prompt_version=m.prompt_version or "",
            retriever_version=m.retriever_version or "",
            sampling_rate=decision.rate,
            span_id=root.span_id if root is not None else "",
            question_excerpt=found.question if excerpts and found is not None else None,
            answer_excerpt=found.answer if excerpts and found is not None else None,
            unscorable_detail=ex.detail or "",
            segments=read_segments(trace.spans, text),
        )
        return ScoringDecision(True, decision.rate, sample, ex.reason if sample is None else None, meta)

    prepare.segments = read_segments  # type: ignore[attr-defined]  # PrepareStep.stats reads it
    return prepare


class PrepareStep(Step[AssembledTrace[Span]]):
    """Prepares assembled traces and hands the kept ones to the evaluate step, in order.

    Consumer thread only (``stats`` aside); never blocks. ``submit`` never raises
    :class:`~.steps.MessageRejected` (the trace joins the backlog); ``poll`` raises it while the
    backlog is not empty. ``join`` admits what the evaluate step accepts, without raising.
    """

    COUNTED = ("traces_sampled", "traces_sampled_out", "traces_not_rag", "traces_dropped",
               "traces_expired_incomplete")

    def __init__(
        self,
        preparer: TracePreparer,
        evaluate: Step[KeptTrace],
        done: Step[Done],
        *,
        drop_evicted: bool,
    ) -> None:
        self._prepare = preparer
        self._evaluate = evaluate
        self._done = done
        self._counters = Counters(self.COUNTED)
        self._drop_evicted = drop_evicted
        self._backlog: deque[KeptTrace] = deque()  # kept, waiting for an in-flight slot

    def submit(self, message: AssembledTrace[Span]) -> None:
        work = TraceWork(message.trace_id, message.refs)
        if message.cause == "evicted" and self._drop_evicted:
            self._drop(work, "traces_dropped")
            return
        try:
            prep = self._prepare(message)
        except Exception:
            # The preparer is pure code over decoded spans; a bug there must not kill the
            # consumer nor stall its partition forever: count, log, drop.
            log.exception("prepare: trace %s failed; dropped", message.trace_id)
            self._drop(work, "traces_dropped")
            return
        if prep.reason == NOT_RAG:  # no RAG query at all (index building): counted, no rows
            self._drop(work, "traces_not_rag")
            return
        if not prep.keep:
            self._drop(work, "traces_sampled_out")
            return
        if message.cause == "evicted" and not message.has_root and prep.sample is None:
            # Evicted before its root came and nothing to score: an incomplete trace (e.g. a
            # flood whose roots never arrive), counted instead of a null row per metric.
            self._drop(work, "traces_expired_incomplete")
            return
        if prep.meta is None:
            self._drop(work, "traces_dropped")
            return
        self._counters.add("traces_sampled")
        self._backlog.append(KeptTrace(work, prep))

    def poll(self) -> None:
        self.join()
        if self._backlog:
            raise MessageRejected(f"prepare: {len(self._backlog)} traces wait for a slot")

    def join(self) -> None:
        backlog = self._backlog
        while backlog:
            try:
                self._evaluate.submit(backlog[0])
            except MessageRejected:
                return
            backlog.popleft()

    def forget(self, partitions: Partitions) -> list[list[RecordRef]]:
        kept: deque[KeptTrace] = deque()
        gone: list[list[RecordRef]] = []
        for entry in self._backlog:
            refs = entry.work.refs
            if any((r.topic, r.partition) in partitions for r in refs):
                gone.append(refs)
            else:
                kept.append(entry)
        self._backlog = kept
        return gone

    @property
    def pending(self) -> int:
        return len(self._backlog)

    def stats(self) -> dict[str, int]:
        """Its counters, ``traces_backlog`` (kept traces waiting for an in-flight slot) and
        ``segment_values_capped`` (of the preparer's :class:`SegmentReader`; 0 without one)."""
        reader = getattr(self._prepare, "segments", None)
        return {**self._counters.snapshot(), "traces_backlog": len(self._backlog),
                "segment_values_capped": reader.capped if isinstance(reader, SegmentReader) else 0}

    def _drop(self, work: TraceWork, counter: str) -> None:
        self._counters.add(counter)
        self._done.submit(Done(work.refs, work))
