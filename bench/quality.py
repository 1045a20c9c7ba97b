"""Quality of a judge against human labels: faithfulness, context relevance, answer relevancy.

Every score comes from the real engine path, ``Evaluator`` + the judge (``--judge fast`` or
``--judge llm``), on the labeled sets in ``--data`` (default ``../shared/data`` relative to the
repository; never copied into it). Prints a markdown report to stdout with the baselines of
``../shared/data/README.md`` beside each number; progress goes to stderr.

    .venv/bin/python bench/quality.py --data ../shared/data                      # fast judge
    .venv/bin/python bench/quality.py --judge llm --base-url URL --model M --limit 100
    .venv/bin/python bench/quality.py --tune          # cross-validate the fast judge's cuts
    .venv/bin/python bench/quality.py --write-docs    # also replace the section in docs/benchmarks.md
    .venv/bin/python bench/quality.py --only faithfulness --extra-faithfulness bench/data/faithfulness_rag_handwritten.jsonl

Besides the shared sets, faithfulness also runs the project's own sets, ``bench/data/faithfulness_*.jsonl``
(hand-written, committed, never trained on; see bench/data/README.md) or the files named by
``--extra-faithfulness`` (``--extra-faithfulness`` with no file: none). Their rows may carry ``lang``
and ``kind``: AUROC is then also reported per language and per kind (each kind against all rows of
the other class), beside the lexical word-share baseline.

AUROC is the Mann-Whitney rank statistic (ties get average ranks, so a constant score gives
0.5). Balanced accuracy is the mean of the two class recalls at the stated decision rule.

HaluEval's right answers are far shorter than its hallucinated ones (length alone gives AUROC
0.94), so faithfulness there is also reported within answer-length quartiles (a score that only
measures length gets about 0.5 inside a bin) and on length-matched right/hallucinated pairs.

``--tune`` reads the fast judge's continuous views (``Finding.extra``) and chooses each cut by
5-fold cross-validation (folds by question, so a question is never in train and test): it prints
every fold's cut and its held-out quality; the shipped defaults in ``LocalJudgeSettings`` are the
median fold cuts, rounded.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import math
import os
import re
import shlex
import sys
import time
from collections import Counter
from collections.abc import Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from bench.judges import add_judge_option
from ragpulse.scorer import Evaluator, Sample
from ragpulse.scorer.judges.base import Needs
from ragpulse.scorer.model import Fact, Score

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs" / "benchmarks.md"
err = Console(stderr=True)

# From ../shared/data/README.md (AUROC; balanced accuracy where marked).
BASELINES: dict[str, str] = {
    "faithbench": "lexical 0.578; GPT-4o BA 0.562, HHEM-2.1 BA 0.543",
    "qags_cnndm": "lexical 0.605",
    "halueval": "lexical 0.922 (length alone ~0.94)",
    "ctx_jsquad": "USE max cos(Q, C) 0.635",
    "ctx_halueval": "-",
    "ar_halueval": "USE cos(Q, A) 0.824",
    "ar_jsquad": "USE cos(Q, A) 0.875",
}


# --------------------------------------------------------------------------- statistics


def auroc(scores: Sequence[float], labels: Sequence[int]) -> float:
    """Area under the ROC curve as the Mann-Whitney U statistic, ties at average rank.
    NaN when one class is absent."""
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels, dtype=np.int64)
    n_pos = int(y.sum())
    n_neg = len(y) - n_pos
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    order = np.argsort(s, kind="mergesort")
    ranks = np.empty(len(s), dtype=np.float64)
    sorted_s = s[order]
    # average rank of each group of ties
    _, first, counts = np.unique(sorted_s, return_index=True, return_counts=True)
    avg = first + (counts - 1) / 2.0 + 1.0
    ranks[order] = np.repeat(avg, counts)
    return float((ranks[y == 1].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def context_group(row: dict[str, Any]) -> str:
    """The document a labelled row belongs to: a hash of its contexts. Rows of one document
    (FaithBench's summaries of one article, a hand-written scenario's faithful and unfaithful
    answer) are not independent, so a bootstrap draws them together (:func:`draw_documents`)."""
    blob = json.dumps(row.get("contexts") or [], ensure_ascii=False, sort_keys=True)
    return hashlib.sha1(blob.encode("utf-8")).hexdigest()[:12]


def document_rows(groups: Sequence[Any]) -> list[np.ndarray]:
    """Row indices of each document, given a document key per row (first-seen order)."""
    by_doc: dict[Any, list[int]] = {}
    for k, g in enumerate(groups):
        by_doc.setdefault(g, []).append(k)
    return [np.array(v) for v in by_doc.values()]


def draw_documents(docs: list[np.ndarray], rng: np.random.Generator) -> np.ndarray:
    """Row indices of one bootstrap draw of whole documents (as many as there are, with
    replacement, each with all of its rows)."""
    return np.concatenate([docs[g] for g in rng.integers(0, len(docs), len(docs))])


def nli_overrides(pairs: Sequence[str]) -> dict[str, str]:
    """``NliJudgeSettings`` fields from a script's ``--nli FIELD=VALUE`` pairs; a pair without
    ``=`` or a field the settings do not have stops the script with a clear message."""
    from ragpulse.scorer.judges.nli import NliJudgeSettings

    bad = [kv for kv in pairs if "=" not in kv]
    if bad:
        raise SystemExit(f"--nli takes FIELD=VALUE, got {bad[0]!r}")
    fields = dict(kv.split("=", 1) for kv in pairs)
    unknown = sorted(set(fields) - set(NliJudgeSettings.model_fields))
    if unknown:
        raise SystemExit(f"--nli: NliJudgeSettings has no field {unknown[0]!r}")
    return fields


def balanced_accuracy(pred: Sequence[int], labels: Sequence[int]) -> float:
    p = np.asarray(pred, dtype=bool)
    y = np.asarray(labels, dtype=bool)
    if y.all() or (~y).all():
        return float("nan")
    return float((p[y].mean() + (~p[~y]).mean()) / 2.0)


def binned_auroc(scores: Sequence[float], labels: Sequence[int], lengths: Sequence[int],
                 bins: int = 4) -> tuple[float, list[tuple[str, int, float]]]:
    """AUROC within answer-length quantile bins, and their size-weighted mean (bins holding
    one class only are skipped)."""
    s, y, n = np.asarray(scores), np.asarray(labels), np.asarray(lengths)
    edges = np.unique(np.quantile(n, np.linspace(0, 1, bins + 1)))
    rows: list[tuple[str, int, float]] = []
    total, weight = 0.0, 0
    for lo, hi in pairwise(edges):
        m = (n >= lo) & ((n <= hi) if hi == edges[-1] else (n < hi))
        a = auroc(s[m], y[m])
        rows.append((f"{int(lo)}-{int(hi)}", int(m.sum()), a))
        if not math.isnan(a):
            total += a * int(m.sum())
            weight += int(m.sum())
    return (total / weight if weight else float("nan")), rows


def _fmt(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{x:.3f}"


def distribution_rows(name: str, values: Sequence[float], labels: Sequence[int],
                      classes: Sequence[tuple[int, str]] = ((1, "faithful"), (0, "unfaithful"))
                      ) -> list[str]:
    """Markdown rows ``| set | class | n | mean | p10 | p50 | p90 | share >= 0.7 |`` of the
    score per label class (what an alert level on the absolute value sees)."""
    v, y = np.asarray(values, dtype=np.float64), np.asarray(labels)
    rows = []
    for cls, title in classes:
        x = v[y == cls]
        if not len(x):
            continue
        p10, p50, p90 = np.quantile(x, [0.1, 0.5, 0.9])
        rows.append(f"| {name} | {title} | {len(x)} | {x.mean():.3f} | {p10:.3f} | {p50:.3f} | "
                    f"{p90:.3f} | {float((x >= 0.7).mean()):.2f} |")
    return rows


# --------------------------------------------------------------------------- data


# The shared labeled sets (--data) by name, as bench/faithfulness_distributions.py and
# train/evaluate.py read them.
FILES = {"qags_cnndm": "faithfulness_qags_cnndm.jsonl", "halueval": "faithfulness_halueval.jsonl",
         "faithbench": "faithfulness_faithbench.jsonl", "jnli": "jnli_ja_valid.jsonl"}


def lang_of(row: dict[str, Any]) -> str:
    """A row's language: its ``lang`` field, else ja for kana, zh for other CJK, else en."""
    if row.get("lang"):
        return str(row["lang"])
    text = row.get("answer", "") + "".join(row.get("contexts", []))
    if re.search(r"[\u3040-\u30ff]", text):
        return "ja"
    if re.search(r"[\u4e00-\u9fff]", text):
        return "zh"
    return "en"


