"""Calibration and alert levels from the per-sample faithfulness scores that
``bench/faithfulness_distributions.py`` caches (issue 22, items 4 and 8). No scoring here.

Calibration: does a sample's score mean P(faithful)? Reliability (ten equal-width bins) and ECE
per judge on the two dev splits, the hand-written RAG dev set and JNLI valid (entailment = 1,
neutral and contradiction = 0: a hypothesis the premise does not state is not supported), then
leave-one-dataset-out: a map (isotonic, or Platt on the score's logit) fitted on one dev split is
scored on the other and on every shared set (QAGS-CNNDM, HaluEval, FaithBench), none of which it
saw. QAGS's XSum half is not among the shared sets and is used for nothing here.

Alert level (the absolute "Faithfulness below X" rule): the rule compares a window's mean of
``n`` scores (``faithfulness_min_samples``, 20 by default) with X. Per set, the 1st percentile
of that mean when the whole window is faithful answers (drawn from the set's faithful answers);
X is the lowest of these over the five sets, rounded down to 0.05: on none of them do more than
1 % of windows of wholly faithful traffic fire. Beside it the share of windows that still fire
when a given share of the traffic is unfaithful.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = [
    "alert_level",
    "alert_section",
    "calibration_section",
    "ece",
    "fit_isotonic",
    "fit_platt",
    "measured_levels",
    "reliability",
    "windowed_means",
]

Caches = dict[str, tuple[dict[str, Any], list[dict[str, Any]]]]

WINDOW_N = 20
"""Samples in the alert's window: ``AlertSettings.faithfulness_min_samples``' default."""
FAITHFUL_PERCENTILE = 1.0
"""The level leaves this percentage of wholly faithful windows below it."""
DRAWS = 20000
SEED = 22


# --------------------------------------------------------------------------- calibration


def reliability(p: np.ndarray, y: np.ndarray, bins: int = 10) -> list[tuple[float, float, int, float]]:
    """(bin low, mean score, n, faithful share) per non-empty equal-width bin."""
    edges = np.linspace(0.0, 1.0, bins + 1)
    ix = np.clip(np.digitize(p, edges[1:-1]), 0, bins - 1)
    return [(float(edges[b]), float(p[ix == b].mean()), int((ix == b).sum()), float(y[ix == b].mean()))
            for b in range(bins) if (ix == b).any()]


def ece(p: np.ndarray, y: np.ndarray, bins: int = 10) -> float:
    """Expected calibration error: sum over bins of n_b / N * |mean score - faithful share|."""
    return sum(n / len(p) * abs(m - f) for _, m, n, f in reliability(p, y, bins))


def fit_isotonic(p: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pool-adjacent-violators: (x knots, y values) of a non-decreasing step map, applied with
    ``np.interp`` (linear between knots, flat outside)."""
    order = np.argsort(p, kind="mergesort")
    xs, ys = p[order].astype(np.float64), y[order].astype(np.float64)
    vals, wts, lo, hi = [], [], [], []
    for x, v in zip(xs, ys, strict=True):
        vals.append(v)
        wts.append(1.0)
        lo.append(x)
        hi.append(x)
        while len(vals) > 1 and vals[-2] >= vals[-1]:
            w = wts[-2] + wts[-1]
            vals[-2] = (vals[-2] * wts[-2] + vals[-1] * wts[-1]) / w
            wts[-2], hi[-2] = w, hi[-1]
            del vals[-1], wts[-1], lo[-1], hi[-1]
    kx = np.asarray([(a + b) / 2 for a, b in zip(lo, hi, strict=True)])
    return kx, np.asarray(vals)


def _logit(p: np.ndarray) -> np.ndarray:
    q = np.clip(p, 1e-4, 1 - 1e-4)
    return np.log(q / (1 - q))


