"""Two judges (or settings) on the same rows: AUROC per set, the difference, and its 90 %
interval by a paired bootstrap that resamples each set's documents (the same rows for both).

Rows that share their contexts (FaithBench's summaries of one article, QAGS's of one story,
HaluEval's right and hallucinated answer to one passage, a hand-written scenario's faithful and
unfaithful answer) are not independent, so the bootstrap draws documents and takes all of their
rows: resampling rows alone gave intervals too narrow (FaithBench: 750 rows, 75 articles). The
document is the row's ``group`` (``train.evaluate --rows`` writes a hash of its contexts); rows
files written before that are grouped from the set's file at ``path`` when it holds exactly the
rows scored, else resampled by row (``"grouped": false`` in the output).

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

from bench.quality import context_group, document_rows, draw_documents

from .evaluate import auroc

Rows = dict[str, dict[str, tuple[int, float, str | None]]]


def read(path: str) -> Rows:
    """Per set file: row key -> (label, value, document)."""
    out: Rows = defaultdict(dict)
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                r = json.loads(line)
                key = f'{r.get("id")}#{r.get("row", "")}'  # ids can repeat (FaithBench)
                out[r["path"]][key] = (int(r["label"]), float(r["value"]), r.get("group"))
    for set_path, rows in out.items():
        if any(g is None for _, _, g in rows.values()):
            out[set_path] = _groups_from_file(set_path, rows)
    return out


def _groups_from_file(set_path: str, rows: dict[str, tuple[int, float, str | None]]
                      ) -> dict[str, tuple[int, float, str | None]]:
    """Rows written without ``group``: their documents from the set's file, by row number,
    when the file holds exactly those rows (nothing was skipped); else left ungrouped."""
    try:
        with open(set_path, encoding="utf-8") as f:
            data = [json.loads(line) for line in f if line.strip()]
    except (OSError, ValueError):
        return rows
    if len(data) != len(rows):
        return rows
    out = {}
    for key, (y, v, _) in rows.items():
        rid, _, row = key.rpartition("#")
        if not row.isdigit() or str(data[int(row)].get("id")) != rid:
            return rows
        out[key] = (y, v, context_group(data[int(row)]))
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
        doc = [a[s][i][2] or b[s][i][2] for i in ids]
        grouped = all(g is not None for g in doc)
        groups = document_rows(doc if grouped else range(len(ids)))
        d = auroc(va, y) - auroc(vb, y)
        ds = np.empty(reps)
        for k in range(reps):
            ix = draw_documents(groups, rng)
            ds[k] = auroc(va[ix], y[ix]) - auroc(vb[ix], y[ix])
        res["sets"][s] = {"n": len(ids), "documents": len(groups), "grouped": grouped,
                          "a": auroc(va, y), "b": auroc(vb, y), "diff": d,
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