def read_jsonl(path: Path, limit: int | None) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    with path.open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                rows.append(json.loads(line))
    if limit is not None and limit < len(rows):
        # the first rows, rounded up to an even count: paired rows (own/other, pos/neg,
        # right/halu) are adjacent in every set, so both classes stay present
        rows = rows[: limit + limit % 2]
    return rows


def to_sample(row: dict[str, Any]) -> Sample:
    return Sample.model_validate({k: v for k, v in row.items() if k != "label"})


def group_of(sample_id: str) -> str:
    """The question / article a row belongs to ("halueval-12-right" -> "halueval-12")."""
    return re.sub(r"-(own|other|right|halu|pos|neg|ctx-own|ctx-other|\d+)$", "", sample_id)


def _length(text: str) -> int:
    """Words for Latin text, characters / 2 for CJK (one comparable 'length' for the bins)."""
    words = len(text.split())
    cjk = len(re.findall(r"[\u3040-\u30ff\u3400-\u9fff]", text))
    return max(words, cjk // 2)


# --------------------------------------------------------------------------- scoring


def build(judge: str, base_url: str | None, model: str | None) -> Any:
    from ragpulse.scorer.judges.factory import build_judge

    return build_judge(judge, base_url=base_url, model=model, threads=int(os.environ.get("RAGPULSE_THREADS", "2")))


SECTIONS = ("faithfulness", "context_relevance", "answer_relevancy")

MISSING: dict[str, Counter[str]] = {}
"""Per set: why scores had no value (reason counts), reported beside the numbers."""


async def score_set(judge: Any, rows: list[dict[str, Any]], metric: str, title: str,
                    concurrency: int) -> list[float | None]:
    """The metric's value per row (``None`` when the score has no value), via ``Evaluator``."""
    return [s.value if s is not None else None
            for s in await score_rows(judge, rows, metric, title, concurrency)]


async def score_rows(judge: Any, rows: list[dict[str, Any]], metric: str, title: str,
                     concurrency: int) -> list[Score | None]:
    """The metric's ``Score`` per row (value, counts, interval), via ``Evaluator``."""
    missing = MISSING.setdefault(title, Counter())
    ev = Evaluator(judge, [metric], max_concurrency=concurrency)
    # ids are made unique per row: FaithBench reuses one id for the 15 summaries of a document
    samples = [to_sample(r).model_copy(update={"id": f"{i}:{r['id']}"}) for i, r in enumerate(rows)]
    index = {s.id: i for i, s in enumerate(samples)}
    out: list[Score | None] = [None] * len(rows)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err, transient=False) as bar:
        task = bar.add_task(f"{title} [{metric}]", total=len(samples))
        async for res in ev.evaluate_many(samples):
            score = res.scores[0]
            out[index[res.sample_id]] = score
            if score.value is None:
                missing[score.reason or "?"] += 1
            bar.advance(task)
    return out