def fit_platt(p: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """``sigmoid(a * logit(p) + b)`` minimising the log loss over a grid (a in 0.05-5, b in
    -5-5): no divergence on a nearly separable split."""
    z = _logit(p)
    best = (np.inf, 1.0, 0.0)
    for a in np.linspace(0.05, 5.0, 100):
        for b in np.linspace(-5.0, 5.0, 101):
            q = np.clip(1 / (1 + np.exp(-(a * z + b))), 1e-9, 1 - 1e-9)
            loss = -float(np.mean(y * np.log(q) + (1 - y) * np.log(1 - q)))
            if loss < best[0]:
                best = (loss, float(a), float(b))
    return best[1], best[2]


def apply_platt(ab: tuple[float, float], p: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-(ab[0] * _logit(p) + ab[1])))


def split(samples: list[dict[str, Any]], key: str) -> tuple[np.ndarray, np.ndarray]:
    """Scores and 0/1 labels of one set (JNLI: entailment 1, neutral and contradiction 0)."""
    rows = [r for r in samples if r["set"] == key and r["score"] is not None]
    p = np.asarray([r["score"] for r in rows], dtype=np.float64)
    y = np.asarray([1 if r["label"] == 1 else 0 for r in rows], dtype=np.float64)
    return p, y


DEV_SPLITS = ("dev", "jnli")
HELD_OUT = ("qags_cnndm", "halueval", "faithbench")
TITLE = {"dev": "hand-written dev", "jnli": "JNLI valid", "qags_cnndm": "QAGS-CNNDM",
         "halueval": "HaluEval", "faithbench": "FaithBench"}


def lodo(samples: list[dict[str, Any]]) -> list[tuple[str, str, str, float, float]]:
    """(method, fitted on, scored on, ECE before, ECE after) for every map fitted on one dev
    split and scored on each other set."""
    out = []
    for fit_on in DEV_SPLITS:
        p, y = split(samples, fit_on)
        if not len(p):
            continue
        iso = fit_isotonic(p, y)
        ab = fit_platt(p, y)
        for on in [k for k in DEV_SPLITS if k != fit_on] + list(HELD_OUT):
            q, t = split(samples, on)
            if not len(q):
                continue
            before = ece(q, t)
            out.append(("isotonic", fit_on, on, before, ece(np.interp(q, *iso), t)))
            out.append((f"Platt (a {ab[0]:.2f}, b {ab[1]:.2f})", fit_on, on, before,
                        ece(apply_platt(ab, q), t)))
    return out


def calibration_section(caches: Caches) -> list[str]:
    lines = ["### Calibration: does a score mean P(faithful)?", "",
             "Reliability on the two dev splits (ten bins of width 0.1; JNLI valid: entailment = "
             "faithful, neutral and contradiction = unfaithful). A calibrated judge has each bin's "
             "faithful share close to its mean score; ECE is the size-weighted gap.", "",
             "| judge | set | n | faithful share | mean score | ECE | bins: mean score → faithful share (n) |",
             "|---|---|---|---|---|---|---|"]
    for name, (_, samples) in caches.items():
        for key in DEV_SPLITS + HELD_OUT:
            p, y = split(samples, key)
            if not len(p):
                continue
            bins = ", ".join(f"{m:.2f}→{f:.2f} ({n})" for _, m, n, f in reliability(p, y))
            lines.append(f"| {name} | {TITLE[key]} | {len(p)} | {y.mean():.2f} | {p.mean():.3f} | "
                         f"{ece(p, y):.3f} | {bins} |")
    lines += ["", "Leave-one-dataset-out: a map fitted on one dev split, ECE before → after on "
              "sets it never saw.", "",
              "| judge | map | fitted on | scored on | ECE before | ECE after |",
              "|---|---|---|---|---|---|"]
    for name, (_, samples) in caches.items():
        for method, fit_on, on, b, a in lodo(samples):
            lines.append(f"| {name} | {method} | {TITLE[fit_on]} | {TITLE[on]} | {b:.3f} | {a:.3f} |")
    return lines


# --------------------------------------------------------------------------- alert level


