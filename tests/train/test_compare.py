"""train.compare: the paired bootstrap resamples documents (rows sharing contexts), not rows;
rows files written before ``group`` existed are grouped from the set's file."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from train.compare import compare, read
from train.evaluate import context_group


def _set(tmp_path: Path, docs: int = 12, per_doc: int = 15) -> tuple[Path, list[dict]]:
    rows = [{"id": f"d{d}", "contexts": [f"article {d} text"], "answer": f"summary {k}",
             "label": {"faithful": int(k % 2)}} for d in range(docs) for k in range(per_doc)]
    path = tmp_path / "set.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path, rows


def _rows_file(out: Path, path: Path, rows: list[dict], values: np.ndarray,
               group: bool) -> str:
    with open(out, "w") as f:
        for i, (r, v) in enumerate(zip(rows, values, strict=True)):
            line = {"set": "faithbench", "path": str(path), "row": i, "id": r["id"],
                    "label": r["label"]["faithful"], "value": float(v)}
            if group:
                line["group"] = context_group(r)
            f.write(json.dumps(line) + "\n")
    return str(out)


def test_documents_are_resampled_together(tmp_path: Path) -> None:
    path, rows = _set(tmp_path)
    rng = np.random.default_rng(0)
    y = np.array([r["label"]["faithful"] for r in rows])
    doc = np.repeat(np.arange(12), 15)
    # b differs from a by a per-document effect: some articles favour b, others a
    effect = rng.normal(0, 0.6, 12)[doc]
    va = y + rng.normal(0, 1.0, len(y))
    vb = va + effect * (2 * y - 1)
    a = read(_rows_file(tmp_path / "a.jsonl", path, rows, va, group=True))
    b = read(_rows_file(tmp_path / "b.jsonl", path, rows, vb, group=True))
    got = compare(a, b, reps=400)["sets"][str(path)]
    assert got["grouped"] and got["documents"] == 12 and got["n"] == 180
    # the same rows, each its own document (no group and no readable file): a narrower interval
    for n in ("a", "b"):
        src = tmp_path / f"{n}.jsonl"
        lines = [json.loads(x) for x in src.read_text().splitlines()]
        src.write_text("".join(json.dumps({**x, "path": "gone.jsonl"} | {"group": None}) + "\n"
                               for x in lines))
    flat = compare(read(str(tmp_path / "a.jsonl")), read(str(tmp_path / "b.jsonl")),
                   reps=400)["sets"]["gone.jsonl"]
    assert not flat["grouped"] and flat["documents"] == 180
    assert flat["diff"] == got["diff"]
    assert (got["p95"] - got["p05"]) > 1.3 * (flat["p95"] - flat["p05"])


def test_old_rows_files_are_grouped_from_the_set_file(tmp_path: Path) -> None:
    path, rows = _set(tmp_path, docs=5, per_doc=4)
    v = np.linspace(0, 1, len(rows))
    old = read(_rows_file(tmp_path / "old.jsonl", path, rows, v, group=False))
    new = read(_rows_file(tmp_path / "new.jsonl", path, rows, v, group=True))
    assert old == new  # the same documents, from the file
    res = compare(old, new, reps=50)["sets"][str(path)]
    assert res["grouped"] and res["documents"] == 5 and res["diff"] == 0.0
    # a rows file that skipped a row (a missing value) cannot be matched to the file by number
    short = tmp_path / "short.jsonl"
    _rows_file(short, path, rows[:-1], v[:-1], group=False)
    assert all(g is None for _, _, g in read(str(short))[str(path)].values())
