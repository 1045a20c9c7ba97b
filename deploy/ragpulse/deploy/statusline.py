"""The status line ``ragpulse up`` and ``ragpulse scorer`` print every ``--status-interval``:
one definition, so both say the same words for the same counters (declared in
:data:`ragpulse.common.SELF_METRICS`)."""

from __future__ import annotations

from typing import Any

from .diskspace import low_disk_note

__all__ = ["ERRORS", "scorer_stats", "status_line"]

ERRORS = (
    "collector.spans_refused", "collector.spans_failed",
    "scorer.records_dead_lettered", "scorer.dead_letter_errors", "scorer.evaluate_errors",
    "scorer.write_errors", "scorer.commit_errors",
)
"""The counters the line adds up as "errors": spans refused or lost by the collector, records
the scorer could not decode or dead-letter, and failed evaluations, inserts and commits."""


def scorer_stats(scorer: Any) -> dict[str, Any]:
    """A running scorer's ``stats()`` and its unscorable traces by reason, prefixed
    ``scorer.`` as :func:`status_line` reads them."""
    out = {f"scorer.{k}": v for k, v in scorer.stats().items()}
    unscorable = scorer.labelled_counters().get("traces_unscorable", {})
    out.update({f"scorer.traces_unscorable.{r}": n for r, n in unscorable.items()})
    return out


def status_line(st: dict[str, Any], elapsed_s: float) -> str:
    """One line that adds up, from ``collector.``/``scorer.``/``disk.``-prefixed stats: spans
    received by the collector (``up``; records consumed when there is no collector, ``scorer``),
    then every trace the assembler emitted in exactly one outcome (sampled out, no RAG query,
    evicted without a root and with nothing to score, written as null rows because it could not
    be scored, scored, failed, dropped) or still in progress (the remainder: waiting for or in
    the judge, or emitted and not yet through the sampler). Unscorable traces are broken down by
    reason; "errors" adds :data:`ERRORS`."""
    def g(key: str) -> int:
        return int(st.get(key, 0) or 0)

    if "collector.spans_received" in st:
        head = f"spans received {g('collector.spans_received')}"
    else:
        head = f"records consumed {g('scorer.records_consumed')}"
    # traces_assembled counts every trace the assembler handed on, whatever the cause (the
    # pipeline-health panel draws the same counter)
    emitted = g("scorer.traces_assembled")
    outcomes = {
        "sampled out": g("scorer.traces_sampled_out"),
        "not RAG": g("scorer.traces_not_rag"),
        # evicted before its root came, with nothing to score (a root-less flood): no rows
        "expired incomplete": g("scorer.traces_expired_incomplete"),
        "unscorable": g("scorer.traces_unscorable"),
        "scored": g("scorer.traces_scored"),
        "failed": g("scorer.evaluate_errors"),
        "dropped": g("scorer.traces_dropped"),
    }
    outcomes["in progress"] = max(0, emitted - sum(outcomes.values()))
    reasons = sorted(((k.rsplit(".", 1)[1], int(v)) for k, v in st.items()
                      if k.startswith("scorer.traces_unscorable.") and v), key=lambda x: -x[1])
    why = f" ({', '.join(f'{r} {n}' for r, n in reasons)})" if reasons else ""
    parts = " + ".join(f"{k} {v}" + (why if k == "unscorable" else "")
                       for k, v in outcomes.items())
    return (f"[{elapsed_s:6.0f}s] {head}, traces assembled {emitted} = {parts}; "
            f"rows {g('scorer.rows_written')}, lag {g('scorer.consumer_lag')}, "
            f"errors {sum(g(k) for k in ERRORS)}"
            + (", paused (backpressure)" if g("scorer.paused") else "")
            + low_disk_note(st.get("disk.free_bytes"), st.get("disk.min_free_bytes"),
                            str(st.get("disk.data_dir", ""))))