def windowed_means(faithful: np.ndarray, unfaithful: np.ndarray, n: int, bad_share: float,
                   draws: int = DRAWS, seed: int = SEED) -> np.ndarray:
    """Means of ``draws`` windows of ``n`` samples, each unfaithful with probability
    ``bad_share``, drawn with replacement from the two classes' scores."""
    rng = np.random.default_rng(seed)
    bad = rng.random((draws, n)) < bad_share
    good_v = rng.choice(faithful, size=(draws, n))
    bad_v = rng.choice(unfaithful, size=(draws, n)) if len(unfaithful) else good_v
    return np.where(bad, bad_v, good_v).mean(1)


def faithful_p(faithful: np.ndarray, n: int = WINDOW_N, percentile: float = FAITHFUL_PERCENTILE,
               draws: int = DRAWS, seed: int = SEED) -> float:
    """The ``percentile`` of the mean of ``n`` faithful scores (windows of wholly faithful
    traffic)."""
    return float(np.percentile(windowed_means(faithful, faithful[:0], n, 0.0, draws, seed),
                               percentile))


def alert_level(faithful_by_set: dict[str, np.ndarray], n: int = WINDOW_N) -> float:
    """The rule's level: the lowest, over the sets, of :func:`faithful_p`, down to 0.05."""
    low = min(faithful_p(x, n) for x in faithful_by_set.values() if len(x))
    return math.floor(low * 20 + 1e-9) / 20


def _classes(samples: list[dict[str, Any]], key: str) -> tuple[np.ndarray, np.ndarray]:
    rows = [r for r in samples if r["set"] == key and r["score"] is not None]
    good = np.asarray([r["score"] for r in rows if r["label"] == 1], dtype=np.float64)
    bad = np.asarray([r["score"] for r in rows if r["label"] == 0], dtype=np.float64)
    return good, bad


LEVEL_SETS = ("dev", "qags_cnndm", "halueval", "faithbench", "jnli")


def measured_levels(caches: Caches) -> dict[str, float]:
    """The alert level X per judge (the rule in :func:`alert_section`)."""
    out = {}
    for name, (_, samples) in caches.items():
        good = {k: _classes(samples, k)[0] for k in LEVEL_SETS}
        good = {k: g for k, g in good.items() if len(g)}
        if good:
            out[name] = alert_level(good)
    return out


def alert_section(caches: Caches) -> list[str]:
    lines = ["### Alert level per judge", "",
             f"Rule: the absolute rule fires when a service's mean faithfulness over its window "
             f"({WINDOW_N} samples or more) is below X. Per set, p{FAITHFUL_PERCENTILE:g} is the "
             f"{FAITHFUL_PERCENTILE:g}st percentile of the mean of {WINDOW_N} scores drawn from "
             "the set's faithful answers (JNLI: entailment); X = the lowest p1 over the five "
             "sets, rounded down to 0.05, so on none of them do more than 1 % of windows of "
             "wholly faithful traffic fire. The next columns: the share of windows below X when "
             "the given share of answers is unfaithful (drawn from the set's unfaithful answers; "
             f"{DRAWS} windows each).",
             "", f"| judge | X | set | faithful mean | unfaithful mean | p{FAITHFUL_PERCENTILE:g} "
             "| fires at 0 % | 10 % | 25 % | 50 % | 100 % unfaithful |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, (_, samples) in caches.items():
        classes = {k: _classes(samples, k) for k in LEVEL_SETS}
        classes = {k: v for k, v in classes.items() if len(v[0]) and len(v[1])}
        if not classes:
            continue
        x = alert_level({k: g for k, (g, _) in classes.items()})
        for key, (g, b) in classes.items():
            fires = [float((windowed_means(g, b, WINDOW_N, s) < x).mean())
                     for s in (0.0, 0.1, 0.25, 0.5, 1.0)]
            lines.append(f"| {name} | {x:.2f} | {TITLE[key]} | {g.mean():.3f} | {b.mean():.3f} | "
                         f"{faithful_p(g):.3f} | " + " | ".join(f"{f:.0%}" for f in fires) + " |")
    return lines
