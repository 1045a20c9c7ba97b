"""Blind relabelling of the RAG corpus (issue 40, quality control).

``sample``: a share of the committed answers, per writer, as relabelling tasks that show only the
question, the passages and the answer's statements (never the first writer's labels, kinds or
support). ``agree``: the relabeller's labels against the writer's, statement by statement, per
writer batch file; a batch under the threshold is to be redone::

    python -m train.data.rag_corpus_qc sample --share 0.12 --out TASKS.jsonl \
        [--skip-relabelled train/corpus/qc/labels-*.jsonl]
    python -m train.data.rag_corpus_qc agree --labels LABELS.jsonl [--min 0.9]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import defaultdict
from pathlib import Path

from . import rag_corpus as rc


def tasks(share: float, seed: int = 0, skip: frozenset[str] = frozenset()) -> list[dict]:
    """``share`` of every batch file's answers (at least one each), as blind tasks; answers
    whose task id is in ``skip`` (relabelled before) are left out."""
    rng = random.Random(seed)
    out = []
    for path in sorted(rc.BATCHES.glob("*.jsonl.gz")):
        answers = [(r, j) for _, r, _ in rc.read_jsonl(path) if r for j in range(len(r["answers"]))
                   if f"{r['id']}#{j}" not in skip]
        if not answers:
            continue
        for r, j in rng.sample(answers, max(1, round(share * len(answers)))):
            out.append({"task": f"{r['id']}#{j}", "batch": path.name, "lang": r["lang"],
                        "question": r["question"], "contexts": r["contexts"],
                        "statements": [s["text"] for s in r["answers"][j]["statements"]]})
    rng.shuffle(out)
    return out


def agreement(labels: list[dict]) -> dict[str, tuple[int, int]]:
    """Per batch file: (statements agreed, statements relabelled)."""
    truth = {}
    for path in sorted(rc.BATCHES.glob("*.jsonl.gz")):
        for _, r, _ in rc.read_jsonl(path):
            for j, a in enumerate(r["answers"]):
                truth[f"{r['id']}#{j}"] = (path.name, [s["label"] for s in a["statements"]])
    out: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for row in labels:
        batch, want = truth[row["task"]]
        got = row["labels"]
        if len(got) != len(want):
            raise ValueError(f"{row['task']}: {len(got)} labels for {len(want)} statements")
        out[batch][0] += sum(a == b for a, b in zip(got, want))
        out[batch][1] += len(want)
    return {k: (v[0], v[1]) for k, v in out.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m train.data.rag_corpus_qc")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sp = sub.add_parser("sample")
    sp.add_argument("--share", type=float, default=0.12)
    sp.add_argument("--seed", type=int, default=0)
    sp.add_argument("--out", type=Path, required=True)
    sp.add_argument("--skip-relabelled", type=Path, nargs="*", default=[],
                    help="labels files of earlier rounds: their answers are left out")
    sp = sub.add_parser("agree")
    sp.add_argument("--labels", type=Path, nargs="+", required=True)
    sp.add_argument("--min", type=float, default=0.9)
    a = ap.parse_args(argv)
    if a.cmd == "sample":
        done = frozenset(json.loads(line)["task"] for p in a.skip_relabelled
                         for line in p.read_text(encoding="utf-8").splitlines() if line.strip())
        rows = tasks(a.share, a.seed, done)
        a.out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
        print(f"{len(rows)} tasks -> {a.out}")
        return 0
    labels = [json.loads(line) for p in a.labels for line in p.read_text(encoding="utf-8").splitlines()
              if line.strip()]
    bad = 0
    total = [0, 0]
    for batch, (ok, n) in sorted(agreement(labels).items()):
        total[0] += ok
        total[1] += n
        flag = "" if ok / n >= a.min else "  REDO"
        bad += bool(flag)
        print(f"{batch}: {ok}/{n} = {ok / n:.1%}{flag}")
    print(f"all: {total[0]}/{total[1]} = {total[0] / max(1, total[1]):.1%}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