def _valid(values: list[float | None], labels: list[int]) -> tuple[list[float], list[int], int]:
    keep = [(v, y) for v, y in zip(values, labels) if v is not None]
    return [v for v, _ in keep], [y for _, y in keep], len(values) - len(keep)


async def quality(args: argparse.Namespace) -> str:
    data = Path(args.data)
    judge = build(args.judge, args.base_url, args.model)
    lines: list[str] = []
    t0 = time.perf_counter()

    # ---- faithfulness
    if "faithfulness" in args.only:
        lines += await _faithfulness(judge, data, args)
    if "context_relevance" in args.only:
        lines += await _context_relevance(judge, data, args)
    if "answer_relevancy" in args.only:
        lines += await _answer_relevancy(judge, data, args)
    await judge.aclose()
    lines += ["", f"Wall time {time.perf_counter() - t0:.0f} s."]
    return "\n".join(lines)


async def _faithfulness(judge: Any, data: Path, args: argparse.Namespace) -> list[str]:
    lines = ["### Faithfulness", "",
             ("Sample label `faithful`; score = `faithfulness` (share of supported statements; the "
              "fast judge reports the expected share, the mean of its calibrated P(supported), "
              "see docs/local-faithfulness.md). *Verdict share*: AUROC of supported / statements "
              "from the score's counts (the judge's thresholded verdicts). BA: balanced accuracy "
              "of \"all statements supported\" (counts: supported = statements) vs the label."), "",
             "| set | n | AUROC | AUROC, verdict share | BA | baseline (README) |",
             "|---|---|---|---|---|---|"]
    halu: tuple[list[float], list[int], list[int]] | None = None
    dist: list[str] = []
    for key, fname in (("faithbench", "faithfulness_faithbench.jsonl"),
                       ("qags_cnndm", "faithfulness_qags_cnndm.jsonl"),
                       ("halueval", "faithfulness_halueval.jsonl")):
        if not (data / fname).exists():
            lines.append(f"| {key} | - | not in --data | | | {BASELINES[key]} |")
            continue
        rows = read_jsonl(data / fname, args.limit)
        scores = await score_rows(judge, rows, "faithfulness", key, args.concurrency)
        vals = [s.value if s is not None else None for s in scores]
        labels = [int(r["label"]["faithful"]) for r in rows]
        v, y, missing = _valid(vals, labels)
        counted = [s.counts for s in scores if s is not None and s.value is not None]
        share = [c["supported"] / c["statements"] for c in counted]
        ba = balanced_accuracy([int(c["supported"] == c["statements"]) for c in counted], y)
        note = (f" ({missing} without value: "
                f"{', '.join(f'{k} {n}' for k, n in MISSING[key].most_common())})" if missing else "")
        lines.append(f"| {key} | {len(v)}{note} | {_fmt(auroc(v, y))} | {_fmt(auroc(share, y))} | "
                     f"{_fmt(ba)} | {BASELINES[key]} |")
        dist += distribution_rows(key, v, y)
        if key == "halueval":
            lens = [_length(r["answer"]) for r, x in zip(rows, vals) if x is not None]
            halu = (v, y, lens)
    jnli = data / "jnli_ja_valid.jsonl"
    if jnli.exists():
        lines += await _jnli(judge, jnli, args, dist)
    for path in args.extra_faithfulness:
        lines += await _own_faithfulness(judge, Path(path), args, dist)
    lines += ["", "Score distribution per class (the absolute level an alert on faithfulness "
              "sees; JNLI: entailment / neutral / contradiction):", "",
              "| set | class | n | mean | p10 | p50 | p90 | share >= 0.7 |",
              "|---|---|---|---|---|---|---|---|", *dist]
    if halu is not None:
        v, y, lens = halu
        mean_bin, bins = binned_auroc(v, y, lens)
        lines += ["", "HaluEval length control: AUROC within answer-length quartiles (words)",
                  "", "| length bin | n | AUROC |", "|---|---|---|"]
        lines += [f"| {b} | {n} | {_fmt(a)} |" for b, n, a in bins]
        lines += [f"| size-weighted mean | {len(v)} | {_fmt(mean_bin)} |",
                  (f"| answer length alone (shorter = faithful) | {len(v)} | "
                   f"{_fmt(auroc([-x for x in lens], y))} |")]
    return lines


