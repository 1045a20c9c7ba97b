"""Faithfulness AUROC of a judge on the bench sets, through the real engine path
(``Evaluator`` + the judge, as ``bench/quality.py``), per set and per language.

    python -m train.evaluate [--judge model] [--model-dir DIR] [--sets ...] [--json F]
    python -m train.evaluate --judge fast             # the lexical support-lr@5 baseline
    python -m train.evaluate --canonical-values ...   # values rewritten into one form first

``--judge`` takes the judges' old names too (``local-model``, ``local``), with the registry's
warning.

Sets (``--data``: the shared labeled sets; ``--dev``: the hand-written RAG-shaped dev set):
``dev`` (AUROC, faithful mean, per language), ``jnli`` (JGLUE JNLI valid: entailment vs
contradiction, vs neutral), ``qags_cnndm``, ``halueval`` (with AUROC inside answer-length
quartiles and over every pair of a right and a hallucinated answer of equal length), ``faithbench``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.judges import add_judge_option
from bench.quality import (
    FILES,
    _length,
    auroc,
    binned_auroc,
    build,
    context_group,
    lang_of,
    read_jsonl,
    score_set,
)

REPO = Path(__file__).resolve().parent.parent
SETS = ("dev", "jnli", "qags_cnndm", "halueval", "faithbench")
JUDGES = ("model", "fast", "nli")
"""The judges this command scores with (ragpulse.scorer.judges.registry): those that run here."""


def length_matched(v: list[float], y: list[int], lens: list[int]) -> tuple[float, int]:
    """AUROC over every (right, hallucinated) pair of answers of equal length (words), and the
    number of such pairs: length cannot separate any pair counted, and every answer whose length
    the other class also has takes part (no selection by score)."""
    s, lab, n = np.asarray(v, dtype=float), np.asarray(y), np.asarray(lens)
    wins, pairs = 0.0, 0
    for k in np.unique(n):
        p, q = s[(n == k) & (lab == 1)], s[(n == k) & (lab == 0)]
        if len(p) and len(q):
            d = p[:, None] - q[None, :]
            wins += float((d > 0).sum() + 0.5 * (d == 0).sum())
            pairs += len(p) * len(q)
    return (wins / pairs if pairs else float("nan")), pairs


def stats(v: list[float], y: list[int]) -> dict[str, Any]:
    a, b = np.asarray(v), np.asarray(y)
    return {"n": len(v), "auroc": auroc(v, y),
            "faithful_mean": float(a[b == 1].mean()) if (b == 1).any() else None,
            "unfaithful_mean": float(a[b == 0].mean()) if (b == 0).any() else None}


async def run(args: argparse.Namespace) -> dict[str, Any]:
    judge = build_judge(args)
    data = Path(args.data)
    out: dict[str, Any] = {"judge": args.judge, "model_dir": args.model_dir}
    for key in args.sets:
        t0 = time.perf_counter()
        if key == "jnli":
            raw = read_jsonl(data / FILES["jnli"], args.limit)
            rows = [{"id": f"jnli-{r['sentence_pair_id']}", "question": "",
                     "contexts": [r["sentence1"]], "answer": r["sentence2"], "label": r["label"]}
                    for r in raw]
            vals = await score_set(judge, rows, "faithfulness", key, args.concurrency)
            by: dict[str, list[float]] = {"entailment": [], "neutral": [], "contradiction": []}
            for r, v in zip(rows, vals, strict=True):
                if v is not None:
                    by[r["label"]].append(v)
            ent = by["entailment"]
            res = {f"ent_vs_{k[:3]}": auroc(ent + by[k], [1] * len(ent) + [0] * len(by[k]))
                   for k in ("contradiction", "neutral")}
            res["ent_vs_rest"] = auroc(ent + by["neutral"] + by["contradiction"],
                                       [1] * len(ent) + [0] * (len(by["neutral"]) +
                                                               len(by["contradiction"])))
            res["means"] = {k: float(np.mean(x)) for k, x in by.items()}
        else:
            path = Path(args.dev) if key == "dev" else data / FILES[key]
            rows = read_jsonl(path, args.limit)
            vals = await score_set(judge, rows, "faithfulness", key, args.concurrency)
            keep = [(r, v) for r, v in zip(rows, vals, strict=True) if v is not None]
            v = [x for _, x in keep]
            y = [int(r["label"]["faithful"]) for r, _ in keep]
            res = stats(v, y)
            res["missing"] = len(rows) - len(keep)
            if args.rows:
                with open(args.rows, "a", encoding="utf-8") as f:
                    f.writelines(json.dumps({"set": key, "path": str(path), "row": i,
                                             "id": r.get("id"), "group": context_group(r),
                                             "label": yy, "value": x}) + "\n"
                                 for i, ((r, x), yy) in enumerate(zip(keep, y, strict=True)))
            if key == "dev":
                res["per_lang"] = {}
                for lg in sorted({lang_of(r) for r, _ in keep}):
                    ix = [i for i, (r, _) in enumerate(keep) if lang_of(r) == lg]
                    res["per_lang"][lg] = stats([v[i] for i in ix], [y[i] for i in ix])
                kinds = {r.get("kind") or r.get("type") for r, _ in keep} - {None}
                if kinds:
                    res["per_kind_mean"] = {
                        str(k): float(np.mean([x for (r, x) in keep
                                               if (r.get("kind") or r.get("type")) == k]))
                        for k in sorted(kinds, key=str)}
            if key == "halueval":
                lens = [_length(r["answer"]) for r, _ in keep]
                res["length_binned"], _ = binned_auroc(v, y, lens)
                res["length_matched"], res["length_matched_pairs"] = length_matched(v, y, lens)
                res["length_alone"] = auroc([-n for n in lens], y)
        res["seconds"] = round(time.perf_counter() - t0, 1)
        out[key] = res
        print(key, json.dumps(res), file=sys.stderr, flush=True)
    await judge.aclose()
    return out


def build_judge(args: argparse.Namespace) -> Any:
    if args.judge == "fast":
        return build("fast", None, None)
    from ragpulse.scorer.judges.factory import build_judge as bj
    from ragpulse.scorer.judges.nli import NliJudgeSettings

    given = {k: getattr(args, k) for k in ("premise", "premise_sentences", "premise_neighbours",
                                           "premise_tokens", "premise_heading",
                                           "premise_view_sentences", "blend", "candidates")
             if getattr(args, k) is not None}
    if args.canonical_values:
        given["canonical_values"] = True
    if args.evidence_cut is not None:
        given["evidence_cut"] = args.evidence_cut
    return bj(args.judge, threads=args.threads, model_dir=args.model_dir,
              batch_size=args.batch_size, nli=NliJudgeSettings(**given) if given else None)


def parser() -> argparse.ArgumentParser:
    """The command's options."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_judge_option(ap, *JUDGES, default="model")
    ap.add_argument("--model-dir")
    ap.add_argument("--data", default=str(REPO.parent / "shared" / "data"))
    ap.add_argument("--dev", default=str(REPO / "bench" / "data" /
                                         "faithfulness_rag_handwritten.jsonl"))
    ap.add_argument("--sets", nargs="+", default=list(SETS), choices=SETS)
    ap.add_argument("--limit", type=int)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--premise", choices=("chunks", "sentences", "packed", "auto", "views",
                                          "evidence"),
                    help="the judge's premise selection (default: the judge's own)")
    ap.add_argument("--premise-sentences", type=int)
    ap.add_argument("--premise-neighbours", type=int)
    ap.add_argument("--premise-tokens", type=int)
    ap.add_argument("--premise-view-sentences", type=int,
                    help="under --premise views: sentences the sentence view runs alone")
    ap.add_argument("--premise-heading", type=int,
                    help="a context's first sentence of at most this many tokens heads its "
                         "later sentences' premises (0: off)")
    ap.add_argument("--blend", choices=("auto", "on", "off"),
                    help="the model judge's blend with the lexical detector (default: auto)")
    ap.add_argument("--canonical-values", action="store_true",
                    help="the model judges' canonical_values: values (numbers, clock times, "
                         "durations, fractions, weekday ranges) rewritten into one form in "
                         "premises and statements before the model (default: off)")
    ap.add_argument("--candidates", type=int,
                    help="passage windows a statement runs against (chunks and evidence "
                         "premises; default: the judge's own)")
    ap.add_argument("--evidence-cut", type=float,
                    help="under evidence premises: statements whose sentence premises reach this "
                         "P skip the passage windows (default: none skip)")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--rows", help="append each scored row (set, id, label, value) to this JSONL "
                                   "file (JNLI excepted), for train.compare")
    return ap


def main(argv: list[str] | None = None) -> int:
    a = parser().parse_args(argv)
    res = asyncio.run(run(a))
    text = json.dumps(res, indent=1)
    print(text)
    if a.json:
        Path(a.json).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
