"""Train and evaluate the local faithfulness detector (``judges/local/support_detector.py``).

Reproducible (no randomness beyond a fixed fold assignment by group hash) and offline. Reads the
labeled sets from ``--data`` (default ``../shared/data`` relative to the repository), never
copies them, and writes the weights JSON (default: the shipped file).

    .venv/bin/python bench/train_faithfulness.py --data ../shared/data            # eval + ship
    .venv/bin/python bench/train_faithfulness.py --data D --out /tmp/w.json --no-eval

Method (docs/local-faithfulness.md; each version's measurements in
docs/history/local-faithfulness.md): statement features from ``featurize``; labels are per
sample, so training is multiple-instance: every statement of a faithful sample is a positive;
an unfaithful sample with one statement gives one negative, and one with several statements
contributes its least supported statement (under the previous round's model) as the negative.
Each data set gets the same total weight and, inside it, each class the same weight, so no set
dominates and the intercept does not learn a prior. The L2 strength is chosen by
leave-one-dataset-out AUROC (transfer to an unseen set), and the logit is then recalibrated by a
1-D Platt fit so strong shrinkage does not squash the probabilities. The copy floor (the
probability of a copy-like statement, ``featurize_with_copies``) is P(faithful | copy-like)
measured on the training rows; the threshold is the best statement-level balanced accuracy out
of fold, floor applied.

A synthetic set of perturbations cut from the same contexts (a copied sentence vs. the same
sentence with a number, a name or its negation changed) checks the obvious cases out of fold;
by default it is not trained on (``--synthetic-weight 0``): training on it lowered the
leave-one-dataset-out AUROC on QAGS while the labeled-only model already ranks it at ~0.99. Evaluation: grouped k-fold (same article /
question / image never in train and test) and leave-one-dataset-out, sample-level AUROC with
the sample score = mean or min of its statement probabilities.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import random
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ragpulse.scorer.embeddings import USEEmbedder
from ragpulse.scorer.judges.local.support_detector import (
    DEFAULT_WEIGHTS_PATH,
    FEATURES,
    SupportSettings,
    SupportWeights,
    _entities,
    _normalize,
    _numbers,
    calibrated_proba,
    clause_means,
    featurize_with_copies,
    paraphrase_like,
    split_clauses,
)
from ragpulse.scorer.segment import split_sentences, split_statements

# @2: particle-free CJK bigrams, copy floor; @3: clause split; @4: rewording-tolerant features
# (synonyms, range and CJK-numeral normalization, soft coverage) and a monotone (isotonic)
# calibration of the logit.
VERSION = "support-lr@5"
REPO = Path(__file__).resolve().parent.parent

# Balanced accuracy is flat near its optimum (0.715-0.720 for thresholds 0.61-0.70 with the
# shipped features). ``--threshold-tolerance`` keeps the lowest threshold that close to the
# best (fewer faithful paraphrases called unsupported). Not the default: measured with 0.005
# (threshold 0.62 instead of 0.70), the thresholded sample AUROC the metric reports fell on
# QAGS (0.749 -> 0.693) and HaluEval (0.974 -> 0.954) and rose only on FaithBench (0.540 -> 0.594).
THRESHOLD_TOLERANCE = 0.0


@dataclass
class Example:
    dataset: str
    group: str  # source article / question / image: never split across train and test
    id: str
    statements: list[str]
    contexts: list[str]
    label: int  # 1 faithful
    answer_len: int  # words (or chars / 2 for CJK), for the length-matched control
    source: str = ""  # for synthetic examples: the labeled set whose context they were cut from
    # Clauses per statement (``split_clauses``, set by ``features``): feature rows are clauses,
    # as the detector scores them, and a statement's probability is the mean of its clauses.
    clauses: list[int] | None = None


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


SYNTHETIC = "synthetic"
_AUX = re.compile(r"\b(is|are|was|were|has|have|had|can|will|would|could|should|did|does|do)\b")
_EN_NEG = re.compile(r"\s+(?:not|never)\b|n't\b")
_JA_FLIPS = (("ました。", "ませんでした。"), ("ます。", "ません。"), ("ている。", "ていない。"),
             ("である。", "ではない。"), ("した。", "しなかった。"))


def synthesize(examples: Sequence[Example], per_context: int = 2, max_contexts: int = 250,
               seed: int = 0) -> list[Example]:
    """Perturbation examples in the FactCC manner (Kryscinski et al., 2020) cut from the labeled
    sets' own contexts: a context sentence copied (or cut at a comma) is supported; the same
    sentence with a number changed, a name swapped for one from another article, or its
    negation flipped is not. The labeled sets rarely exercise these errors, so without this the
    regression gives numbers, names and negation almost no weight. Each example keeps its
    source's group, so grouped CV and leave-one-dataset-out never see a test article's
    perturbations in training."""
    rng = random.Random(seed)
    by_src: dict[str, dict[str, Example]] = {}
    for e in examples:
        by_src.setdefault(e.dataset, {}).setdefault("\n".join(e.contexts), e)
    by_ctx: dict[str, Example] = {}
    for src in sorted(by_src):  # at most max_contexts per set, so JNLI's captions don't dominate
        keys = sorted(by_src[src])
        rng.shuffle(keys)
        by_ctx.update((k, by_src[src][k]) for k in keys[:max_contexts])
    pools: dict[bool, list[str]] = {False: [], True: []}  # is CJK -> names seen
    for ctx in by_ctx:
        for ent in sorted(_entities(_normalize(ctx))):
            pools[bool(re.search(r"[\u3040-\u9fff]", ent))].append(ent)
    out: list[Example] = []
    for ctx, src in by_ctx.items():
        norm = _normalize(ctx)
        sents = [t for t in split_sentences(norm) if 6 <= _n_words(t) <= 60 or
                 (not t.isascii() and 12 <= len(t) <= 120)]
        rng.shuffle(sents)
        ctx_nums = _numbers(norm)
        for k, sent in enumerate(sents[:per_context]):
            def add(text: str, label: int, kind: str, src: Example = src, k: int = k) -> None:
                out.append(Example(SYNTHETIC, src.group, f"{src.id}~{k}~{kind}", [text],
                                   list(src.contexts), label, _n_words(text), src.dataset))

            add(sent, 1, "copy")
            head = re.split(r"[,、，]\s*", sent)[0]
            if head != sent and _n_words(head) >= 5:
                add(head.rstrip() + ("." if head.isascii() else "。"), 1, "cut")
            nums = [m for m in re.finditer(r"\d+", sent)]
            if nums:
                m = rng.choice(nums)
                n = int(m.group(0))
                for _ in range(10):
                    new = n + rng.choice([-1, 1]) * rng.randint(1, max(3, n // 4 + 1))
                    if new >= 0 and str(new) not in ctx_nums:
                        add(sent[: m.start()] + str(new) + sent[m.end() :], 0, "number")
                        break
            ents = sorted(_entities(sent))
            if ents:
                ent = rng.choice(ents)
                pool = pools[bool(re.search(r"[\u3040-\u9fff]", ent))]
                cands = [c for c in rng.sample(pool, min(30, len(pool))) if c.lower() not in
                         norm.lower()]
                if cands:
                    add(sent.replace(ent, cands[0]), 0, "entity")
            flipped = None
            if _EN_NEG.search(sent):
                flipped = _EN_NEG.sub("", sent, count=1)
            elif _AUX.search(sent):
                flipped = _AUX.sub(lambda a: a.group(0) + " not", sent, count=1)
            else:
                for a, b in _JA_FLIPS:
                    if sent.endswith(a):
                        flipped = sent[: -len(a)] + b
                        break
            if flipped and flipped != sent:
                add(flipped, 0, "negation")
    return out


def features(examples: Sequence[Example], embedder: USEEmbedder,
             settings: SupportSettings | None = None) -> list[np.ndarray]:
    """Per example, the clause feature matrix (statements split by ``split_clauses`` as the
    detector does; ``Example.clauses`` records how many rows each statement has) with one extra
    last column: 1.0 for a copy-like clause (``featurize_with_copies``). The model reads the
    columns of ``FEATURES`` and uses the flag only for the copy floor. Multiple-instance training
    treats every clause as an instance of its sample."""
    cfg = settings or SupportSettings()
    out = []
    for e in examples:
        pieces = [split_clauses(s, cfg.clause_split_words) for s in e.statements]
        e.clauses = [len(p) for p in pieces]
        x, copies = featurize_with_copies([c for p in pieces for c in p], e.contexts, embedder,
                                          cfg)
        out.append(np.hstack([x, copies[:, None].astype(np.float64)]))
    return out


def fit_logistic(
    x: np.ndarray,
    y: np.ndarray,
    sample_weight: np.ndarray | None = None,
    l2: float = 1.0,
    max_iter: int = 100,
    tol: float = 1e-8,
) -> tuple[np.ndarray, float]:
    """L2-regularized logistic regression by Newton's method (numpy only).

    Minimizes ``sum_i w_i * logloss_i + l2/2 * ||coef||^2`` (the intercept is not penalized) on
    already standardized ``x``. Returns ``(coef, intercept)``. Deterministic; raises
    ``ValueError`` on shape mismatch or when ``y`` has a single class.
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    n, d = x.shape
    if y.shape != (n,):
        raise ValueError("y must have one label per row of x")
    if len(np.unique(y)) < 2:
        raise ValueError("both classes are needed to fit")
    w = np.ones(n) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    xa = np.hstack([x, np.ones((n, 1))])
    beta = np.zeros(d + 1)
    reg = np.full(d + 1, l2)
    reg[-1] = 0.0
    for _ in range(max_iter):
        p = 1.0 / (1.0 + np.exp(-(xa @ beta)))
        grad = xa.T @ (w * (p - y)) + reg * beta
        h = (xa * (w * p * (1 - p))[:, None]).T @ xa + np.diag(reg) + 1e-9 * np.eye(d + 1)
        step = np.linalg.solve(h, grad)
        beta -= step
        if float(np.max(np.abs(step))) < tol:
            break
    return beta[:d], float(beta[d])


