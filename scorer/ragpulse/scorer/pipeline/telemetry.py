"""The scorer's self-telemetry: every ``stats()`` name, declared once, with its meaning.

Stage names are verbs (consume, decode, assemble, sample, evaluate, write, commit). Each counter
is incremented by exactly one thread (noted below), so plain integer updates under the GIL
cannot lose increments and :meth:`Counters.snapshot` may be called from any thread.

:data:`COUNTERS` are counted by :class:`Counters`, one per step and one for the processing loop
(``processor.StreamProcessor``); :data:`GAUGES` are computed by the loop and the steps;
:data:`PARTS` are counted by the parts the steps drive (the trace assembler, the span decoder,
the ClickHouse writer). Each step and the loop report theirs with ``stats()``, and
``Scorer.stats()`` merges them under these names (:func:`merge_stats`).
``ragpulse.deploy.telemetry`` exports all of them (``/metrics``, OTLP) and the
``pipeline_health`` rows hold all of them (:func:`declared`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

__all__ = ["COUNTERS", "GAUGES", "LABELLED", "PARTS", "Counters", "declared", "merge_stats"]

Kind = Literal["counter", "gauge"]

COUNTERS: dict[str, str] = {
    # consumer thread
    "records_consumed": "Kafka records read from the spans topic",
    "records_dead_lettered": "undecodable records acknowledged by the dead-letter topic",
    "dead_letter_errors": "failed sends to the dead-letter topic (retried)",
    "spans_consumed": "spans decoded from consumed records",
    "traces_sampled": "assembled traces kept by the sampler",
    "traces_sampled_out": "assembled traces the sampler skipped (their records are done)",
    "traces_unscorable": "kept traces without question/answer/contexts: written as null rows",
    "traces_expired_incomplete": "traces evicted from the assembler without a root span and with nothing to score: no rows",
    "traces_not_rag": "traces with no question, no answer and no LLM call (index building): no rows",
    "traces_dropped": "traces dropped on purpose (evicted with on_evict=drop, invalid metadata)",
    "traces_revoked": "buffered traces forgotten because their partition was revoked",
    "traces_done": "traces whose rows ClickHouse acknowledged (or that were dropped on purpose)",
    "commits": "successful offset commits",
    "commit_errors": "failed offset commits (retried at the next interval)",
    "partitions_paused": "times the consumer paused its partitions (backpressure)",
    # event-loop thread
    "traces_scored": "traces evaluated by the judge",
    "evaluate_errors": "evaluations that raised (programming errors); written as error rows",
    # write thread
    "rows_written": "score rows acknowledged and kept by ClickHouse",
    "rows_expired": "score rows acknowledged but deleted at once by the scores TTL (ts outside it): not in rows_written",
    "batches_written": "insert batches acknowledged by ClickHouse",
    "write_errors": "failed insert attempts (the batch is retried; offsets wait)",
}

GAUGES: dict[str, str] = {
    "traces_buffered": "traces waiting in the assembler",
    "spans_buffered": "spans waiting in the assembler",
    "traces_in_flight": "traces handed to evaluate/write and not yet acknowledged",
    "traces_backlog": "assembled traces waiting for an in-flight slot",
    "records_pending": "consumed records not yet committable",
    "partitions_assigned": "partitions this member owns",
    "paused": "1 while the consumer is paused for backpressure",
    "consumer_lag": "sum over owned partitions of high watermark minus consumed position",
    "commit_lag": "sum over owned partitions of high watermark minus committed offset",
}


PARTS: dict[str, tuple[Kind, str]] = {
    # the trace assembler (pipeline.trace_buffer), consumer thread
    "spans_assembled": ("counter", "spans added to the assembler's trace buffers"),
    "spans_late": ("counter", "spans of already emitted traces (ignored or re-scored)"),
    "traces_assembled": (
        "counter",
        "traces the assembler handed on, for any cause: complete (root span seen plus the grace "
        "period), timed out, evicted, drained, re-scored; every one ends in one outcome "
        "(scored, unscorable, sampled out, ...), so it is never below traces_scored",
    ),
    "traces_timed_out": (
        "counter",
        "of traces_assembled: emitted without a root span after assembly.max_wait_s",
    ),
    "traces_evicted": (
        "counter",
        "of traces_assembled: evicted from the full assembly buffer or over a service's "
        "max_incomplete_per_service",
    ),
    "traces_rescored": (
        "counter",
        "of traces_assembled: emitted traces reopened by late spans (late_spans=rescore)",
    ),
    "traces_drained": (
        "counter",
        "of traces_assembled: emitted early because the scorer was shutting down",
    ),
    # the segment reader (pipeline.segments), consumer thread
    "segment_values_capped": (
        "counter",
        "segment attribute values stored as 'other': their key had write.max_segment_values "
        "distinct values already",
    ),
    # the span decoder (traces.span_decoder), consumer thread
    "records_undecodable": ("counter", "records the decoder could not read (dead-lettered)"),
    # the ClickHouse writer (store.writer), its own thread; prefixed ``writer_``
    "writer_rows_submitted": ("counter", "score rows accepted by the ClickHouse writer"),
    "writer_rows_refused": ("counter", "score rows refused by the full writer (backpressure)"),
    "writer_rows_written": ("counter", "score rows ClickHouse acknowledged and kept (writer's count)"),
    "writer_rows_expired": ("counter", "score rows the scores TTL deleted on insert (writer's count)"),
    "writer_rows_failed": ("counter", "score rows whose insert failed for good or at shutdown"),
    "writer_batches_written": ("counter", "insert calls ClickHouse acknowledged"),
    "writer_insert_retries": ("counter", "insert attempts retried after a retryable error"),
    "writer_insert_errors": ("counter", "failed insert attempts of any kind"),
    "writer_pending_rows": ("gauge", "rows held by the writer, not yet acknowledged"),
}

LABELLED: dict[str, str] = {
    "traces_unscorable": "by the reason the trace could not be scored (no_contexts, ...)",
    "records_dead_lettered": "by the reason the record could not be decoded",
}
"""Counters also reported split by a label (``Scorer.labelled_counters()``)."""


def declared(kind: Kind) -> tuple[str, ...]:
    """Every declared ``stats()`` name of ``kind``, in declaration order."""
    own = COUNTERS if kind == "counter" else GAUGES
    return (*own, *(name for name, (k, _) in PARTS.items() if k == kind))


class Counters:
    """Monotonic counters, each named in :data:`COUNTERS`: every step and the processor keep
    their own (``names``, the ones they count). Unknown names raise ``KeyError``, at
    construction and in :meth:`add`. :meth:`snapshot` is safe from any thread.

    The contract is single writer per name, and no lock: :meth:`add` is one ``+=`` on a key that
    exists from construction, so the dictionary never changes size, and :meth:`snapshot` copies
    it in one C call under the GIL (no increment is lost, none is half-seen). A counter that two
    threads must add to needs an owner of its own instead (one ``Counters`` per thread)."""

    __slots__ = ("_values",)

    def __init__(self, names: Iterable[str]) -> None:
        undeclared = [name for name in names if name not in COUNTERS]
        if undeclared:
            raise KeyError(f"counters not declared in telemetry.COUNTERS: {undeclared}")
        self._values: dict[str, int] = dict.fromkeys(names, 0)

    def add(self, name: str, count: int = 1) -> None:
        """Add ``count`` to ``name``; only by that name's one thread. ``KeyError`` if not kept."""
        # Single writer per name (see module docstring), so no lock on the hot path.
        self._values[name] += count

    def __getitem__(self, name: str) -> int:
        return self._values[name]

    def snapshot(self) -> dict[str, int]:
        """A copy of every value. Any thread (see the class docstring)."""
        return dict(self._values)


def merge_stats(parts: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """One ``stats()`` dictionary from the processor's and the steps' own: a counter of
    :data:`COUNTERS` that several of them count (``traces_dropped``: prepare and evaluate) is
    summed; any other name is taken as it is (each gauge has one owner)."""
    out: dict[str, Any] = {}
    for part in parts:
        for name, value in part.items():
            out[name] = out.get(name, 0) + value if name in COUNTERS else value
    return out
