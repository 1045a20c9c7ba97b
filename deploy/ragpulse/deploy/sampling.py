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

__all__ = ["JUDGE_HEADROOM", "JUDGE_SAMPLES_PER_S", "REFERENCE_TRACES_PER_S",
           "default_sampling_rate"]

JUDGE_SAMPLES_PER_S: dict[str, float] = {"local": 21.4, "local-model": 8.8}
"""Samples/s on 2 free cores for a typical trace (3 answer statements, 5 contexts of about 900
characters, the five default metrics), each judge as ``build_judge`` makes it: twice its samples
per CPU-second. Source: ``bench/judge_speed.py`` (docs/benchmarks.md, "Speed of the local judges
on a typical trace", 2026-11-26 20:36 UTC, load average 0.36 before, local-model with sentence
premises and its pairs run one at a time; earlier runs at load 4-9 gave local 3.5-5.3 and local-model, then on 256-token
chunks, 2.2-2.3: a busy machine starves the local judge's embedder more than the model). ``make judge-figures`` re-measures and rewrites them
(``--write-constants``)."""

REFERENCE_TRACES_PER_S = 2.0
"""The traffic ``up`` is sized for when it is not told: a small app on one machine, and the
demo's default rate."""

JUDGE_HEADROOM = 0.8
"""Share of the judge's measured rate that the default plans to use (bursts, a busier machine)."""


def default_sampling_rate(judge: str, traffic_per_s: float | None = None) -> float:
    """The default share of traces judged for ``judge`` at ``traffic_per_s`` traces/s
    (:data:`REFERENCE_TRACES_PER_S` when ``None``). Pure."""
    rate = JUDGE_SAMPLES_PER_S.get(judge)
    if not rate:
        return 1.0
    share = JUDGE_HEADROOM * rate / (traffic_per_s or REFERENCE_TRACES_PER_S)
    return min(1.0, max(0.05, math.floor(share * 20 + 1e-9) / 20))
