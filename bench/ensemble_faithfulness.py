"""Does a simple combination of the two local faithfulness detectors beat ``support-lr@5``
on every set? Leave-one-dataset-out (LODO): every choice (a weight, a regression) is made on
the other sets and scored on the held-out one.

Two steps; the first is slow (both judges through the real engine path, bench/quality.py's
``score_set``), the second is numpy on the cache:

    .venv/bin/python bench/ensemble_faithfulness.py dump --data /work/shared/data \\
        --judge fast --cache /tmp/ensemble
    .venv/bin/python bench/ensemble_faithfulness.py dump --data /work/shared/data \\
        --judge model --cache /tmp/ensemble
    .venv/bin/python bench/ensemble_faithfulness.py analyze --cache /tmp/ensemble

Sets (label = faithful; one per-sample ``faithfulness`` value per detector): the hand-written
RAG dev set (bench/data, all rows), JNLI validation entailment (1) vs contradiction (0), and
QAGS-CNNDM, HaluEval, FaithBench; all rows by default (the model judge takes ~8 min on 2 cores, most
of it FaithBench), or the first ``--jnli-limit`` JNLI e/c rows in file order and the first
``--limit`` rows of the others (paired rows kept together, as bench/quality.py), e.g.
``--limit 300 --jnli-limit 600``. The results are in docs/history/local-faithfulness.md. The cache is
one JSON file per (judge, set) under ``--cache`` (outside the repository), named by the judge's
name (``fast__dev.json``, ``model__dev.json``; files of the old names ``local``/``local-model``,
from before issue 39's rename, are not read: dump again); a present file made with the same
limits is not recomputed. ``--judge`` takes the old names too, with the registry's warning.

Combinations of the two per-sample scores ``l`` (lr@5) and ``m`` (model):
weighted mean ``w*m + (1-w)*l`` (w on a 0.05 grid), the same on per-set ranks, max, min, and a
2-feature logistic regression on logit(l), logit(m) fitted on the pooled other sets (each set
weighted equally). A weight is chosen to maximise the mean AUROC over the other sets.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from bench import quality as q
from bench.judges import add_judge_option

REPO = Path(__file__).resolve().parent.parent
LEXICAL, MODEL = "fast", "model"
"""The two judges combined (ragpulse.scorer.judges.registry): support-lr@5's and the model's."""
SETS = ("dev_handwritten", "jnli_ent_vs_con", "qags_cnndm", "halueval", "faithbench")


def load_set(name: str, data: Path, limit: int, jnli_limit: int) -> tuple[list[dict[str, Any]], list[int]]:
    if name == "dev_handwritten":
        rows = q.read_jsonl(REPO / "bench" / "data" / "faithfulness_rag_handwritten.jsonl", None)
        return rows, [int(r["label"]["faithful"]) for r in rows]
    if name == "jnli_ent_vs_con":
        raw = [r for r in q.read_jsonl(data / "jnli_ja_valid.jsonl", None)
               if r["label"] in ("entailment", "contradiction")][:jnli_limit or None]
        rows = [{"id": f"jnli-{r['sentence_pair_id']}", "question": "", "contexts": [r["sentence1"]],
                 "answer": r["sentence2"]} for r in raw]
        return rows, [int(r["label"] == "entailment") for r in raw]
    rows = q.read_jsonl(data / f"faithfulness_{name}.jsonl", limit or None)
    return rows, [int(r["label"]["faithful"]) for r in rows]


async def dump(args: argparse.Namespace) -> int:
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    judge = q.build(args.judge, None, None)
    try:
        for name in args.sets:
            out = cache / f"{args.judge}__{name}.json"
            if out.exists():
                old = json.loads(out.read_text())
                if (old["limit"], old["jnli_limit"]) == (args.limit, args.jnli_limit):
                    print(f"{out}: cached", file=sys.stderr)
                    continue
            rows, labels = load_set(name, Path(args.data), args.limit, args.jnli_limit)
            vals = await q.score_set(judge, rows, "faithfulness", f"{args.judge}/{name}",
                                     args.concurrency)
            out.write_text(json.dumps({"judge": args.judge, "set": name, "limit": args.limit,
                                       "jnli_limit": args.jnli_limit,
                                       "ids": [r["id"] for r in rows], "labels": labels,
                                       "scores": vals}))
            print(f"{out}: {len(rows)} rows, AUROC "
                  f"{q.auroc(*q._valid(vals, labels)[:2]):.3f}", file=sys.stderr)
    finally:
        await judge.aclose()
    return 0


# --------------------------------------------------------------------------- analysis


def load_cache(cache: Path) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per set: lr@5 scores, model scores, labels (rows where either has no value dropped)."""
    out = {}
    for name in SETS:
        a = json.loads((cache / f"{LEXICAL}__{name}.json").read_text())
        b = json.loads((cache / f"{MODEL}__{name}.json").read_text())
        if a["ids"] != b["ids"]:
            raise SystemExit(f"{name}: the two caches hold different rows")
        keep = [i for i in range(len(a["ids"]))
                if a["scores"][i] is not None and b["scores"][i] is not None]
        out[name] = (np.array([a["scores"][i] for i in keep], dtype=float),
                     np.array([b["scores"][i] for i in keep], dtype=float),
                     np.array([a["labels"][i] for i in keep], dtype=int))
    return out