def save_weights(weights: SupportWeights, path: Path) -> None:
    """Write ``weights`` as the JSON file :meth:`SupportWeights.load` reads (the detector only
    ever reads it, so the writer lives with the training)."""
    Path(path).write_text(
        json.dumps(weights.model_dump(mode="json"), indent=1, ensure_ascii=False) + "\n",
        encoding="utf-8",
    )


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

    def __init__(self, l2: float = 1.0, rounds: int = 3, synthetic_weight: float = 1.0,
                 copy_floor: bool = True, isotonic: bool = True,
                 paraphrase_floor: bool = True,
                 decisive: Sequence[int] = (), decisive_l2: float = 1.0) -> None:
        self.l2, self.rounds, self.synthetic_weight = l2, rounds, synthetic_weight
        # Columns refitted beside the logit with a light penalty (``decisive_l2``); none by
        # default (bench/experiments/substitution.py measured it, docs/history/local-faithfulness.md).
        self.decisive = list(decisive)
        self.decisive_l2 = decisive_l2
        self.use_copy_floor, self.use_isotonic = copy_floor, isotonic
        self.copy_floor: float | None = None
        self.use_paraphrase_floor = paraphrase_floor
        self.paraphrase_floor: float | None = None
        self.calibration: list[tuple[float, float]] = []

    def fit(self, feats: Sequence[np.ndarray], examples: Sequence[Example]) -> Model:
        if self.synthetic_weight == 0:
            keep = [i for i, e in enumerate(examples) if e.dataset != SYNTHETIC]
            feats, examples = [feats[i] for i in keep], [examples[i] for i in keep]
        self.copy_floor = _copy_floor(feats, examples) if self.use_copy_floor else None
        if self.use_paraphrase_floor:
            # Measured on non-copy paraphrase-like statements, and only in sets where both
            # classes have some (a set with none flagged among its negatives says nothing).
            self.paraphrase_floor = _copy_floor(
                [np.hstack([f[:, :-1], (paraphrase_like(f[:, :-1]) & (f[:, -1] == 0))[:, None]])
                 for f in feats], examples, min_flagged=5)
        feats = [f[:, :-1] for f in feats]  # the copy flag is not a regression input
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
                share = self.synthetic_weight if name == SYNTHETIC else 1.0
                for cls in (0, 1):
                    m = (d == name) & (y == cls)
                    if m.any():
                        w[m] *= share * len(y) / (2 * len(names) * w[m].sum())
            self.coef, self.intercept = fit_logistic(x, y, w, l2=self.l2)
            # Strong L2 picks a robust direction but shrinks the logits towards 0 (every
            # probability near 0.5); a 1-D Platt fit on the same rows restores calibration
            # without changing the ranking.
            z = x @ self.coef + self.intercept
            if self.decisive:
                # Decisive features (rare, but nearly conclusive when they fire: a near-copy
                # with a swapped slot, a flipped negation) are refitted beside the logit with a
                # light penalty, so the strong shrinkage above does not drown them among the
                # many correlated coverage features. Still one linear model.
                k = self.decisive
                (a, *extra), b = fit_logistic(np.hstack([z[:, None], x[:, k]]), y, w,
                                              l2=self.decisive_l2)
                self.coef = self.coef * a
                self.coef[k] += np.asarray(extra)
                self.intercept = a * self.intercept + b
            else:
                (a,), b = fit_logistic(z[:, None], y, w, l2=0.0)
                self.coef, self.intercept = self.coef * a, a * self.intercept + b
        if self.use_isotonic:
            # The sigmoid is one shape for every region of the logit; the labeled sets are
            # confidently separable at the ends (copies, changed figures) and not in the middle.
            # A weighted isotonic fit on the same rows (equal weight per set and class) keeps the
            # order and lets the ends reach the rates measured there.
            self.calibration = isotonic_knots(x @ self.coef + self.intercept, y, w)
        return self

    def logits(self, f: np.ndarray) -> np.ndarray:
        """Logits of rows holding the ``FEATURES`` columns (a trailing copy flag is ignored)."""
        f = f[:, : len(self.mean)]
        return ((f - self.mean) / self.scale) @ self.coef + self.intercept

    def proba(self, f: np.ndarray) -> np.ndarray:
        """As the detector computes it (``support_detector.calibrated_proba``): the calibrated logit,
        raised to the copy floor for rows whose trailing copy flag is set."""
        p = calibrated_proba(self.logits(f), f[:, -1] > 0, self.copy_floor, self.calibration)
        if self.paraphrase_floor is not None:
            p = np.where(paraphrase_like(f[:, :-1]), np.maximum(p, self.paraphrase_floor), p)
        return p


