"""The scorer's self-telemetry: every counter and gauge name, declared once, with its meaning.

Stage names are verbs (consume, decode, assemble, sample, evaluate, write, commit). Each counter
is incremented by exactly one thread (noted below), so plain integer updates under the GIL
cannot lose increments and :meth:`Counters.snapshot` may be called from any thread.
"""

from __future__ import annotations

import threading

__all__ = ["COUNTERS", "GAUGES", "Counters"]

COUNTERS: dict[str, str] = {
    # consumer thread
    "records_consumed": "Kafka records read from the spans topic",
    "records_dead_lettered": "undecodable records acknowledged by the dead-letter topic",
    "dead_letter_errors": "failed sends to the dead-letter topic (retried)",
    "spans_consumed": "spans decoded from consumed records",
    "traces_sampled": "assembled traces kept by the sampler",
    "traces_sampled_out": "assembled traces the sampler skipped (their records are done)",
    "traces_unscorable": "kept traces without question/answer/contexts: written as null rows",
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
    "rows_written": "score rows acknowledged by ClickHouse",
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


class Counters:
    """Monotonic counters named in :data:`COUNTERS`; unknown names raise ``KeyError``."""

    __slots__ = ("_lock", "_values")

    def __init__(self) -> None:
        self._values: dict[str, int] = dict.fromkeys(COUNTERS, 0)
        self._lock = threading.Lock()

    def add(self, name: str, n: int = 1) -> None:
        # Single writer per name (see module docstring), so no lock on the hot path.
        self._values[name] += n

    def __getitem__(self, name: str) -> int:
        return self._values[name]

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self._values)