_TOKEN = re.compile(r"[\u3040-\u30ff\u3400-\u9fff]|[^\W_]+", re.UNICODE)


def word_share(answer: str, contexts: Sequence[str]) -> float:
    """Lexical baseline: share of the answer's tokens (words; single characters for CJK) that
    occur in the contexts."""
    toks = [t.lower() for t in _TOKEN.findall(answer)]
    have = {t.lower() for c in contexts for t in _TOKEN.findall(c)}
    return sum(t in have for t in toks) / len(toks) if toks else 0.0


async def _own_faithfulness(judge: Any, path: Path, args: argparse.Namespace,
                            dist: list[str]) -> list[str]:
    """One of the project's own labelled faithfulness sets (bench/data): AUROC overall, per
    language and per kind, the lexical word-share baseline, the faithful mean."""
    key = path.stem.removeprefix("faithfulness_")
    rows = read_jsonl(path, args.limit)
    vals = await score_set(judge, rows, "faithfulness", key, args.concurrency)
    labels = [int(r["label"]["faithful"]) for r in rows]
    lex = [word_share(r["answer"], r["contexts"]) for r in rows]
    keep = [i for i, v in enumerate(vals) if v is not None]
    v = [float(vals[i]) for i in keep]  # type: ignore[arg-type]
    y = [labels[i] for i in keep]
    dist += distribution_rows(key, v, y)
    missing = len(rows) - len(keep)

    def row(name: str, idx: list[int]) -> str:
        sv, sy = [float(vals[i]) for i in idx], [labels[i] for i in idx]  # type: ignore[arg-type]
        pos = [a for a, b in zip(sv, sy) if b == 1]
        neg = [a for a, b in zip(sv, sy) if b == 0]
        return (f"| {name} | {sum(sy)} / {len(sy) - sum(sy)} | {_fmt(auroc(sv, sy))} | "
                f"{_fmt(auroc([lex[i] for i in idx], sy))} | "
                f"{(f'{np.mean(pos):.3f}' if pos else '-')} | {(f'{np.mean(neg):.3f}' if neg else '-')} |")

    out = ["", f"Own set `{path.name}` ({len(rows)} rows"
           + (f", {missing} without value" if missing else "") + "; hand-written, never trained on). "
           "Per kind: that kind against every row of the other class.", "",
           "| subset | faithful / unfaithful | AUROC | AUROC, word share | faithful mean | unfaithful mean |",
           "|---|---|---|---|---|---|", row("all", keep)]
    for lang in sorted({rows[i].get("lang") for i in keep if rows[i].get("lang")}):
        out.append(row(f"lang {lang}", [i for i in keep if rows[i].get("lang") == lang]))
    kinds = sorted({(labels[i], rows[i].get("kind")) for i in keep if rows[i].get("kind")}, reverse=True)
    for cls, kind in kinds:
        idx = [i for i in keep if (labels[i] == cls and rows[i].get("kind") == kind) or labels[i] != cls]
        out.append(row(f"{'faithful' if cls else 'unfaithful'}: {kind}", idx))
    return out