def isotonic_knots(z: np.ndarray, y: np.ndarray, w: np.ndarray,
                   clip: tuple[float, float] = (0.01, 0.99)) -> list[tuple[float, float]]:
    """Weighted isotonic regression of ``y`` on ``z`` (pool adjacent violators) as knots
    ``(mean logit of a block, its rate)`` with strictly increasing logits and rates, rates clipped
    to ``clip`` (no statement is certain). Deterministic."""
    order = np.argsort(z, kind="mergesort")
    blocks: list[list[float]] = []  # [sum w*y, sum w, sum w*z]
    for i in order:
        blocks.append([w[i] * y[i], w[i], w[i] * z[i]])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] >= blocks[-1][0] / blocks[-1][1]:
            last = blocks.pop()
            blocks[-1] = [a + b for a, b in zip(blocks[-1], last)]
    knots: list[tuple[float, float]] = []
    for wy, ww, wz in blocks:
        zc, pc = wz / ww, min(clip[1], max(clip[0], wy / ww))
        if knots and (zc <= knots[-1][0] or pc <= knots[-1][1]):
            continue  # a clipped or degenerate block adds no new level
        knots.append((round(float(zc), 4), round(float(pc), 4)))
    return knots


def _copy_floor(feats: Sequence[np.ndarray], examples: Sequence[Example],
                min_flagged: int = 0) -> float | None:
    """P(faithful | copy-like) on statements with a known label (every statement of a faithful
    sample, the statement of a one-statement unfaithful sample), at equal class weight inside
    each labeled set (the training prior) and averaged over the sets with at least 20 known
    statements of each class (fewer give a meaningless rate) and, with ``min_flagged``, at least
    that many flagged statements in each class. ``None`` when no set qualifies."""
    rates: dict[str, list[list[float]]] = {}
    for f, e in zip(feats, examples):
        if e.dataset == SYNTHETIC or (e.label == 0 and len(f) > 1):
            continue
        rates.setdefault(e.dataset, [[], []])[e.label].extend(f[:, -1].tolist())
    prec = []
    for neg, pos in rates.values():
        if min_flagged and min(sum(neg), sum(pos)) < min_flagged:
            continue
        if len(neg) >= 20 and len(pos) >= 20 and (sum(neg) or sum(pos)):
            tpr, fpr = float(np.mean(pos)), float(np.mean(neg))
            prec.append(tpr / (tpr + fpr))
    return round(float(np.mean(prec)), 3) if prec else None


