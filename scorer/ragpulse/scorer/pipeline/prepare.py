"""From an assembled trace to a :class:`~.service.Prepared` decision: extract, then sample.

Extraction (``ragpulse.scorer.traces.extract``) finds the question, contexts and answer and the
row metadata; the sampler (``ragpulse.scorer.traces.Sampler``) decides deterministically from the
trace id, the service and the always-score rules. Sampling runs *after* extraction because the
always-score rules (error status, negative feedback) need the metadata.

The row timestamp is the trace's end time from its spans, never the wall clock: the scores table
is keyed on it, so a replayed trace must produce the same key to overwrite its first rows.
"""

from __future__ import annotations

from datetime import UTC, datetime

from ..model import Sample
from ..privacy import Redactor
from ..store.rows import TraceMeta
from ..traces.extract import ExtractionSettings, extract
from ..traces.reasons import NOT_RAG
from ..traces.sampling import Sampler
from ..traces.span import Span
from .assembly import AssembledTrace
from .service import Prepared, TracePreparer

__all__ = ["build_preparer", "utc_from_ns"]


def utc_from_ns(ns: int) -> datetime:
    """A UTC datetime from Unix nanoseconds, truncated to the column's milliseconds."""
    return datetime.fromtimestamp((ns // 1_000_000) / 1000.0, tz=UTC)


def build_preparer(
    sampler: Sampler,
    extraction: ExtractionSettings | None = None,
    *,
    excerpts: bool = True,
    redactor: Redactor | None = None,
) -> TracePreparer:
    """A :data:`TracePreparer` over the real extractor and sampler.

    With a ``redactor``, the sample is redacted here, once, before anything else sees it: the
    judge and the stored excerpts get the same redacted text (``ragpulse.scorer.privacy``).

    The returned callable is not thread-safe (the sampler keeps counters): the scorer calls it
    from its consumer thread only. It never raises for odd span content.
    """

    def prepare(trace: AssembledTrace[Span]) -> Prepared:
        ex = extract(trace.spans, extraction)
        if ex.reason == NOT_RAG:  # not a query: neither sampled nor written
            return Prepared(False, 1.0, None, NOT_RAG, None)
        decision = sampler.decide(ex, trace.spans)
        if not decision.keep:
            return Prepared(False, decision.rate, None, None, None)
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
        meta = TraceMeta(
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
        )
        return Prepared(True, decision.rate, sample, ex.reason if sample is None else None, meta)

    return prepare