async def _jnli(judge: Any, path: Path, args: argparse.Namespace, dist: list[str]) -> list[str]:
    """JGLUE JNLI (Japanese NLI) as faithfulness: the premise is the context, the hypothesis
    the answer. Supported = entailment; AUROC against contradiction, against neutral (details
    the premise does not state) and against both."""
    raw = read_jsonl(path, args.limit)
    rows = [{"id": f"jnli-{r['sentence_pair_id']}", "question": "", "contexts": [r["sentence1"]],
             "answer": r["sentence2"], "label": r["label"]} for r in raw]
    vals = await score_set(judge, rows, "faithfulness", "jnli_ja", args.concurrency)
    by: dict[str, list[float]] = {"entailment": [], "neutral": [], "contradiction": []}
    for r, v in zip(rows, vals):
        if v is not None and r["label"] in by:
            by[r["label"]].append(v)
    ent, neu, con = by["entailment"], by["neutral"], by["contradiction"]

    def a(neg: list[float]) -> str:
        return _fmt(auroc(ent + neg, [1] * len(ent) + [0] * len(neg)))

    allv = ent + neu + con
    ally = [2] * len(ent) + [1] * len(neu) + [0] * len(con)
    dist += distribution_rows("jnli_ja", allv, ally,
                              ((2, "entailment"), (1, "neutral"), (0, "contradiction")))
    return ["", f"JNLI-ja (JGLUE JNLI validation, premise = context, hypothesis = answer; "
            f"{len(ent)} entailment, {len(neu)} neutral, {len(con)} contradiction):", "",
            "| JNLI-ja | AUROC |", "|---|---|",
            f"| entailment vs contradiction | {a(con)} |",
            f"| entailment vs neutral | {a(neu)} |",
            f"| entailment vs rest | {a(neu + con)} |"]