def _fold_of(group: str, k: int) -> int:
    return int(hashlib.sha256(group.encode()).hexdigest(), 16) % k


# Sample score from statement probabilities. "mean" and "min" are the candidates for shipping;
# "mean" is what the local judge reports as faithfulness: the expected share of supported
# statements (metrics.EXPECTED_SHARE). Diagnostics of sample-level pooling (FaithBench calls a
# summary unfaithful if any span is marked): "prod" = log P(all statements supported) under
# independence (noisy-AND), "softmin5" = -log(mean(exp(-5 p))) / 5, between mean and min.
AGGREGATES: dict[str, Callable[[np.ndarray], float]] = {
    "mean": lambda p: float(np.mean(p)),
    "min": lambda p: float(np.min(p)),
    "prod": lambda p: float(np.sum(np.log(np.clip(p, 1e-12, 1.0)))),
    "softmin5": lambda p: float(-np.log(np.mean(np.exp(-5.0 * p))) / 5.0),
}


def statement_proba(model: Model, f: np.ndarray, e: Example) -> np.ndarray:
    """What ``SupportDetector.predict`` returns: per statement, the mean over its clause rows."""
    p = model.proba(f)
    return p if e.clauses is None else np.asarray(clause_means(p, e.clauses))


def sample_scores(model: Model, feats: Sequence[np.ndarray], agg: str,
                  examples: Sequence[Example]) -> np.ndarray:
    return np.array([AGGREGATES[agg](statement_proba(model, f, e))
                     for f, e in zip(feats, examples)])


