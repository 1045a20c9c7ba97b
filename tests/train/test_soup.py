"""train.soup's weighting, on hand-made shards (numpy only: runs in CI; the soup of real runs,
with torch, is in test_pipeline.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest


def test_a_weighted_soup_weights_encoders_and_head_logits(tmp_path: Path) -> None:
    """train.soup --weights: the encoder is the weighted mean, the stacked head's output layer
    carries each run's weight, weights are normalised; bad weights are refused."""
    from train.soup import main as soup
    from train.soup import mean_weights

    rng = np.random.default_rng(0)
    runs = []
    for s in range(3):
        r = tmp_path / f"run{s}"
        r.mkdir()
        np.savez(r / "weights-0.npz", **{
            "layers.0.q.weight": rng.normal(size=(4, 4)).astype(np.float16),
            "head.0.weight": rng.normal(size=(3, 8)).astype(np.float16),
            "head.0.bias": rng.normal(size=(3,)).astype(np.float16),
            "head.3.weight": rng.normal(size=(1, 3)).astype(np.float16),
            "head.3.bias": rng.normal(size=(1,)).astype(np.float16),
            "cal_a": np.array(0.7, dtype=np.float16), "cal_b": np.array(0.1, dtype=np.float16)})
        runs.append(r)
    assert soup(["--runs", *map(str, runs), "--weights", "2", "1", "1", "--out",
                 str(tmp_path / "soup")]) == 0
    z = np.load(tmp_path / "soup" / "weights-0.npz")
    w = [np.load(r / "weights-0.npz") for r in runs]
    f = lambda k: [x[k].astype(np.float64) for x in w]  # noqa: E731
    q = f("layers.0.q.weight")
    assert np.allclose(z["layers.0.q.weight"], 0.5 * q[0] + 0.25 * q[1] + 0.25 * q[2], atol=2e-3)
    # the soup's head on one hidden input = the weighted mean of the runs' heads on it
    x = rng.normal(size=(8,))

    def head(h0w, h0b, h3w, h3b):
        return float((h3w @ np.maximum(h0w @ x + h0b, 0) + h3b)[0])

    got = head(*(z[k].astype(np.float64) for k in
                 ("head.0.weight", "head.0.bias", "head.3.weight", "head.3.bias")))
    each = [head(*(r[k].astype(np.float64) for k in
                   ("head.0.weight", "head.0.bias", "head.3.weight", "head.3.bias"))) for r in w]
    assert got == pytest.approx(0.5 * each[0] + 0.25 * each[1] + 0.25 * each[2], abs=2e-2)
    assert json.loads((tmp_path / "soup" / "soup.json").read_text())["weights"] == [0.5, 0.25, 0.25]
    # uniform without weights: the plain mean
    u = mean_weights(runs)
    assert np.allclose(u["layers.0.q.weight"], sum(q) / 3, atol=2e-3)
    for bad in (["1", "1"], ["1", "0", "1"], ["1", "-1", "1"], ["1", "nan", "1"]):
        with pytest.raises(SystemExit):
            mean_weights(runs, [float(b) for b in bad])
