"""The obvious cases of issue 39 (bench/data/faithfulness_obvious.jsonl): short passages in EN, JA
and ZH, each with a faithful answer (a paraphrase, a fusion, values said another way) and its
twin with one part made wrong. The default judge must read them as a person does: faithful
answers >= 0.8, each wrong twin <= 0.5 and at least 0.4 below its faithful twin, and a passage
that plainly answers the question gets context precision and relevance 1.0.

The shipped model (``ragpulse/faith-e5-small@5.1``, ``@5``'s weights) does not yet: these tests are strict xfails
(they fail the suite the day they pass, so the marker goes with the fix), and they print each
case's scores. The set is never trained or tuned on (bench/data/README.md; train/data/build.py's
27-character guard covers every ``bench/data/faithfulness_*.jsonl``)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from ragpulse.scorer import DEFAULT_JUDGE, Evaluator, Sample, build_judge, resolve_metrics

SET = Path(__file__).resolve().parents[3] / "bench" / "data" / "faithfulness_obvious.jsonl"
ROWS = [json.loads(line) for line in SET.read_text(encoding="utf-8").splitlines() if line.strip()]
METRICS = ("faithfulness", "context_precision", "context_relevance")
KNOWN = "the shipped model @5.1 (@5's weights) misses value rewrites and fusions (issues 39 and 40)"


@pytest.fixture(scope="module")
def scores() -> dict[str, dict[str, Any]]:
    judge = build_judge(DEFAULT_JUDGE, threads=1)
    ev = Evaluator(judge, resolve_metrics(list(METRICS)), max_concurrency=4)

    async def run() -> list[Any]:
        try:
            return [res async for res in ev.evaluate_many(
                Sample(id=r["id"], question=r["question"], contexts=r["contexts"],
                       answer=r["answer"]) for r in ROWS)]
        finally:
            await judge.aclose()

    results = asyncio.run(run())
    return {r.sample_id: {s.metric: s.value for s in r.scores} for r in results}


def test_the_set_is_what_it_claims() -> None:
    by_id = {r["id"]: r for r in ROWS}
    assert {r["lang"] for r in ROWS} == {"en", "ja", "zh"}
    for r in ROWS:
        twin = by_id[r["twin"]]
        assert twin["twin"] == r["id"] and twin["contexts"] == r["contexts"]
        assert {r["label"]["faithful"], twin["label"]["faithful"]} == {0, 1}
    for lang in ("en", "ja", "zh"):
        assert sum(r["lang"] == lang and r["label"]["faithful"] for r in ROWS) >= 8


def _faithful(lang: str) -> list[dict]:
    return [r for r in ROWS if r["lang"] == lang and r["label"]["faithful"] == 1]


@pytest.mark.parametrize("lang", ["en", "ja", "zh"])
@pytest.mark.xfail(strict=True, reason=KNOWN)
def test_faithful_answers_read_faithful_and_their_wrong_twins_do_not(scores, lang) -> None:
    bad = []
    for r in _faithful(lang):
        good, wrong = scores[r["id"]]["faithfulness"], scores[r["twin"]]["faithfulness"]
        if good is None or wrong is None or good < 0.8 or wrong > 0.5 or good - wrong < 0.4:
            bad.append(f"{r['id']}: faithful {good}, wrong twin {wrong}")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("lang", ["en", "ja", "zh"])
@pytest.mark.xfail(strict=True, reason=KNOWN + "; context relevance reads topic, not the answer")
def test_a_passage_that_answers_is_precise_and_relevant(scores, lang) -> None:
    # average precision divides by (hits + 1e-10): one useful context gives 0.9999999999
    bad = [f"{r['id']}: {m} {scores[r['id']][m]}" for r in _faithful(lang)
           for m in ("context_precision", "context_relevance")
           if scores[r["id"]][m] is None or abs(scores[r["id"]][m] - 1.0) > 1e-6]
    assert not bad, "\n".join(bad)
