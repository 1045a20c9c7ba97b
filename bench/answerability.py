"""Does the default judge tell a passage that answers the question from one that does not
(issue 40, item 4; issue 39, item 0)?

    python bench/answerability.py --data ../shared/data [--model-dir DIR] [--speed] [--write-docs]

``--model-dir``: the ``model`` judge with another model directory than the bundled one, e.g. a
candidate with an answerability head written by ``python -m train.answerability export``. The
bundled model has no head today, so without it ``model`` gives the ``fast`` judge's facts.

Two sets no part of the model or its thresholds was trained or tuned on:

- ``jsquad-ja``: ``context_relevance_jsquad_ja.jsonl`` (JSQuAD v1.3 valid, the seed-002
  protocol: 100 questions, each twice with 5 retrieved paragraphs of the same articles; ``pos``
  rows hold the gold paragraph at ``label.relevant_ranks``, ``neg`` rows do not). A passage
  answers when it is a gold paragraph, else it does not;
- ``corpus-heldout-<lang>``: every scenario of the RAG corpus's held-out domains
  (``train.data.rag_corpus.DOMAINS``), each passage with its ``passage_labels`` (2 answers, 1
  part of the answer, 0 not). The goal is stated for EN and ZH; JA is printed too.

Per passage: the CONTEXT_USEFUL verdict (what context precision is computed from) of the default
judge (``model``: the answerability head of ``ragpulse/faith-e5-small``) and of the ``fast``
judge (USE similarity: what the default judge said before the head; the baseline). Printed: the
share of passages that do not answer judged NG (goal >= 80 %) and of those that answer judged OK
(goal >= 90 %), with Wilson 95 % intervals; per sample, the mean ``context_relevance`` (two
0/1/2 ratings, mean / 2) of samples with and without an answering passage.

``--speed`` adds the CPU cost per sample of the head: one question against 5 passages of about
900 characters (``NliModel.answerability_matrix``: one model pass per passage window), ms per
sample, median of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench.docs_section import write_section
from bench.judges import add_judge_option
from ragpulse.scorer.stats import wilson_interval

REPO = Path(__file__).resolve().parent.parent
MARK = "<!-- bench/answerability.py -->"
HEADING = "## Answerability: context precision and relevance of the default judge (issue 40, item 4)"
BEFORE = "## Speed of the local judges on a typical trace"
JUDGES = ("model", "fast")


def jsquad_rows(data: Path) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in (data / "context_relevance_jsquad_ja.jsonl")
            .read_text(encoding="utf-8").splitlines() if line.strip()]
    out = []
    for r in rows:
        gold = set(r["label"].get("relevant_ranks", []))
        out.append({"id": r["id"], "set": "jsquad-ja", "question": r["question"],
                    "contexts": r["contexts"],
                    "labels": [2 if i in gold else 0 for i in range(len(r["contexts"]))]})
    return out


def corpus_rows() -> list[dict[str, Any]]:
    from train.data.rag_corpus import DOMAINS, committed

    return [{"id": r["id"], "set": f"corpus-heldout-{r['lang']}", "question": r["question"],
             "contexts": r["contexts"], "labels": list(r["passage_labels"])}
            for r in committed() if DOMAINS.get(r["domain"]) == "heldout"]


def judge_rows(rows: list[dict[str, Any]], name: str, threads: int = 1,
               model_dir: Path | None = None) -> dict[str, Any]:
    """``name``'s CONTEXT_USEFUL verdicts and CONTEXT_RATINGS per row, its versions, seconds."""
    import asyncio

    from ragpulse.scorer import Fact, Sample
    from ragpulse.scorer.judges.base import Needs
    from ragpulse.scorer.judges.factory import build_judge

    judge: Any = build_judge(name, threads=threads,
                             model_dir=model_dir if name == "model" else None)
    facts = frozenset({Fact.CONTEXT_USEFUL, Fact.CONTEXT_RATINGS})

    async def run() -> list[dict[Any, Any]]:
        try:
            return [await judge.gather(Sample(id=r["id"], question=r["question"],
                                              contexts=r["contexts"], answer=""), Needs(facts))
                    for r in rows]
        finally:
            await judge.aclose()

    t0 = time.perf_counter()
    found = asyncio.run(run())
    seconds = time.perf_counter() - t0
    return {"useful": [f[Fact.CONTEXT_USEFUL].value for f in found],
            "ratings": [f[Fact.CONTEXT_RATINGS].value for f in found],
            "versions": {f[Fact.CONTEXT_USEFUL].prompt_version for f in found}
            | {f[Fact.CONTEXT_RATINGS].prompt_version for f in found},
            "seconds": seconds}


def share(k: int, n: int) -> str:
    ci = wilson_interval(k, n)
    return f"{100 * k / n:.1f} % [{100 * ci.low:.0f}, {100 * ci.high:.0f}] ({k}/{n})" if ci \
        else "-"