def evaluate(examples: list[Example], feats: list[np.ndarray], l2: float, folds: int,
             log: Callable[[str], None], synthetic_weight: float = 1.0,
             copy_floor: bool = True, threshold_tolerance: float = THRESHOLD_TOLERANCE,
             fixed_threshold: float | None = None, model_opts: dict | None = None) -> dict:
    """Grouped k-fold and leave-one-dataset-out AUROC of the support model with ``l2``, the
    verdict threshold and the length-matched and synthetic checks, as one report dict.

    Long because: the out-of-fold probabilities of the grouped cross-validation feed
    every later table (threshold, length-matched, synthetic), which share its fold arrays.
    """
    names = sorted({e.dataset for e in examples} - {SYNTHETIC})
    idx_by = {n: [i for i, e in enumerate(examples) if e.dataset == n] for n in names}
    labels = np.array([e.label for e in examples])
    report: dict = {"grouped_cv": {}, "leave_one_dataset_out": {}, "folds": folds, "l2": l2}

    # Grouped k-fold over the pooled data: out-of-fold probabilities for every statement.
    oof: list[np.ndarray | None] = [None] * len(examples)
    fold = np.array([_fold_of(e.group, folds) for e in examples])
    for k in range(folds):
        tr = [i for i in range(len(examples)) if fold[i] != k]
        te = [i for i in range(len(examples)) if fold[i] == k]
        m = Model(l2, synthetic_weight=synthetic_weight, copy_floor=copy_floor,
                  **(model_opts or {})).fit(
            [feats[i] for i in tr], [examples[i] for i in tr])
        for i in te:
            oof[i] = statement_proba(m, feats[i], examples[i])
    report["threshold"] = _pick_threshold(examples, oof, threshold_tolerance)
    if fixed_threshold is not None:  # --threshold: the balanced-accuracy optimum stays reported
        # (balanced accuracy is only computed on the grid, so none is claimed for the fixed value)
        report["threshold"] = {**report["threshold"], "value": fixed_threshold,
                               "balanced_accuracy": None, "fixed": True}
    thr = report["threshold"]["value"]
    for n in names:
        ix = idx_by[n]
        row = {agg: round(auroc([float(fn(oof[i])) for i in ix], labels[ix]), 4)
               for agg, fn in AGGREGATES.items()}
        # What the local judge reports: the share of statements at or above the threshold.
        row["share_at_threshold"] = round(
            auroc([float(np.mean(oof[i] >= thr)) for i in ix], labels[ix]), 4)
        row["n"] = len(ix)
        cv = np.array([float(np.mean(oof[i])) for i in ix])
        row["mean_faithful"] = round(float(cv[labels[ix] == 1].mean()), 3)
        row["mean_unfaithful"] = round(float(cv[labels[ix] == 0].mean()), 3)
        report["grouped_cv"][n] = row
        log(f"grouped {folds}-fold CV  {n:12s} n={len(ix):5d}  AUROC " + " ".join(
            f"{k}={v:.3f}" for k, v in row.items() if k != "n"))

    # Leave one data set out: train on the others, test on the held-out one.
    if len(names) > 1:
        for n in names:
            tr = [i for i in range(len(examples))
                  if examples[i].dataset != n and examples[i].source != n]
            m = Model(l2, synthetic_weight=synthetic_weight, copy_floor=copy_floor,
                  **(model_opts or {})).fit(
                [feats[i] for i in tr], [examples[i] for i in tr])
            ix = idx_by[n]
            row = {agg: round(auroc(sample_scores(m, [feats[i] for i in ix], agg,
                                                  [examples[i] for i in ix]), labels[ix]), 4)
                   for agg in AGGREGATES}
            # The verdict share at the shipped threshold (the judge's value before it reported
            # the expected share, i.e. "mean"): the threshold transfers worse than the ranking.
            row["share_at_threshold"] = round(auroc(
                [float(np.mean(statement_proba(m, feats[i], examples[i]) >= thr)) for i in ix],
                labels[ix]), 4)
            held = sample_scores(m, [feats[i] for i in ix], "mean", [examples[i] for i in ix])
            row["mean_faithful"] = round(float(held[labels[ix] == 1].mean()), 3)
            row["mean_unfaithful"] = round(float(held[labels[ix] == 0].mean()), 3)
            report["leave_one_dataset_out"][n] = row
            log(f"leave-one-dataset-out  {n:12s}            AUROC " + " ".join(
                f"{k}={v:.3f}" for k, v in row.items()))

    # HaluEval: right answers are much shorter than hallucinated ones (length alone ~0.94), so
    # also report AUROC inside answer-length strata, where length carries no signal.
    if "halueval" in idx_by:
        ix = idx_by["halueval"]
        report["halueval_length_matched"] = _length_matched(
            [examples[i] for i in ix], [float(np.mean(oof[i])) for i in ix])
        log(f"HaluEval length-matched (within length strata, grouped CV): "
            f"{report['halueval_length_matched']}")

    # The synthetic perturbations as a check of the obvious cases (a copied sentence against the
    # same sentence with a number, a name or its negation changed), out of fold.
    syn = [i for i, e in enumerate(examples) if e.dataset == SYNTHETIC]
    if syn:
        pos = [i for i in syn if examples[i].label == 1]
        report["synthetic_perturbations"] = {}
        for kind in ("number", "entity", "negation"):
            neg = [i for i in syn if examples[i].id.endswith("~" + kind)]
            if pos and neg:
                report["synthetic_perturbations"][kind] = {
                    "auroc": round(auroc([float(oof[i][0]) for i in pos + neg],
                                         [1] * len(pos) + [0] * len(neg)), 4),
                    "n": len(neg)}
        log(f"synthetic perturbations vs copied sentences (OOF AUROC): "
            f"{report['synthetic_perturbations']}")

    # Threshold: the lowest within the tolerance (default 0) of the best balanced accuracy on
    # out-of-fold statements with known labels (single-statement samples, and every statement
    # of a faithful sample), averaged per set.
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
    for lo, hi in itertools.pairwise(edges):
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