async def _context_relevance(judge: Any, data: Path, args: argparse.Namespace) -> list[str]:
    lines = ["", "### Context relevance", "",
              "Score = `context_relevance` (two 0/1/2 ratings, mean / 2: the fast judge's two views or the LLM judge's two prompts); label `has_positive`.",
              "", "| set | n | AUROC | baseline (README) |", "|---|---|---|---|"]
    seed_rows: list[str] = []
    for key, fname in (("ctx_jsquad", "context_relevance_jsquad_ja.jsonl"),
                       ("ctx_halueval", "context_relevance_halueval.jsonl")):
        rows = read_jsonl(data / fname, args.limit)
        vals = await score_set(judge, rows, "context_relevance", key, args.concurrency)
        labels = [int(r["label"]["has_positive"]) for r in rows]
        v, y, _ = _valid(vals, labels)
        lines.append(f"| {key} | {len(v)} | {_fmt(auroc(v, y))} | {BASELINES[key]} |")
        if key == "ctx_jsquad":
            for cls, name in ((1, "with the gold passage"), (0, "without it")):
                xs = np.array([a for a, b in zip(v, y) if b == cls])
                if len(xs):
                    seed_rows.append(
                        f"| {name} | {len(xs)} | {xs.mean():.3f} | {(xs >= 1 - 1e-9).mean():.3f} | "
                        f"{((xs > 1e-9) & (xs < 1 - 1e-9)).mean():.3f} | {(xs <= 1e-9).mean():.3f} |")
    lines += ["", ("JSQuAD-ja the seed-002 way (score 1 = OK, 0 = NG, between = Partial). For "
                   "orientation, seed 002's own numbers (MIRACL-ja, 100 + 100 samples, not this "
                   "file) are in the last rows."), "",
              "| set | n | mean score | OK | Partial | NG |", "|---|---|---|---|---|---|", *seed_rows,
              "| seed 002, gpt-4o-mini via RAGAS, with gold | 100 | 0.843 | 0.710 | 0.240 | 0.050 |",
              "| seed 002, gpt-4o-mini via RAGAS, without | 100 | 0.158 | 0.060 | 0.210 | 0.730 |",
              "| seed 002, gpt-4o via RAGAS, with gold | 100 | 0.792 | 0.650 | 0.250 | 0.100 |",
              "| seed 002, gpt-4o via RAGAS, without | 100 | 0.030 | 0.000 | 0.060 | 0.940 |"]
    return lines


async def _answer_relevancy(judge: Any, data: Path, args: argparse.Namespace) -> list[str]:
    lines = ["", "### Answer relevancy", "",
              "Score = `answer_relevancy`; label `relevant` (own answer vs another question's answer).",
              "", "| set | n | AUROC | baseline (README) |", "|---|---|---|---|"]
    for key, fname in (("ar_halueval", "answer_relevancy_halueval.jsonl"),
                       ("ar_jsquad", "answer_relevancy_jsquad_ja.jsonl")):
        rows = read_jsonl(data / fname, args.limit)
        vals = await score_set(judge, rows, "answer_relevancy", key, args.concurrency)
        labels = [int(r["label"]["relevant"]) for r in rows]
        v, y, _ = _valid(vals, labels)
        lines.append(f"| {key} | {len(v)} | {_fmt(auroc(v, y))} | {BASELINES[key]} |")
    return lines


# --------------------------------------------------------------------------- tuning


def _folds(groups: Sequence[str], k: int = 5) -> np.ndarray:
    return np.array([int(hashlib.sha1(g.encode()).hexdigest(), 16) % k for g in groups])


def _best_cut(x: np.ndarray, y: np.ndarray) -> float:
    """The cut on ``x`` (predict 1 when x >= cut) with the best balanced accuracy."""
    cands = np.unique(np.round(x, 3))
    best, best_ba = 0.5, -1.0
    for c in cands:
        ba = balanced_accuracy((x >= c).astype(int), y)
        if ba > best_ba:
            best, best_ba = float(c), ba
    return best


def _cv_cut(name: str, x: np.ndarray, y: np.ndarray, groups: Sequence[str]) -> list[str]:
    f = _folds(groups)
    cuts, bas = [], []
    for k in range(5):
        tr, te = f != k, f == k
        c = _best_cut(x[tr], y[tr])
        cuts.append(c)
        bas.append(balanced_accuracy((x[te] >= c).astype(int), y[te]))
    return [(f"| {name} | {len(x)} | {', '.join(f'{c:.3f}' for c in cuts)} | "
             f"{float(np.median(cuts)):.3f} | {np.nanmean(bas):.3f} | {_fmt(auroc(x, y))} |")]


def _cv_rating(name: str, x: np.ndarray, y: np.ndarray, groups: Sequence[str]) -> list[str]:
    """Two cuts (0/1/2) maximizing the AUROC of the rating, ties broken by the balanced accuracy
    of rating 2; held-out AUROC of the rating per fold."""
    f = _folds(groups)
    grid = np.round(np.arange(0.05, 0.96, 0.025), 3)
    chosen, held = [], []
    for k in range(5):
        tr, te = f != k, f == k
        best, key = (0.3, 0.5), (-1.0, -1.0)
        for lo in grid:
            for hi in grid[grid >= lo]:
                r = np.where(x[tr] >= hi, 2, np.where(x[tr] >= lo, 1, 0))
                cand = (round(auroc(r, y[tr]), 3), balanced_accuracy((r == 2).astype(int), y[tr]))
                if cand > key:
                    best, key = (float(lo), float(hi)), cand
        chosen.append(best)
        r = np.where(x[te] >= best[1], 2, np.where(x[te] >= best[0], 1, 0))
        held.append(auroc(r, y[te]))
    lo = float(np.median([c[0] for c in chosen]))
    hi = float(np.median([c[1] for c in chosen]))
    return [(f"| {name} | {len(x)} | {', '.join(f'({a:.3f}, {b:.3f})' for a, b in chosen)} | "
             f"({lo:.3f}, {hi:.3f}) | held-out rating AUROC {np.nanmean(held):.3f} | "
             f"{_fmt(auroc(x, y))} |")]


