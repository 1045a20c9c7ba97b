"""Throughput of the local judge: samples/s with the five default metrics, and peak RSS.

Each sample has a question, an answer of two sentences and five contexts of about 200 tokens
(~150 English words) cut from the news articles of the labeled sets in ``--data`` (default
``../shared/data``). Every context is distinct across samples, so the embedding cache only
helps within a sample: this is the cold-cache rate (production traces often repeat passages,
which is faster). The model is loaded before the clock starts; its load time is reported apart.

    .venv/bin/python bench/speed_local.py --data ../shared/data --samples 200
    .venv/bin/python bench/speed_local.py --threads 2 --workers 1 --write-docs

The machine may be shared: the load average before and after the run is printed beside the
numbers, and should be read with them. The CPU time the process used per sample is not inflated
by other processes: "samples per CPU-second" is what one free core would do. More workers do
not multiply it: ``USEEmbedder`` runs one forward pass at a time (its model lock covers the
tokenizer too), so a second worker overlaps only the judge's non-embedding work.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shlex
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ragpulse.scorer import Evaluator, Sample
from ragpulse.scorer.embeddings import USEEmbedder
from ragpulse.scorer.judges.local import LocalJudge, LocalJudgeSettings
from ragpulse.scorer.metrics import DEFAULT_METRICS
from ragpulse.scorer.segment import split_sentences

REPO = Path(__file__).resolve().parent.parent
err = Console(stderr=True)

WORDS_PER_CONTEXT = 150  # about 200 tokens of English news text with a BPE tokenizer


def _jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


TARGET_SAMPLES_PER_S = 10.0


def make_samples(data: Path, n: int) -> list[Sample]:
    """``n`` samples with five distinct ~150-word contexts each (cycling if the pool runs out)."""
    articles: list[str] = []
    seen: set[str] = set()
    for name in ("faithfulness_qags_cnndm.jsonl", "faithfulness_faithbench.jsonl"):
        for row in _jsonl(data / name):
            for c in row["contexts"]:
                if c not in seen and len(c.split()) >= WORDS_PER_CONTEXT:
                    seen.add(c)
                    articles.append(c)
    chunks: list[str] = []
    for art in articles:
        words = art.split()
        for k in range(0, len(words) - WORDS_PER_CONTEXT + 1, WORDS_PER_CONTEXT):
            chunks.append(" ".join(words[k : k + WORDS_PER_CONTEXT]))
    questions = [r["question"] for r in _jsonl(data / "answer_relevancy_halueval.jsonl")]
    if len(chunks) < 5 or not questions:
        raise SystemExit(f"{data}: not enough text to build samples")
    if 5 * n > len(chunks):
        # Cycled contexts hit the embedding cache: the rate is no longer the cold-cache rate.
        print(f"warning: {len(chunks)} distinct contexts for {5 * n} slots: contexts repeat, "
              f"so the rate is above the cold-cache rate (use --samples <= {len(chunks) // 5})",
              file=sys.stderr)
    samples = []
    for i in range(n):
        ctx = tuple(chunks[(5 * i + j) % len(chunks)] for j in range(5))
        answer = " ".join(split_sentences(ctx[0])[:2])
        samples.append(Sample(id=f"speed-{i}", question=questions[i % len(questions)],
                              contexts=ctx, answer=answer))
    return samples


async def run(samples: Sequence[Sample], judge: LocalJudge, concurrency: int) -> tuple[float, Counter]:
    ev = Evaluator(judge, list(DEFAULT_METRICS), max_concurrency=concurrency)
    statuses: Counter = Counter()
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err) as bar:
        task = bar.add_task("score", total=len(samples))
        t0 = time.perf_counter()
        async for res in ev.evaluate_many(samples):
            statuses.update(f"{s.metric}:{s.status}" for s in res.scores)
            bar.advance(task)
        elapsed = time.perf_counter() - t0
    return elapsed, statuses


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default=str(REPO.parent / "shared" / "data"))
    p.add_argument("--samples", type=int, default=200)
    p.add_argument("--configs", default="1x2,2x1",
                   help="comma-separated THREADSxWORKERS: embedder BLAS threads x judge workers")
    p.add_argument("--concurrency", type=int, default=8, help="samples in flight (Evaluator)")
    p.add_argument("--write-docs", action="store_true")
    args = p.parse_args(argv)
    data = Path(args.data)
    if not data.is_dir():
        p.error(f"--data {data}: not a directory")
    try:
        configs = [tuple(int(x) for x in c.split("x")) for c in args.configs.split(",")]
        assert all(len(c) == 2 and min(c) >= 1 for c in configs)
    except (ValueError, AssertionError):
        p.error(f"--configs {args.configs!r}: expected e.g. 1x2,2x1")
    samples = make_samples(data, args.samples)
    rows = [("| samples | threads | workers | concurrency | samples/s | ms/sample | "
             "CPU ms/sample | samples per CPU-second | scores ok | "
             "cache hits / misses | load avg before / after |"),
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    load_s = 0.0
    rates: list[tuple[float, int, int]] = []
    for threads, workers in configs:
        load_before = os.getloadavg()
        settings = LocalJudgeSettings(threads=threads, workers=workers)
        embedder = USEEmbedder(threads=threads, cache_size=settings.cache_size)
        t0 = time.perf_counter()
        judge = LocalJudge(settings, embedder=embedder).warm()
        load_s = time.perf_counter() - t0
        cpu0 = _cpu_s()
        elapsed, statuses = asyncio.run(_run_and_close(samples, judge, args.concurrency))
        cpu_per_sample = (_cpu_s() - cpu0) / len(samples)
        load_after = os.getloadavg()
        ok = sum(v for k, v in statuses.items() if k.endswith(":ok"))
        rates.append((len(samples) / elapsed, threads, workers))
        rows.append(
            f"| {len(samples)} | {threads} | {workers} | {args.concurrency} | "
            f"{len(samples) / elapsed:.1f} | {1000 * elapsed / len(samples):.0f} | "
            f"{1000 * cpu_per_sample:.0f} | {1 / cpu_per_sample:.1f} | "
            f"{ok}/{sum(statuses.values())} | {embedder.cache_hits} / {embedder.cache_misses} | "
            f"{load_before[0]:.2f} / {load_after[0]:.2f} |")
        err.print(rows[-1])
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    words = sum(len(c.split()) for s in samples for c in s.contexts) / len(samples) / 5
    body = "\n".join([
        *rows, "",
        (f"Peak RSS of the process (all runs, model loaded once per run): {rss_mb:.0f} MB. "
         f"Five contexts of {words:.0f} words each, answers of two sentences; metrics: "
         f"{', '.join(DEFAULT_METRICS)}. Model load and warm-up {load_s:.1f} s (not in the rate)."),
        "",
        _verdict(rates),
    ])
    print(body)
    if args.write_docs:
        from bench.quality import write_docs

        command = "python bench/speed_local.py " + " ".join(
            shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
        write_docs("Speed (local judge)", body, command)
    return 0


def _verdict(rates: Sequence[tuple[float, int, int]]) -> str:
    """The issue's target against the best configuration measured."""
    best, threads, workers = max(rates)
    met = "met" if best >= TARGET_SAMPLES_PER_S else "NOT met"
    return (f"Target (issue 2): >= {TARGET_SAMPLES_PER_S:g} samples/s on 2 cores with the five "
            f"default metrics. Best here: {best:.1f} samples/s with {threads} BLAS thread(s) and "
            f"{workers} worker(s): {met}. `ragpulse score` runs with 2 BLAS threads by default "
            "(`--threads`).")


def _cpu_s() -> float:
    """CPU seconds this process has used (all threads): unlike wall time, not inflated by other
    processes on a shared machine."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


async def _run_and_close(samples: Sequence[Sample], judge: LocalJudge,
                         concurrency: int) -> tuple[float, Counter]:
    try:
        return await run(samples, judge, concurrency)
    finally:
        await judge.aclose()


if __name__ == "__main__":
    sys.exit(main())