def table(rows: list[dict[str, Any]], got: dict[str, dict[str, Any]]) -> list[str]:
    sets = sorted({r["set"] for r in rows}, key=lambda s: (s != "jsquad-ja", s))
    lines = ["| set | judge | not answering: NG (goal >= 80 %) | answering: OK (goal >= 90 %) "
             "| of which part only (label 1): OK | context_relevance, samples with / without "
             "an answering passage |", "|---|---|---|---|---|---|"]
    for s in sets:
        idx = [i for i, r in enumerate(rows) if r["set"] == s]
        for name in got:
            useful, ratings = got[name]["useful"], got[name]["ratings"]
            ng = n0 = ok = n1 = okp = np_ = 0
            rel_with: list[float] = []
            rel_without: list[float] = []
            for i in idx:
                for lab, v in zip(rows[i]["labels"], useful[i], strict=True):
                    if lab == 0:
                        n0 += 1
                        ng += not v
                    else:
                        n1 += 1
                        ok += bool(v)
                        if lab == 1:
                            np_ += 1
                            okp += bool(v)
                rel = sum(ratings[i]) / len(ratings[i]) / 2
                (rel_with if max(rows[i]["labels"]) > 0 else rel_without).append(rel)
            mean = lambda v: f"{statistics.fmean(v):.3f}" if v else "-"  # noqa: E731
            lines.append(f"| {s} | {name} | {share(ng, n0)} | {share(ok, n1)} | "
                         f"{share(okp, np_)} | {mean(rel_with)} / {mean(rel_without)} |")
    return lines


def speed(repeat: int, threads: int = 1, model_dir: Path | None = None) -> tuple[float, int]:
    """ms per sample of ``answerability_matrix`` on 5 corpus passages cut to about 900
    characters, median of ``repeat`` samples, and the model windows each ran."""
    from ragpulse.scorer.judges.factory import build_judge

    judge: Any = build_judge("model", threads=threads, model_dir=model_dir)
    rows = corpus_rows()
    texts = [c for r in rows for c in r["contexts"]]
    ctx = []
    for k in range(5):  # ~900 characters each: consecutive passages joined, then cut
        t = " ".join(texts[6 * k : 6 * k + 6])
        ctx.append(t[:900])
    q = rows[0]["question"]
    judge.nli.answerability_matrix(q, ctx)  # warm-up
    times = []
    for k in range(repeat):
        t0 = time.perf_counter()
        judge.nli.answerability_matrix(rows[k % len(rows)]["question"], ctx)
        times.append(1000 * (time.perf_counter() - t0))
    windows = sum(len(judge.nli.question_windows(q, c)[1]) for c in ctx)
    return statistics.median(times), windows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data",
                    help="the shared evaluation sets (default ../shared/data)")
    ap.add_argument("--limit", type=int, default=None, help="only the first N samples per set")
    ap.add_argument("--model-dir", type=Path, default=None,
                    help="the model judge's model directory (default: the bundled model)")
    add_judge_option(ap, *JUDGES, flag="--judges", nargs="+", default=list(JUDGES))
    ap.add_argument("--speed", action="store_true", help="also the head's ms per sample")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--write-docs", action="store_true",
                    help="replace this bench's section of docs/benchmarks.md")
    a = ap.parse_args(argv)
    rows = jsquad_rows(a.data)
    corpus = corpus_rows()
    if a.limit is not None:
        rows = rows[: a.limit]
        seen: Counter[str] = Counter()
        kept = []
        for r in corpus:
            if seen[r["set"]] < a.limit:
                kept.append(r)
                seen[r["set"]] += 1
        corpus = kept
    rows += corpus
    got = {}
    for name in a.judges:
        got[name] = judge_rows(rows, name, model_dir=a.model_dir)
        print(f"{name}: {len(rows)} samples, {got[name]['seconds']:.0f} s, "
              f"{sorted(got[name]['versions'])}", flush=True)
    lines = table(rows, got)
    if a.speed:
        ms, windows = speed(a.repeat, model_dir=a.model_dir)
        lines += ["", f"CPU cost of the head: {ms:.0f} ms per sample (one question, 5 passages of "
                  f"about 900 characters = {windows} model passes of batch 1; median of "
                  f"{a.repeat}; 1 thread, `nice -n 10`, on 2 cores loaded by a training job)."]
    text = "\n".join(lines)
    print(text)
    if a.write_docs:
        cmd = "python bench/answerability.py --data ../shared/data" + \
              (f" --model-dir {a.model_dir}" if a.model_dir else "") + \
              (" --speed" if a.speed else "") + (f" --limit {a.limit}" if a.limit else "")
        stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        write_section(MARK, f"Command: `{cmd}`  \nMeasured {stamp}.\n\n{text}", HEADING, BEFORE)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
