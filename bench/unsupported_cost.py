"""What it costs the local judges to find, for each unsupported statement, the passage that came
closest (issue 42): the fast judge embeds and matches the doubted statements against the
contexts' sentences once more; the model judge only keeps, per statement, the premise that
scored best while it runs its pairs.

Each run scores the same samples (``bench/judge_speed.py``'s typical trace, plus one made-up
sentence in every answer, so every sample has an unsupported statement) with the five default
metrics, one sample at a time, with the closest passage found (``on``) or not (``off``: the
judge's evidence step replaced by one that names none), twice each, alternating. The machine
may be shared: compare CPU milliseconds per sample, and read a difference within the spread of
the two runs of one setting as none.

    .venv/bin/python bench/unsupported_cost.py --judge fast model --samples 30
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import time
from pathlib import Path

from judge_speed import make_samples  # bench/, the script's own folder

from bench.judges import add_judge_option
from ragpulse.scorer import Evaluator, Sample, build_judge
from ragpulse.scorer.judges.local.analysis import SampleAnalysis
from ragpulse.scorer.judges.nli import judge as nli_judge
from ragpulse.scorer.metrics import DEFAULT_METRICS

REPO = Path(__file__).resolve().parent.parent
MADE_UP = " The company also paid a dividend of 42 million dollars to its founders in 1887."


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _switch(on: bool, originals: tuple) -> None:
    closest, evidence = originals
    SampleAnalysis.closest_sentences = (  # type: ignore[method-assign]
        closest if on else (lambda self, which: [(-1, "")] * len(which)))
    nli_judge._evidence = (  # type: ignore[assignment]
        evidence if on else (lambda probs, cut, best, closest: [None] * len(probs)))


async def _run(name: str, samples: list[Sample], warm: int) -> tuple[float, float, int]:
    judge = build_judge(name)
    ev = Evaluator(judge, list(DEFAULT_METRICS), max_concurrency=1)
    try:
        for s in samples[:warm]:
            await ev.evaluate(s)
        c0, t0, found = _cpu(), time.perf_counter(), 0
        for s in samples[warm:]:
            r = await ev.evaluate(s)
            found += sum(1 for sc in r.scores for u in sc.unsupported if u.context >= 0)
        n = len(samples) - warm
        return (_cpu() - c0) / n * 1000, (time.perf_counter() - t0) / n * 1000, found
    finally:
        await judge.aclose()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default=str(REPO.parent / "shared" / "data"))
    add_judge_option(p, "fast", "model", nargs="+", default=["fast", "model"])
    p.add_argument("--samples", type=int, default=30)
    a = p.parse_args()
    warm = 4
    samples = [s.model_copy(update={"answer": s.answer + MADE_UP})
               for s in make_samples(Path(a.data), a.samples + warm)]
    originals = (SampleAnalysis.closest_sentences, nli_judge._evidence)
    print(f"load average before: {os.getloadavg()[0]:.1f}")
    for name in a.judge:
        for on in (False, True, False, True):
            _switch(on, originals)
            cpu, wall, found = asyncio.run(_run(name, samples, warm))
            print(f"{name:5} closest passage {'on ' if on else 'off'}: {cpu:5.0f} ms CPU/sample, "
                  f"{wall:5.0f} ms wall/sample, {found} statements with a passage "
                  f"({a.samples} samples)")
    _switch(True, originals)
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