def tune(args: argparse.Namespace) -> str:
    """Cross-validate the fast judge's cuts on its continuous views (blocking).

    Long because: one judge scores four sets once, and one report holds every view's cuts:
    the rating views pool two sets' judged rows, and the comparison table reuses them.
    """
    from ragpulse.scorer.embeddings import USEEmbedder
    from ragpulse.scorer.judges.local import LocalJudge, LocalJudgeSettings

    data = Path(args.data)
    judge = LocalJudge(LocalJudgeSettings(threads=2), embedder=USEEmbedder(threads=2))
    needs = Needs(frozenset({Fact.CONTEXT_USEFUL, Fact.CONTEXT_RATINGS, Fact.CONTEXT_USED,
                             Fact.QUESTION_SIMILARITY}))

    def views(fname: str) -> list[tuple[dict[str, Any], dict[Fact, Any]]]:
        rows = read_jsonl(data / fname, args.limit)
        out = []
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                      console=err) as bar:
            t = bar.add_task(f"tune {fname}", total=len(rows))
            for r in rows:
                out.append((r, judge.judge(to_sample(r), needs)))
                bar.advance(t)
        return out

    head = ["| view | n | fold cuts | median | held-out BA | AUROC (continuous) |",
            "|---|---|---|---|---|---|"]
    lines = ["### Cross-validated cuts (5 folds by question)", "", *head]
    # per-context usefulness: JSQuAD relevant_ranks, HaluEval single contexts
    x, y, g = [], [], []
    ratings: dict[str, tuple[list[float], list[float], list[int], list[str]]] = {}
    for fname in ("context_relevance_jsquad_ja.jsonl", "context_relevance_halueval.jsonl"):
        lx, bl, ys, gs = [], [], [], []
        for r, fd in views(fname):
            rel = fd[Fact.CONTEXT_USEFUL].extra["relevance"]
            gold = set(r["label"].get("relevant_ranks", [])) if "jsquad" in fname else (
                {0} if r["label"]["has_positive"] else set())
            for i, v in enumerate(rel):
                x.append(v)
                y.append(int(i in gold))
                g.append(group_of(r["id"]))
            lx.append(fd[Fact.CONTEXT_RATINGS].extra["lexical"])
            bl.append(fd[Fact.CONTEXT_RATINGS].extra["blended"])
            ys.append(int(r["label"]["has_positive"]))
            gs.append(group_of(r["id"]))
        ratings[fname] = (lx, bl, ys, gs)
    lines += _cv_cut("useful_threshold (per context)", np.array(x), np.array(y), g)
    # ratings: both sets pooled, so one pair of cuts serves Japanese and English
    lx = np.array([v for t in ratings.values() for v in t[0]])
    bl = np.array([v for t in ratings.values() for v in t[1]])
    ys = np.array([v for t in ratings.values() for v in t[2]])
    gs = [v for t in ratings.values() for v in t[3]]
    lines += ["", "| view | n | fold cuts (0/1, 1/2) | median | held-out | AUROC (continuous) |",
              "|---|---|---|---|---|---|"]
    lines += _cv_rating("rating_lexical", lx, ys, gs)
    lines += _cv_rating("rating_semantic (blended)", bl, ys, gs)
    lines += ["", ("Rating cuts compared on the final `context_relevance` value (mean of the two "
                   "ratings / 2), per set: the shipped cuts maximize the pooled AUROC; stricter "
                   "cuts turn JSQuAD's same-article negatives from Partial into NG but lose "
                   "HaluEval's multi-hop positives, whose questions share fewer words with the "
                   "passage."), "",
              ("| lexical cuts | blended cuts | set | AUROC | with gold: mean / OK / NG | "
               "without: mean / OK / NG |"), "|---|---|---|---|---|---|"]
    for cl, cb in (((0.2, 0.45), (0.25, 0.45)), ((0.3, 0.45), (0.35, 0.5)),
                   ((0.35, 0.5), (0.4, 0.5))):
        for fname, (lx_, bl_, ys_, _) in ratings.items():
            lx_a, bl_a, ys_a = np.array(lx_), np.array(bl_), np.array(ys_)
            def r(x, c):
                return np.where(x >= c[1], 2, np.where(x >= c[0], 1, 0))
            sc = (r(lx_a, cl) + r(bl_a, cb)) / 4.0
            pos, neg = sc[ys_a == 1], sc[ys_a == 0]
            lines.append(
                f"| {cl} | {cb} | {fname.removeprefix('context_relevance_').removesuffix('.jsonl')} | "
                f"{_fmt(auroc(sc, ys_a))} | {pos.mean():.2f} / {(pos == 1).mean():.2f} / "
                f"{(pos == 0).mean():.2f} | {neg.mean():.2f} / {(neg == 1).mean():.2f} / "
                f"{(neg == 0).mean():.2f} |")
    # usage: the answer's own context vs another question's answer on the same context
    x, y, g = [], [], []
    for fname in ("answer_relevancy_halueval.jsonl", "answer_relevancy_jsquad_ja.jsonl"):
        for r, fd in views(fname):
            x.append(max(fd[Fact.CONTEXT_USED].extra["alignment"] or [0.0]))
            y.append(int(r["label"]["relevant"]))
            g.append(group_of(r["id"]))
    lines += ["", *head]
    lines += _cv_cut("used_threshold (answer from this context?)", np.array(x), np.array(y), g)
    asyncio.run(judge.aclose())
    return "\n".join(lines)


