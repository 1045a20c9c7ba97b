"""Calibration: Platt scaling of the model's logit, P = sigmoid(a * z + b), fitted on a
held-out split (the training data's ``valid.jsonl.gz``, never a bench set), and folded into the
exported graph (``FaithModel.cal_a``/``cal_b``), so the ``nli`` judge's P(supported) is the
calibrated probability with no extra step at run time. ``a`` < 1 softens an over-confident
model (temperature 1/a).

    python -m train.calibrate --scores OUT/valid_scores.npz --out cal.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

__all__ = ["ece", "fit_platt"]


def fit_platt(z: np.ndarray, y: np.ndarray, iters: int = 100) -> tuple[float, float]:
    """(a, b) minimizing the log loss of sigmoid(a z + b) against y (Newton's method with
    step halving)."""
    z = np.asarray(z, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    X = np.stack([z, np.ones_like(z)], axis=1)

    def loss(w: np.ndarray) -> float:
        t = X @ w
        return float(np.mean(np.logaddexp(0.0, t) - y * t))

    w = np.array([1.0, 0.0])
    cur = loss(w)
    for _ in range(iters):
        p = 1.0 / (1.0 + np.exp(-(X @ w)))
        g = X.T @ (p - y)
        h = (X * (p * (1 - p))[:, None]).T @ X + 1e-9 * np.eye(2)
        step = np.linalg.solve(h, g)
        t = 1.0
        while t > 1e-6 and loss(w - t * step) > cur:
            t /= 2
        w = w - t * step
        new = loss(w)
        if cur - new < 1e-12:
            break
        cur = new
    return float(w[0]), float(w[1])


def ece(p: np.ndarray, y: np.ndarray, bins: int = 10) -> float:
    """Expected calibration error over equal-width probability bins."""
    p, y = np.asarray(p), np.asarray(y)
    edges = np.linspace(0, 1, bins + 1)
    total = 0.0
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        m = (p >= lo) & ((p < hi) if hi < 1 else (p <= hi))
        if m.any():
            total += m.sum() * abs(p[m].mean() - y[m].mean())
    return float(total / len(p))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scores", required=True, help="valid_scores.npz (logit, label) of train.train")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    s = np.load(a.scores)
    z, y = s["logit"].astype(np.float64), s["label"]
    ca, cb = fit_platt(z, y)
    before = ece(1 / (1 + np.exp(-z)), y)
    after = ece(1 / (1 + np.exp(-(ca * z + cb))), y)
    res = {"a": ca, "b": cb, "method": "platt", "n": int(len(y)), "ece_before": before,
           "ece_after": after}
    Path(a.out).write_text(json.dumps(res, indent=1) + "\n")
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
