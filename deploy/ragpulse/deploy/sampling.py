"""``ragpulse up``'s default sampling rate, from each local judge's measured speed.

``up`` runs every part on one machine; the judge is its slowest step. Without
``--sampling-rate`` (or ``RAGPULSE_SAMPLING__DEFAULT_RATE``), ``up`` judges the share of traces
that keeps the judge within :data:`JUDGE_HEADROOM` of its measured rate at
:data:`REFERENCE_TRACES_PER_S` (with ``--demo``, at the demo's own rate):

    rate = min(1, JUDGE_HEADROOM * JUDGE_SAMPLES_PER_S[judge] / traffic), down to a step of 0.05

A judge without a figure (``nli`` with a model of your own, ``llm``, whose rate is its API's)
keeps 1.0.
"""

from __future__ import annotations

import math

from ragpulse.scorer import JUDGE_ALIASES, SAMPLES_PER_S, resolve_judge

__all__ = ["JUDGE_HEADROOM", "JUDGE_SAMPLES_PER_S", "REFERENCE_TRACES_PER_S",
           "default_sampling_rate"]

JUDGE_SAMPLES_PER_S: dict[str, float] = SAMPLES_PER_S
"""Each judge's measured samples/s on 2 free cores (``ragpulse.scorer.SAMPLES_PER_S``, written by
``bench/judge_speed.py --write-constants``; docs/benchmarks.md has the run)."""

REFERENCE_TRACES_PER_S = 2.0
"""The traffic ``up`` is sized for when it is not told: a small app on one machine, and the
demo's default rate."""

JUDGE_HEADROOM = 0.8
"""Share of the judge's measured rate that the default plans to use (bursts, a busier machine)."""


def default_sampling_rate(judge: str, traffic_per_s: float | None = None) -> float:
    """The default share of traces judged for ``judge`` at ``traffic_per_s`` traces/s
    (:data:`REFERENCE_TRACES_PER_S` when ``None``). Pure."""
    rate = JUDGE_SAMPLES_PER_S.get(resolve_judge(judge) if judge in JUDGE_ALIASES else judge)
    if not rate:
        return 1.0
    share = JUDGE_HEADROOM * rate / (traffic_per_s or REFERENCE_TRACES_PER_S)
    return min(1.0, max(0.05, math.floor(share * 20 + 1e-9) / 20))