# --------------------------------------------------------------------------- docs


def write_docs(section: str, body: str, command: str) -> None:
    """Replace (or append) ``## <section>`` in docs/benchmarks.md, keeping other sections."""
    text = DOCS.read_text(encoding="utf-8") if DOCS.exists() else "# Benchmarks\n"
    load = os.getloadavg()
    block = (f"## {section}\n\nCommand: `{command}`  \nMeasured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
             f"load average {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} on {os.cpu_count()} cores.\n\n{body}\n")
    pattern = re.compile(rf"^## {re.escape(section)}\n.*?(?=^## |\Z)", re.DOTALL | re.MULTILINE)
    if pattern.search(text):
        text = pattern.sub(lambda _: block + "\n", text)
    else:
        text = text.rstrip("\n") + "\n\n" + block
    DOCS.parent.mkdir(parents=True, exist_ok=True)
    DOCS.write_text(text.rstrip("\n") + "\n", encoding="utf-8")
    from bench import figures

    for line in figures.write():
        print(f"warning: quoted figure not found: {line}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default=str(REPO.parent / "shared" / "data"))
    add_judge_option(p, "fast", "llm", default="fast")
    p.add_argument("--base-url")
    p.add_argument("--model")
    p.add_argument("--limit", type=int, help="rows per set (paired rows kept together)")
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--only", nargs="+", default=list(SECTIONS), choices=SECTIONS,
                   help="measure only these metrics (default: all)")
    p.add_argument("--extra-faithfulness", nargs="*", metavar="JSONL",
                   default=sorted(str(x) for x in (REPO / "bench" / "data").glob("faithfulness_*.jsonl")),
                   help="the project's own labelled faithfulness sets (default: bench/data/faithfulness_*.jsonl)")
    p.add_argument("--tune", action="store_true", help="cross-validate the fast judge's cuts")
    p.add_argument("--write-docs", action="store_true", help="write the result into docs/benchmarks.md")
    args = p.parse_args(argv)
    if args.write_docs and set(args.only) != set(SECTIONS):
        p.error("--write-docs replaces the whole section: measure every metric (no --only)")
    if not Path(args.data).is_dir():
        p.error(f"--data {args.data}: not a directory (the labeled sets of ../shared/data)")
    command = "python bench/quality.py " + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
    if args.tune:
        body = tune(args)
        section = "Quality (fast judge): calibration"
    else:
        body = asyncio.run(quality(args))
        section = f"Quality ({args.judge} judge)"
    print(body)
    if args.write_docs:
        write_docs(section, body, command)
        err.print(f"wrote section '{section}' of {DOCS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
