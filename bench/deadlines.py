"""How long the guards that the test suite checks by behaviour take on the wall clock.

The tests assert what happens (the deadline fired, with which reason, after how many requests;
what a hostile prompt splits into); timing asserts would flake on a busy CI machine. This script
measures the time instead, on an otherwise idle machine:

* the LLM judge against a server that never answers, and one that drips its reply a byte every
  0.1 s: how long a faithfulness score takes against its ``deadline_s`` (the real ``openai``
  client, the project's OpenAI-compatible server on loopback);
* ``split_prompt`` on the hostile prompt shapes of ``tests/scorer/traces/test_extract.py`` at
  growing sizes: 4x the input should cost about 4x the time (16x would be quadratic).

Usage (from the repository root):
    .venv/bin/python bench/deadlines.py [--check]

``--check`` exits 1 when a score overran its deadline by more than 1.5 s or 4x the prompt cost
more than 8x the time.
"""

from __future__ import annotations

import argparse
import asyncio
import time

from ragpulse.scorer.evaluator import Evaluator
from ragpulse.scorer.judges.llm import LLMJudge, LLMJudgeSettings
from ragpulse.scorer.metrics import resolve_metrics
from ragpulse.scorer.traces import split_prompt
from testkit.judge import SAMPLE, TableEmbedder
from testkit.openai_server import FakeOpenAIServer, Reply

HOSTILE = {
    "separator_lines": lambda n: "Context:\n" + "\n---" * n + "x",
    "unclosed_document_tags": lambda n: "<context>" + "<document>" * n,
    "unclosed_doc_ends": lambda n: "Context:\n" + "<doc>a</doc" * n,
    "blank_lines": lambda n: "Context:\n" + "\n \n" * n + "Question: q",
}


async def _faithfulness(judge: LLMJudge) -> object:
    result = await Evaluator(judge, resolve_metrics(["faithfulness"])).evaluate(SAMPLE)
    return next(s for s in result.scores if s.metric == "faithfulness")


def judge_overrun(reply: Reply, request_timeout_s: float, deadline_s: float) -> tuple[float, str]:
    """Seconds one faithfulness score took, and its reason."""
    with FakeOpenAIServer() as srv:
        srv.script("*", *[reply] * 50)
        judge = LLMJudge(LLMJudgeSettings(
            base_url=srv.base_url, api_key="sk-test", model="m", requests_per_minute=60_000,
            request_timeout_s=request_timeout_s, deadline_s=deadline_s, max_retries=10,
            backoff_initial_s=0.01, backoff_max_s=0.05), embedder=TableEmbedder())

        async def run() -> tuple[float, str]:
            try:
                t0 = time.monotonic()
                score = await _faithfulness(judge)
                elapsed = time.monotonic() - t0
            finally:
                await judge.aclose()
            return elapsed, str(getattr(score, "reason", None))

        return asyncio.run(run())


def split_scaling(make: object, sizes: tuple[int, ...], repeat: int = 3) -> list[float]:
    """Best of ``repeat`` runs per size (a busy machine only ever adds time)."""
    out = []
    for n in sizes:
        prompt = make(n)  # type: ignore[operator]
        best = float("inf")
        for _ in range(repeat):
            t0 = time.perf_counter()
            split_prompt(prompt)
            best = min(best, time.perf_counter() - t0)
        out.append(best)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    bad = []

    print("LLM judge, faithfulness, deadline_s=2.0")
    for name, reply, timeout in (("never answers", Reply.json({}, delay_s=3600), 2.0),
                                 ("drips 1 B / 0.1 s", Reply.json({"statements": ["a"]},
                                                                  drip_s=0.1), 0.5)):
        elapsed, reason = judge_overrun(reply, timeout, 2.0)
        print(f"  {name:18} request_timeout_s={timeout}: {elapsed:5.2f} s, {reason}")
        if elapsed > 2.0 + 1.5:
            bad.append(f"judge {name}: {elapsed:.2f} s")

    sizes = (30_000, 60_000, 120_000, 240_000)
    print(f"split_prompt, best of 3, seconds at {sizes} repetitions; growth over the last 4x")
    for name, make in HOSTILE.items():
        times = split_scaling(make, sizes)
        ratio = times[-1] / max(times[1], 1e-4)  # 4x the input: ~4 when linear, ~16 quadratic
        print(f"  {name:24} " + " ".join(f"{t:6.3f}" for t in times) + f"  x{ratio:.1f}")
        if ratio > 8.0 and times[-1] > 0.05:
            bad.append(f"split_prompt {name}: x{ratio:.1f} for 4x the input")

    if bad:
        print("over the limits: " + "; ".join(bad))
    return 1 if (args.check and bad) else 0


if __name__ == "__main__":
    raise SystemExit(main())