def _pick_threshold(examples: list[Example], oof: list,
                    tolerance: float = THRESHOLD_TOLERANCE) -> dict:
    per_set: dict[str, tuple[list[float], list[int]]] = {}
    for e, p in zip(examples, oof):
        if e.dataset == SYNTHETIC:
            continue
        if e.label == 1 or len(p) == 1:
            ps, ys = per_set.setdefault(e.dataset, ([], []))
            ps.extend(float(v) for v in p)
            ys.extend([e.label] * len(p))
    curve: list[tuple[float, float]] = []
    for t in np.linspace(0.05, 0.95, 91):
        accs = []
        for ps, ys in per_set.values():
            pa, ya = np.array(ps), np.array(ys)
            if (ya == 1).any() and (ya == 0).any():
                accs.append(((pa[ya == 1] >= t).mean() + (pa[ya == 0] < t).mean()) / 2)
        if accs:
            curve.append((float(t), float(np.mean(accs))))
    if not curve:
        return {"value": 0.5, "balanced_accuracy": float("nan")}
    top = max(curve, key=lambda c: c[1])
    low = min((c for c in curve if c[1] >= top[1] - tolerance), key=lambda c: c[0])
    return {"value": round(low[0], 3), "balanced_accuracy": round(low[1], 4),
            "best_value": round(top[0], 3), "best_balanced_accuracy": round(top[1], 4),
            "tolerance": tolerance}


