"""Samples/s of the two local judges on a typical trace, as ``ragpulse up`` runs them: the
judge built by ``build_judge`` (its default threads and workers for 2 cores) behind the
``Evaluator`` with the five default metrics.

A typical trace: 3 answer statements, 5 retrieved contexts of about 900 characters. Contexts are
cut from the news articles of the labeled sets in ``--data`` and are distinct across samples (a
cold embedding cache, as ``bench/speed_local.py``); the answer is one sentence from each of the
first three contexts. Judge load and a warm-up of 4 samples are not in the rate.

    .venv/bin/python bench/judge_speed.py --data ../shared/data [--samples 60] [--write-docs]

The machine may be shared: the load average before and after is printed beside each figure,
and CPU seconds per sample (what one free core would do) with it. ``ragpulse up`` derives its
default sampling rate from these figures (``ragpulse.scorer.SAMPLES_PER_S``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import resource
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.docs_section import write_section
from ragpulse.scorer import Evaluator, Sample
from ragpulse.scorer.judges.factory import build_judge
from ragpulse.scorer.metrics import DEFAULT_METRICS
from ragpulse.scorer.segment import split_sentences

REPO = Path(__file__).resolve().parent.parent

CONTEXT_CHARS = 900
STATEMENTS = 3
JUDGES = ("local", "local-model")
DOCS = REPO / "docs" / "benchmarks.md"
MARK = "<!-- bench/judge_speed.py -->"
SAMPLING = REPO / "scorer" / "ragpulse" / "scorer" / "judges" / "registry.py"


def _jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _cut(text: str, chars: int) -> str:
    """The first ``chars`` characters of ``text``, ending at a word boundary."""
    return text[:chars].rsplit(" ", 1)[0] if len(text) > chars else text


def make_samples(data: Path, n: int) -> list[Sample]:
    """``n`` samples, each with five distinct ~900-character contexts and a 3-sentence answer."""
    chunks: list[str] = []
    seen: set[str] = set()
    for name in ("faithfulness_qags_cnndm.jsonl", "faithfulness_faithbench.jsonl"):
        for row in _jsonl(data / name):
            for c in row["contexts"]:
                if c in seen:
                    continue
                seen.add(c)
                for k in range(0, len(c) - CONTEXT_CHARS + 1, CONTEXT_CHARS):
                    piece = _cut(c[k:k + CONTEXT_CHARS + 60], CONTEXT_CHARS)
                    if len(split_sentences(piece)) >= 2:
                        chunks.append(piece)
    questions = [r["question"] for r in _jsonl(data / "answer_relevancy_halueval.jsonl")]
    if 5 * n > len(chunks):
        raise SystemExit(f"{data}: {len(chunks)} distinct contexts, {5 * n} needed")
    out = []
    for i in range(n):
        ctx = tuple(chunks[5 * i + j] for j in range(5))
        answer = " ".join(split_sentences(ctx[j])[1] for j in range(STATEMENTS))
        out.append(Sample(id=f"speed-{i}", question=questions[i % len(questions)],
                          contexts=ctx, answer=answer))
    return out


def nli_settings(pairs: Sequence[str]) -> Any:
    """``NliJudgeSettings`` from ``FIELD=VALUE`` pairs (``--nli premise=views``), for the nli
    and local-model judges; None without pairs (each judge's defaults)."""
    if not pairs:
        return None
    from pydantic import ValidationError

    from bench.quality import nli_overrides
    from ragpulse.scorer.judges.nli import NliJudgeSettings

    fields = nli_overrides(pairs)
    try:
        return NliJudgeSettings(**fields)
    except ValidationError as e:
        raise SystemExit(f"--nli: {e.errors()[0]['loc'][0]}: {e.errors()[0]['msg']}") from None


async def measure(name: str, samples: Sequence[Sample], warm: Sequence[Sample], threads: int,
                  concurrency: int, nli: Any = None) -> dict:
    t0 = time.perf_counter()
    judge = build_judge(name, threads=threads, **({"nli": nli} if nli is not None else {}))
    ev = Evaluator(judge, list(DEFAULT_METRICS), max_concurrency=concurrency)
    statuses: Counter = Counter()
    try:
        async for _ in ev.evaluate_many(list(warm)):
            pass
        load_s = time.perf_counter() - t0
        before = os.getloadavg()[0]
        cpu0, t1 = time.process_time(), time.perf_counter()
        async for res in ev.evaluate_many(list(samples)):
            statuses.update(s.status for s in res.scores)
        wall, cpu = time.perf_counter() - t1, time.process_time() - cpu0
    finally:
        await judge.aclose()
    return {"judge": name, "samples": len(samples), "samples_per_s": len(samples) / wall,
            "cpu_s_per_sample": cpu / len(samples), "load_s": load_s,
            "load_before": before, "load_after": os.getloadavg()[0],
            "ok": statuses.get("ok", 0), "scores": sum(statuses.values())}


def table(results: list[dict], command: str) -> str:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    lines = [f"Command: `{command}`  ",
             f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on "
             f"{os.cpu_count()} cores (load average before / after in the table).", "",
             "| judge | samples | samples/s | CPU s/sample | samples per CPU-second | 2 free cores "
             "(est.) | scores ok | load + warm-up (s) | load avg before / after |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r['judge']} | {r['samples']} | {r['samples_per_s']:.1f} | "
                     f"{r['cpu_s_per_sample']:.3f} | {1 / r['cpu_s_per_sample']:.1f} | "
                     f"{2 / r['cpu_s_per_sample']:.1f} | "
                     f"{r['ok']}/{r['scores']} | {r['load_s']:.1f} | "
                     f"{r['load_before']:.2f} / {r['load_after']:.2f} |")
    lines += ["", f"Typical trace: {STATEMENTS} answer statements, 5 distinct contexts of about "
              f"{CONTEXT_CHARS} characters (news text), the five default metrics; each judge as "
              "`build_judge(name, threads=2)` makes it (what `ragpulse up` runs). Peak RSS of the "
              f"process {rss:.0f} MiB. On a shared machine samples/s is lower than on a quiet "
              "one; samples per CPU-second (what one free core does) is the steadier figure, and "
              "twice it estimates 2 free cores (`bench/speed_local.py` measured the local judge "
              "at 11.7 samples/s with 2 threads and 5.9 samples per CPU-second: it uses both). "
              "`ragpulse.scorer.SAMPLES_PER_S` takes the 2-core estimate."]
    return "\n".join(lines)


def write_docs(body: str) -> None:
    write_section(MARK, body, heading='## Speed of the local judges on a typical trace', before='## Speed (local judge)', docs=DOCS)


def write_constants(results: list[dict]) -> dict[str, float]:
    """Set ``SAMPLES_PER_S`` in ragpulse.scorer.judges.registry to this run's 2-core estimates
    (both judges needed: the dict is written whole)."""
    from ragpulse.scorer import resolve_judge

    figures = {resolve_judge(r["judge"]): round(2 / r["cpu_s_per_sample"], 1) for r in results}
    if set(figures) != {resolve_judge(j) for j in JUDGES}:
        raise SystemExit("--write-constants needs both judges")
    text = SAMPLING.read_text(encoding="utf-8")
    new = "SAMPLES_PER_S: dict[str, float] = {" + ", ".join(
        f'"{k}": {v}' for k, v in figures.items()) + "}"
    text, n = re.subn(r"^SAMPLES_PER_S: dict\[str, float\] = \{[^}]*\}", new, text,
                      flags=re.M)
    if n != 1:
        raise SystemExit(f"{SAMPLING}: SAMPLES_PER_S line not found")
    SAMPLING.write_text(text, encoding="utf-8")
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default=str(REPO.parent / "shared" / "data"))
    p.add_argument("--judge", nargs="+", default=list(JUDGES), choices=JUDGES)
    p.add_argument("--samples", type=int, default=60)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--concurrency", type=int, default=8, help="samples in flight (Evaluator)")
    p.add_argument("--write-docs", action="store_true")
    p.add_argument("--write-constants", action="store_true",
                   help="also set ragpulse.scorer.SAMPLES_PER_S to this run's "
                   "2-core estimates (up's default sampling rate)")
    p.add_argument("--nli", action="append", default=[], metavar="FIELD=VALUE",
                   help="an nli/local-model setting (NliJudgeSettings), e.g. premise=views; "
                   "not with --write-docs/--write-constants, which describe the defaults")
    args = p.parse_args(argv)
    nli = nli_settings(args.nli)
    if nli is not None and (args.write_docs or args.write_constants):
        p.error("--nli measures a non-default setting: not with --write-docs or --write-constants")
    pool = make_samples(Path(args.data), args.samples + 4)
    warm, samples = pool[:4], pool[4:]
    results = []
    for name in args.judge:
        r = asyncio.run(measure(name, samples, warm, args.threads, args.concurrency,
                                nli if name in ("nli", "local-model") else None))
        print(json.dumps(r), file=sys.stderr, flush=True)
        results.append(r)
    argv_s = " ".join(a for a in (argv if argv is not None else sys.argv[1:])
                      if a != "--write-constants")
    body = table(results, f".venv/bin/python bench/judge_speed.py {argv_s}".strip())
    print(body)
    if args.write_docs:
        write_docs(body)
    if args.write_constants:
        print(f"written to {SAMPLING}: {write_constants(results)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