def _logit(x: np.ndarray) -> np.ndarray:
    x = np.clip(x, 1e-4, 1 - 1e-4)
    return np.log(x / (1 - x))


def _ranks(x: np.ndarray) -> np.ndarray:
    order = np.argsort(x, kind="mergesort")
    r = np.empty(len(x))
    r[order] = np.arange(len(x))
    # ties: average rank
    _, inv = np.unique(x, return_inverse=True)
    sums = np.bincount(inv, weights=r)
    cnt = np.bincount(inv)
    return (sums / cnt)[inv] / max(len(x) - 1, 1)


GRID = np.round(np.arange(0.0, 1.0001, 0.05), 2)


def mean_combo(lr: np.ndarray, m: np.ndarray, w: float) -> np.ndarray:
    return w * m + (1 - w) * lr


def rank_combo(lr: np.ndarray, m: np.ndarray, w: float) -> np.ndarray:
    return w * _ranks(m) + (1 - w) * _ranks(lr)


def fit_lr(X: np.ndarray, y: np.ndarray, sw: np.ndarray, l2: float = 1e-2,
           steps: int = 50) -> np.ndarray:
    """Weighted logistic regression (Newton), intercept first; ``X`` without the ones column."""
    A = np.hstack([np.ones((len(X), 1)), X])
    beta = np.zeros(A.shape[1])
    for _ in range(steps):
        p = 1 / (1 + np.exp(-A @ beta))
        g = A.T @ (sw * (p - y)) + l2 * np.r_[0, beta[1:]]
        H = (A * (sw * p * (1 - p))[:, None]).T @ A + l2 * np.diag(np.r_[0, np.ones(len(beta) - 1)])
        beta -= np.linalg.solve(H, g)
    return beta