def speed(data: Path, n: int, log: Callable[[str], None], threads: int = 1) -> dict:
    """Throughput of ``SupportDetector.predict`` at the brief's load: 5 contexts of 200 words
    (distinct articles per sample) and 5 statements per sample, from QAGS / FaithBench. ``cold``: every
    context is new to the embedder cache; ``warm``: the same samples again (production retrieves
    the same passages over and over)."""
    from ragpulse.scorer.judges.local.support_detector import SupportDetector

    passages: list[str] = []
    claims: list[str] = []
    seen: set[str] = set()
    for e in load(data):
        if e.dataset not in ("qags_cnndm", "faithbench"):
            continue
        claims.extend(e.statements)
        words = " ".join(e.contexts).split()
        if len(words) >= 200 and words[0] + words[-1] not in seen:
            seen.add(words[0] + words[-1])
            passages.append(" ".join(words[:200]))
    samples = [(claims[j * 5 : j * 5 + 5], passages[j * 5 : j * 5 + 5])
               for j in range(min(n, len(passages) // 5, len(claims) // 5))]
    if not samples:
        raise SystemExit(f"no passages of 200 words in {data}")
    det = SupportDetector(USEEmbedder(threads=threads).warm())
    out: dict = {"threads": threads, "samples": len(samples), "contexts": 5, "context_tokens": 200, "statements": 5}
    for label in ("cold", "warm"):
        t = time.perf_counter()
        for stm, ctxs in samples:
            det.predict(stm, ctxs)
        dt = time.perf_counter() - t
        out[f"{label}_samples_per_s"] = round(len(samples) / dt, 1)
    log(f"speed: {out}")
    return out


def _featurize(examples: list[Example], cache: Path | None) -> list[np.ndarray]:
    """The examples' features (setting each one's clauses), from ``cache`` when it exists, else
    computed and written there when ``cache`` is given."""
    if cache and cache.exists():
        import pickle

        feats, clauses = pickle.loads(cache.read_bytes())
        for e, c in zip(examples, clauses):
            e.clauses = c
        return feats
    feats = features(examples, USEEmbedder(threads=1))
    if cache:
        import pickle

        cache.write_bytes(pickle.dumps((feats, [e.clauses for e in examples])))
    return feats


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data")
    ap.add_argument("--out", type=Path, default=DEFAULT_WEIGHTS_PATH)
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--l2", type=float, nargs="+", default=[1.0, 10.0, 100.0, 1000.0, 10000.0, 100000.0],
                    help="L2 candidates; the best mean leave-one-dataset-out AUROC is shipped")
    ap.add_argument("--synthetic-per-context", type=int, default=2, metavar="K",
                    help="perturbed sentences per distinct context (0: none)")
    ap.add_argument("--synthetic-weight", type=float, default=0.0,
                    help="weight of the synthetic set relative to one labeled set in training "
                         "(0: evaluated only; training on it lowered leave-one-out AUROC)")
    ap.add_argument("--no-copy-floor", action="store_true",
                    help="ship no copy floor (copy-like statements keep the linear probability)")
    ap.add_argument("--threshold-tolerance", type=float, default=THRESHOLD_TOLERANCE,
                    help="ship the lowest threshold whose balanced accuracy is within this of "
                         "the best (0: the best)")
    ap.add_argument("--threshold", type=float, default=None,
                    help="ship this verdict threshold instead of the balanced-accuracy optimum "
                         "(support-lr@3: 0.70; the optimum 0.65 lowered the thresholded AUROC "
                         "on QAGS and HaluEval, see docs/history/local-faithfulness.md)")
    ap.add_argument("--no-paraphrase-floor", action="store_true",
                    help="ship no paraphrase floor (see support_detector.paraphrase_like)")
    ap.add_argument("--no-isotonic", action="store_true",
                    help="keep the logistic link (no isotonic calibration of the logit)")
    ap.add_argument("--features-cache", type=Path, default=None,
                    help="reuse (or write) the featurized examples here (a pickle; for ablations)")
    ap.add_argument("--jnli-limit", type=int, default=None)
    ap.add_argument("--no-eval", action="store_true", help="fit and write only")
    ap.add_argument("--report", type=Path, default=None, help="write the evaluation as JSON")
    ap.add_argument("--speed", type=int, default=0, metavar="N",
                    help="only measure predict throughput on N samples with the shipped weights")
    ap.add_argument("--threads", type=int, default=1, help="BLAS threads of the embedder (--speed)")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    ap = _parser()
    args = ap.parse_args(argv)

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    if args.speed:
        speed(args.data, args.speed, log, args.threads)
        return 0

    t0 = time.perf_counter()
    examples = load(args.data, args.jnli_limit)
    if not examples:
        ap.error(f"no known data set in {args.data}")
    if args.synthetic_per_context:
        examples += synthesize(examples, args.synthetic_per_context)
    feats = _featurize(examples, args.features_cache)
    model_opts = {"isotonic": not args.no_isotonic,
                  "paraphrase_floor": not args.no_paraphrase_floor}
    log(f"{len(examples)} samples, {sum(len(f) for f in feats)} statements featurized in "
        f"{time.perf_counter() - t0:.1f}s")

    report: dict = {}
    l2 = args.l2[0]
    aggregate, threshold = "mean", (0.5 if args.threshold is None else args.threshold)
    if not args.no_eval:
        best: tuple[float, float] | None = None
        for cand in args.l2:
            r = evaluate(examples, feats, cand, args.folds, log, args.synthetic_weight,
                         not args.no_copy_floor, args.threshold_tolerance, args.threshold,
                         model_opts)
            # Select for transfer to unseen data: leave-one-dataset-out when there are several
            # sets, else grouped CV. Only the shipped aggregates ("mean", "min") compete.
            table = r["leave_one_dataset_out"] or r["grouped_cv"]
            score = max(float(np.nanmean([v[a] for v in table.values()])) for a in ("mean", "min"))
            log(f"l2={cand:g}: selection AUROC {score:.4f}")
            if best is None or score > best[0]:
                best, report, l2 = (score, cand), r, cand
        # Aggregation by cross-validation: mean vs min, averaged over the sets.
        agg_score = {a: float(np.nanmean([v[a] for v in report["grouped_cv"].values()]))
                     for a in ("mean", "min")}
        aggregate = max(agg_score, key=agg_score.__getitem__)
        threshold = report["threshold"]["value"]
        log(f"selected l2={l2:g}, aggregate={aggregate}, threshold={threshold}")

    model = Model(l2, synthetic_weight=args.synthetic_weight,
                  copy_floor=not args.no_copy_floor, **model_opts).fit(feats, examples)
    counts = {}
    for e in examples:
        if e.dataset == SYNTHETIC and args.synthetic_weight == 0:
            continue
        c = counts.setdefault(e.dataset, {"samples": 0, "faithful": 0})
        c["samples"] += 1
        c["faithful"] += e.label
    weights = SupportWeights(
        version=VERSION, features=FEATURES, mean=tuple(model.mean), scale=tuple(model.scale),
        coef=tuple(model.coef), intercept=model.intercept, threshold=threshold,
        copy_floor=model.copy_floor, calibration=tuple(model.calibration),
        paraphrase_floor=model.paraphrase_floor,
        aggregate=aggregate, l2=l2,
        trained_on={**counts, "settings": SupportSettings().model_dump()},
        quality={k: report[k] for k in ("grouped_cv", "leave_one_dataset_out",
                                        "halueval_length_matched", "synthetic_perturbations",
                                        "threshold") if k in report},
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    save_weights(weights, args.out)
    if args.report:
        args.report.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    log("coefficients (standardized): " + ", ".join(
        f"{n}={c:+.2f}" for n, c in zip(FEATURES, model.coef)))
    log(f"wrote {args.out} (aggregate={aggregate}, threshold={threshold}) in "
        f"{time.perf_counter() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
