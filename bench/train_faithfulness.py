"""Train and evaluate the local faithfulness detector (``judges/local/support.py``).

Reproducible (no randomness beyond a fixed fold assignment by group hash) and offline. Reads the
labeled sets from ``--data`` (default ``../shared/data`` relative to the repository), never
copies them, and writes the weights JSON (default: the shipped file).

    .venv/bin/python bench/train_faithfulness.py --data ../shared/data            # eval + ship
    .venv/bin/python bench/train_faithfulness.py --data D --out /tmp/w.json --no-eval

Method (docs/local-faithfulness.md): statement features from ``featurize``; labels are per
sample, so training is multiple-instance: every statement of a faithful sample is a positive;
an unfaithful sample with one statement gives one negative, and one with several statements
contributes its least supported statement (under the previous round's model) as the negative.
Each data set gets the same total weight and, inside it, each class the same weight, so no set
dominates and the intercept does not learn a prior. Evaluation: grouped k-fold (same article /
question / image never in train and test) and leave-one-dataset-out, sample-level AUROC with
the sample score = mean or min of its statement probabilities.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ragpulse.scorer.embeddings import USEEmbedder
from ragpulse.scorer.judges.local.support import (
    DEFAULT_WEIGHTS_PATH,
    FEATURES,
    SupportWeights,
    featurize,
    fit_logistic,
)
from ragpulse.scorer.segment import split_statements

VERSION = "support-lr@1"
REPO = Path(__file__).resolve().parent.parent


@dataclass
class Example:
    dataset: str
    group: str  # source article / question / image: never split across train and test
    id: str
    statements: list[str]
    contexts: list[str]
    label: int  # 1 faithful
    answer_len: int  # words (or chars / 2 for CJK), for the length-matched control


def _jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _n_words(text: str) -> int:
    return max(len(text.split()), len(text) // 4 if not text.isascii() else 0)


def load(data: Path, jnli_limit: int | None = None) -> list[Example]:
    """Every known set found in ``data`` (missing files are skipped, so tests can pass a subset)."""
    out: list[Example] = []
    spec: list[tuple[str, str, Callable[[dict], str]]] = [
        ("qags_cnndm", "faithfulness_qags_cnndm.jsonl", lambda r: r["contexts"][0][:200]),
        ("faithbench", "faithfulness_faithbench.jsonl", lambda r: r["contexts"][0][:200]),
        ("halueval", "faithfulness_halueval.jsonl", lambda r: r["id"].rsplit("-", 1)[0]),
    ]
    for name, fname, group in spec:
        p = data / fname
        if not p.exists():
            continue
        for r in _jsonl(p):
            stm = split_statements(r["answer"])
            if not stm:
                continue
            out.append(Example(name, name + ":" + group(r), r["id"], stm, list(r["contexts"]),
                               int(r["label"]["faithful"]), _n_words(r["answer"])))
    p = data / "jnli_ja_valid.jsonl"
    if p.exists():
        rows = _jsonl(p)
        if jnli_limit is not None:
            rows = rows[:jnli_limit]
        for r in rows:
            # sentence1 is the "context", sentence2 the claim; only entailment is "supported"
            # (neutral adds details the context does not state: unsupported, as in RAG).
            img = str(r.get("yjcaptions_id", r["sentence_pair_id"])).split("-")[0]
            out.append(Example("jnli_ja", "jnli_ja:" + img, "jnli-" + str(r["sentence_pair_id"]),
                               [r["sentence2"]], [r["sentence1"]],
                               int(r["label"] == "entailment"), _n_words(r["sentence2"])))
    return out


def features(examples: Sequence[Example], embedder: USEEmbedder) -> list[np.ndarray]:
    return [featurize(e.statements, e.contexts, embedder) for e in examples]


def auroc(scores: Sequence[float], labels: Sequence[int]) -> float:
    """Mann-Whitney AUROC with ties counted half; NaN when a class is missing."""
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels)
    pos, neg = s[y == 1], s[y == 0]
    if len(pos) == 0 or len(neg) == 0:
        return float("nan")
    order = np.argsort(s, kind="mergesort")
    ranks = np.empty(len(s))
    sorted_s = s[order]
    i = 0
    while i < len(s):  # average ranks over ties
        j = i
        while j + 1 < len(s) and sorted_s[j + 1] == sorted_s[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2 + 1
        i = j + 1
    r_pos = ranks[y == 1].sum()
    return float((r_pos - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg)))


class Model:
    """Standardization + logistic coefficients, fitted by multiple-instance rounds."""

    def __init__(self, l2: float = 1.0, rounds: int = 3) -> None:
        self.l2, self.rounds = l2, rounds

    def fit(self, feats: Sequence[np.ndarray], examples: Sequence[Example]) -> Model:
        allx = np.vstack(feats)
        self.mean = allx.mean(axis=0)
        self.scale = np.where(allx.std(axis=0) > 1e-9, allx.std(axis=0), 1.0)
        self.coef = np.zeros(allx.shape[1])
        self.intercept = 0.0
        for rnd in range(self.rounds):
            xs, ys, ws, ds = [], [], [], []
            for f, e in zip(feats, examples):
                if e.label == 1:
                    xs.append(f)
                    ys.extend([1] * len(f))
                    ws.extend([1.0 / len(f)] * len(f))  # one unit of weight per sample
                    ds.extend([e.dataset] * len(f))
                elif len(f) == 1 or rnd > 0:
                    k = 0 if len(f) == 1 else int(np.argmin(self.logits(f)))
                    xs.append(f[k : k + 1])
                    ys.append(0)
                    ws.append(1.0)
                    ds.append(e.dataset)
                else:
                    # Round 0 has no model to pick the culprit: spread the sample over all of
                    # its statements (noisy, corrected by the next rounds).
                    xs.append(f)
                    ys.extend([0] * len(f))
                    ws.extend([1.0 / len(f)] * len(f))
                    ds.extend([e.dataset] * len(f))
            x = (np.vstack(xs) - self.mean) / self.scale
            y, w, d = np.asarray(ys), np.asarray(ws), np.asarray(ds)
            # Equal weight per data set and per class inside it.
            names = sorted(set(ds))
            for name in names:
                for cls in (0, 1):
                    m = (d == name) & (y == cls)
                    if m.any():
                        w[m] *= len(y) / (2 * len(names) * w[m].sum())
            self.coef, self.intercept = fit_logistic(x, y, w, l2=self.l2)
        return self

    def logits(self, f: np.ndarray) -> np.ndarray:
        return ((f - self.mean) / self.scale) @ self.coef + self.intercept

    def proba(self, f: np.ndarray) -> np.ndarray:
        return 1.0 / (1.0 + np.exp(-self.logits(f)))


def _fold_of(group: str, k: int) -> int:
    return int(hashlib.sha256(group.encode()).hexdigest(), 16) % k


def sample_scores(model: Model, feats: Sequence[np.ndarray], agg: str) -> np.ndarray:
    fn = np.mean if agg == "mean" else np.min
    return np.array([float(fn(model.proba(f))) for f in feats])


def evaluate(examples: list[Example], feats: list[np.ndarray], l2: float, folds: int,
             log: Callable[[str], None]) -> dict:
    names = sorted({e.dataset for e in examples})
    idx_by = {n: [i for i, e in enumerate(examples) if e.dataset == n] for n in names}
    labels = np.array([e.label for e in examples])
    report: dict = {"grouped_cv": {}, "leave_one_dataset_out": {}, "folds": folds, "l2": l2}

    # Grouped k-fold over the pooled data: out-of-fold probabilities for every statement.
    oof: list[np.ndarray | None] = [None] * len(examples)
    fold = np.array([_fold_of(e.group, folds) for e in examples])
    for k in range(folds):
        tr = [i for i in range(len(examples)) if fold[i] != k]
        te = [i for i in range(len(examples)) if fold[i] == k]
        m = Model(l2).fit([feats[i] for i in tr], [examples[i] for i in tr])
        for i in te:
            oof[i] = m.proba(feats[i])
    for n in names:
        ix = idx_by[n]
        row = {agg: auroc([float(fn(oof[i])) for i in ix], labels[ix])
               for agg, fn in (("mean", np.mean), ("min", np.min))}
        row["n"] = len(ix)
        report["grouped_cv"][n] = row
        log(f"grouped {folds}-fold CV  {n:12s} n={len(ix):5d}  AUROC mean={row['mean']:.3f} "
            f"min={row['min']:.3f}")

    # Leave one data set out: train on the others, test on the held-out one.
    if len(names) > 1:
        for n in names:
            tr = [i for i in range(len(examples)) if examples[i].dataset != n]
            m = Model(l2).fit([feats[i] for i in tr], [examples[i] for i in tr])
            ix = idx_by[n]
            row = {agg: auroc(sample_scores(m, [feats[i] for i in ix], agg), labels[ix])
                   for agg in ("mean", "min")}
            report["leave_one_dataset_out"][n] = row
            log(f"leave-one-dataset-out  {n:12s}            AUROC mean={row['mean']:.3f} "
                f"min={row['min']:.3f}")

    # HaluEval: right answers are much shorter than hallucinated ones (length alone ~0.94), so
    # also report AUROC inside answer-length strata, where length carries no signal.
    if "halueval" in idx_by:
        ix = idx_by["halueval"]
        report["halueval_length_matched"] = _length_matched(
            [examples[i] for i in ix], [float(np.mean(oof[i])) for i in ix])
        log(f"HaluEval length-matched (within length strata, grouped CV): "
            f"{report['halueval_length_matched']}")

    # Threshold: the best balanced accuracy on out-of-fold statements with known labels
    # (single-statement samples, and every statement of a faithful sample), averaged per set.
    report["threshold"] = _pick_threshold(examples, oof)
    log(f"threshold (mean per-set balanced accuracy, OOF): {report['threshold']}")
    return report


def _length_matched(examples: list[Example], scores: list[float]) -> dict:
    edges = [0, 1, 2, 3, 5, 8, 12, 20, 10_000]
    lens = np.array([e.answer_len for e in examples])
    y = np.array([e.label for e in examples])
    s = np.array(scores)
    num = den = 0.0
    lnum = 0.0
    used = 0
    for lo, hi in zip(edges, edges[1:]):
        m = (lens > lo) & (lens <= hi)
        npos, nneg = int((y[m] == 1).sum()), int((y[m] == 0).sum())
        if npos and nneg:
            w = npos * nneg
            num += w * auroc(s[m], y[m])
            lnum += w * auroc(-lens[m].astype(float), y[m])
            den += w
            used += int(m.sum())
    if not den:
        return {"auroc": float("nan"), "n": 0}
    return {"auroc": round(num / den, 4), "length_only_auroc": round(lnum / den, 4),
            "n": used, "n_total": len(examples),
            "auroc_unmatched": round(auroc(s, y), 4),
            "length_only_unmatched": round(auroc(-lens.astype(float), y), 4)}


def _pick_threshold(examples: list[Example], oof: list) -> dict:
    per_set: dict[str, tuple[list[float], list[int]]] = {}
    for e, p in zip(examples, oof):
        if e.label == 1 or len(p) == 1:
            ps, ys = per_set.setdefault(e.dataset, ([], []))
            ps.extend(float(v) for v in p)
            ys.extend([e.label] * len(p))
    best = (0.5, -1.0)
    for t in np.linspace(0.05, 0.95, 91):
        accs = []
        for ps, ys in per_set.values():
            pa, ya = np.array(ps), np.array(ys)
            if (ya == 1).any() and (ya == 0).any():
                accs.append(((pa[ya == 1] >= t).mean() + (pa[ya == 0] < t).mean()) / 2)
        if accs and np.mean(accs) > best[1]:
            best = (float(t), float(np.mean(accs)))
    return {"value": round(best[0], 3), "balanced_accuracy": round(best[1], 4)}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data")
    ap.add_argument("--out", type=Path, default=DEFAULT_WEIGHTS_PATH)
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--l2", type=float, nargs="+", default=[1.0],
                    help="candidates; the best mean grouped-CV AUROC over sets is shipped")
    ap.add_argument("--jnli-limit", type=int, default=None)
    ap.add_argument("--no-eval", action="store_true", help="fit and write only")
    ap.add_argument("--report", type=Path, default=None, help="write the evaluation as JSON")
    args = ap.parse_args(argv)

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    t0 = time.perf_counter()
    examples = load(args.data, args.jnli_limit)
    if not examples:
        ap.error(f"no known data set in {args.data}")
    emb = USEEmbedder(threads=1)
    feats = features(examples, emb)
    log(f"{len(examples)} samples, {sum(len(f) for f in feats)} statements featurized in "
        f"{time.perf_counter() - t0:.1f}s")

    report: dict = {}
    l2 = args.l2[0]
    if not args.no_eval:
        best = None
        for cand in args.l2:
            r = evaluate(examples, feats, cand, args.folds, log)
            cv = [v[r_agg] for v in r["grouped_cv"].values() for r_agg in ("mean",)]
            score = float(np.nanmean(cv))
            log(f"l2={cand}: mean grouped-CV AUROC {score:.4f}")
            if best is None or score > best[0]:
                best, report, l2 = (score, r, cand), r, cand
        # Aggregation by cross-validation: mean vs min over the multi-statement sets.
        agg_score = {a: float(np.nanmean([v[a] for v in report["grouped_cv"].values()]))
                     for a in ("mean", "min")}
        aggregate = max(agg_score, key=agg_score.__getitem__)
        threshold = report["threshold"]["value"]
    else:
        aggregate, threshold = "mean", 0.5

    model = Model(l2).fit(feats, examples)
    counts = {}
    for e in examples:
        c = counts.setdefault(e.dataset, {"samples": 0, "faithful": 0})
        c["samples"] += 1
        c["faithful"] += e.label
    weights = SupportWeights(
        version=VERSION, features=FEATURES, mean=tuple(model.mean), scale=tuple(model.scale),
        coef=tuple(model.coef), intercept=model.intercept, threshold=threshold,
        aggregate=aggregate, l2=l2, trained_on=counts,
        quality={k: report[k] for k in ("grouped_cv", "leave_one_dataset_out",
                                        "halueval_length_matched", "threshold") if k in report},
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    weights.save(args.out)
    if args.report:
        args.report.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    log("coefficients (standardized): " + ", ".join(
        f"{n}={c:+.2f}" for n, c in zip(FEATURES, model.coef)))
    log(f"wrote {args.out} (aggregate={aggregate}, threshold={threshold}) in "
        f"{time.perf_counter() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
