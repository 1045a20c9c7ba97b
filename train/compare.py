"""Two judges (or settings) on the same rows: AUROC per set, the difference, and its 90 %
interval by a paired bootstrap that resamples each set's rows (the same rows for both).

    python -m train.evaluate ... --sets dev --rows A.jsonl            # and --dev CONFIRM, appended
    python -m train.evaluate ... --sets dev --rows B.jsonl
    python -m train.compare A.jsonl B.jsonl [--reps 2000]

"pooled" is the mean over the sets of the per-set difference (each set weighs its row count), so
two small hand-written sets give one figure with a narrower interval than either.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict

import numpy as np

from .evaluate import auroc


def read(path: str) -> dict[str, dict[str, tuple[int, float]]]:
    out: dict[str, dict[str, tuple[int, float]]] = defaultdict(dict)
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                r = json.loads(line)
                key = f'{r.get("id")}#{r.get("row", "")}'  # ids can repeat (FaithBench)
                out[r["path"]][key] = (int(r["label"]), float(r["value"]))
    return out


def compare(a: dict, b: dict, reps: int = 2000, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    sets = sorted(set(a) & set(b))
    res: dict = {"sets": {}}
    draws = np.zeros(reps)
    total = 0
    point = 0.0
    for s in sets:
        ids = sorted(set(a[s]) & set(b[s]))
        y = np.array([a[s][i][0] for i in ids])
        va = np.array([a[s][i][1] for i in ids])
        vb = np.array([b[s][i][1] for i in ids])
        d = auroc(va, y) - auroc(vb, y)
        ds = np.empty(reps)
        for k in range(reps):
            ix = rng.integers(0, len(ids), len(ids))
            ds[k] = auroc(va[ix], y[ix]) - auroc(vb[ix], y[ix])
        res["sets"][s] = {"n": len(ids), "a": auroc(va, y), "b": auroc(vb, y), "diff": d,
                          "p05": float(np.nanpercentile(ds, 5)),
                          "p95": float(np.nanpercentile(ds, 95))}
        draws += len(ids) * np.nan_to_num(ds)
        point += len(ids) * d
        total += len(ids)
    if total:
        res["pooled"] = {"n": total, "diff": point / total,
                         "p05": float(np.percentile(draws / total, 5)),
                         "p95": float(np.percentile(draws / total, 95))}
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--reps", type=int, default=2000)
    a = ap.parse_args(argv)
    print(json.dumps(compare(read(a.a), read(a.b), a.reps), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