def lodo(data: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]) -> list[dict[str, Any]]:
    names = list(data)
    rows = []
    for held in names:
        train = [n for n in names if n != held]
        lr, m, y = data[held]
        r: dict[str, Any] = {"set": held, "n": len(y), "pos": int(y.sum()),
                             "lr5": q.auroc(lr, y), "model": q.auroc(m, y),
                             "max": q.auroc(np.maximum(lr, m), y),
                             "min": q.auroc(np.minimum(lr, m), y)}
        for key, fn in (("mean", mean_combo), ("rankmean", rank_combo)):
            train_auc = [np.mean([q.auroc(fn(*data[n][:2], w), data[n][2]) for n in train])
                         for w in GRID]
            w = float(GRID[int(np.argmax(train_auc))])
            r[key] = q.auroc(fn(lr, m, w), y)
            r[key + "_w"] = w
        X = np.vstack([np.c_[_logit(data[n][0]), _logit(data[n][1])] for n in train])
        Y = np.concatenate([data[n][2] for n in train])
        sw = np.concatenate([np.full(len(data[n][2]), 1 / len(data[n][2])) for n in train])
        beta = fit_lr(X, Y.astype(float), sw / sw.mean())
        r["lr2"] = q.auroc(np.c_[_logit(lr), _logit(m)] @ beta[1:], y)
        r["lr2_beta"] = [round(float(b), 3) for b in beta]
        # oracles: weight / regression chosen on the held-out set itself (upper bounds, not results)
        Xh = np.c_[_logit(lr), _logit(m)]
        r["lr2_oracle"] = q.auroc(Xh @ fit_lr(Xh, y.astype(float), np.ones(len(y)))[1:], y)
        oracle = [q.auroc(mean_combo(lr, m, w), y) for w in GRID]
        r["mean_oracle"] = max(oracle)
        r["mean_oracle_w"] = float(GRID[int(np.argmax(oracle))])
        rows.append(r)
    return rows


def analyze(args: argparse.Namespace) -> int:
    data = load_cache(Path(args.cache))
    rows = lodo(data)
    combos = ("mean", "rankmean", "max", "min", "lr2")
    print("| set | n (faithful) | lr@5 | model | weighted mean (w on model, LODO) | rank mean (w) "
          "| max | min | 2-feature LR (LODO) | best of the LODO combinations on this set (optimistic) "
          "| beats lr@5? | oracle weighted mean (w chosen on this set) | oracle 2-feature LR "
          "(fitted on this set) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    wins = {c: 0 for c in combos}
    for r in rows:
        best = max(("mean", "rankmean", "lr2"), key=lambda c: r[c])
        for c in combos:
            wins[c] += r[c] > r["lr5"]
        print(f"| {r['set']} | {r['n']} ({r['pos']}) | {r['lr5']:.3f} | {r['model']:.3f} | "
              f"{r['mean']:.3f} (w={r['mean_w']:.2f}) | {r['rankmean']:.3f} (w={r['rankmean_w']:.2f}) "
              f"| {r['max']:.3f} | {r['min']:.3f} | {r['lr2']:.3f} (b={r['lr2_beta']}) | "
              f"{best} {r[best]:.3f} | {'yes' if r[best] > r['lr5'] else 'no'} | "
              f"{r['mean_oracle']:.3f} (w={r['mean_oracle_w']:.2f}) | {r['lr2_oracle']:.3f} |")
    print()
    print(f"sets where each combination beats lr@5 (of {len(rows)}): "
          + ", ".join(f"{c} {wins[c]}" for c in combos))
    every = [c for c in combos if wins[c] == len(rows)]
    print("beats lr@5 on every set under LODO:", ", ".join(every) if every else "none")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump", help="score every set with one judge, cache per-sample values")
    d.add_argument("--data", required=True, help="the shared data directory (read in place)")
    add_judge_option(d, LEXICAL, MODEL, required=True)
    d.add_argument("--cache", default="/tmp/ensemble")
    d.add_argument("--limit", type=int, default=0,
                   help="first rows of QAGS, HaluEval, FaithBench (default 0: all)")
    d.add_argument("--jnli-limit", type=int, default=0,
                   help="first entailment/contradiction rows of JNLI (default 0: all)")
    d.add_argument("--sets", nargs="*", default=list(SETS), choices=SETS)
    d.add_argument("--concurrency", type=int, default=4)
    a = sub.add_parser("analyze", help="LODO combination table from the cache")
    a.add_argument("--cache", default="/tmp/ensemble")
    args = p.parse_args(argv)
    if args.cmd == "dump":
        return asyncio.run(dump(args))
    return analyze(args)


if __name__ == "__main__":
    raise SystemExit(main())
