"""Small, exact statistics the metrics share: average precision, Wilson intervals, cosines."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .model import Interval

__all__ = ["average_precision", "cosine", "wilson_interval"]

_Z95 = 1.959963984540054


def average_precision(verdicts: Sequence[int]) -> float:
    """RAGAS context precision over a ranking: ``sum_i(precision@i * v_i) / (sum_i v_i + 1e-10)``.

    ``verdicts`` are 0/1 in rank order. All zero (or empty) gives 0.0.
    """
    hits = 0
    total = 0.0
    for i, v in enumerate(verdicts, start=1):
        if v:
            hits += 1
            total += hits / i
    return min(1.0, total / (hits + 1e-10)) if hits else 0.0


def wilson_interval(successes: float, trials: float, level: float = 0.95) -> Interval | None:
    """Wilson score interval for ``successes`` out of ``trials`` Bernoulli verdicts; ``None`` when
    ``trials`` is 0.

    Two supported statements out of two give [0.34, 1.0]; forty out of forty give [0.91, 1.0].
    """
    if trials <= 0:
        return None
    z = _Z95 if level == 0.95 else _z(level)
    p = successes / trials
    denom = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denom
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denom
    return Interval(low=max(0.0, centre - half), high=min(1.0, centre + half), level=level)


def _z(level: float) -> float:
    from statistics import NormalDist

    return NormalDist().inv_cdf(0.5 + level / 2)


def cosine(left: np.ndarray, right: np.ndarray) -> float:
    """Cosine similarity of two vectors; 0.0 when either is all zero."""
    na = float(np.linalg.norm(left))
    nb = float(np.linalg.norm(right))
    if na == 0.0 or nb == 0.0:
        return 0.0
    return float(np.dot(left, right) / (na * nb))


def clamp01(value: float) -> float:
    """Clamp into [0, 1]; NaN becomes 0.0 (a score is never NaN)."""
    if value != value:  # NaN
        return 0.0
    return 0.0 if value < 0.0 else 1.0 if value > 1.0 else float(value)
