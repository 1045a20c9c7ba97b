"""examples/samples.jsonl, scored by the real local judge (and by `ragpulse score`): every metric
agrees with the obvious reading of each example, and the context metrics agree with each other
in English, Japanese and Chinese. Issue 19: `zh-faithful` had context_precision 0 ("0 of 2 useful") while
context_utilization said 1 of 2 used and context_relevance was 0.25."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragpulse.scorer import Evaluator, Sample, SampleResult
from ragpulse.scorer.judges.base import Needs
from ragpulse.scorer.judges.local import LocalJudge
from ragpulse.scorer.judges.local.text import content_units
from ragpulse.scorer.model import Fact

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "samples.jsonl"
SAMPLES = {s.id: s for s in (Sample.model_validate_json(line)
                             for line in EXAMPLES.read_text(encoding="utf-8").splitlines()
                             if line.strip())}

HIGH, LOW = 0.6, 0.4
# The obvious reading of each example. Per-context: which contexts answer the question
# ("useful") and which ones the answer is drawn from ("used").
EXPECTED: dict[str, dict] = {
    "en-faithful": dict(faithful=True, relevant=True, useful=[1, 0, 0], used=[1, 0, 0]),
    "en-hallucinated": dict(faithful=False, relevant=True, useful=[1, 0]),
    "en-irrelevant-contexts": dict(faithful=False, relevant=True, useful=[0, 0, 0],
                                   used=[0, 0, 0]),
    "en-noncommittal": dict(relevant=False, useful=[1], used=[0]),
    "ja-faithful": dict(faithful=True, relevant=True, useful=[1, 0], used=[1, 0]),
    "ja-hallucinated": dict(faithful=False, relevant=True, useful=[1]),
    "zh-faithful": dict(faithful=True, relevant=True, useful=[1, 0], used=[1, 0]),
    "en-with-reference": dict(faithful=False, relevant=True, useful=[1, 0]),
}


def test_every_example_has_a_reading() -> None:
    assert set(SAMPLES) == set(EXPECTED)


@pytest.fixture
async def results(local_judge: LocalJudge) -> dict[str, tuple[SampleResult, dict]]:
    ev = Evaluator(local_judge)
    needs = Needs(facts=frozenset({Fact.CONTEXT_USEFUL, Fact.CONTEXT_USED, Fact.CONTEXT_RATINGS}))
    out = {}
    for sid, sample in SAMPLES.items():
        out[sid] = (await ev.evaluate(sample), await local_judge.gather(sample, needs))
    return out


@pytest.mark.parametrize("sid", sorted(EXPECTED))
async def test_metrics_agree_with_the_obvious_reading(sid: str, results) -> None:
    result, findings = results[sid]
    exp = EXPECTED[sid]
    v = {s.metric: s.value for s in result.scores}
    useful = findings[Fact.CONTEXT_USEFUL].value
    used = findings[Fact.CONTEXT_USED].value
    if "faithful" in exp:
        assert (v["faithfulness"] >= HIGH) if exp["faithful"] else (v["faithfulness"] < LOW), v
    assert (v["answer_relevancy"] >= HIGH) if exp["relevant"] else (v["answer_relevancy"] < LOW), v
    assert useful == exp["useful"], findings[Fact.CONTEXT_USEFUL]
    if "used" in exp:
        assert used == exp["used"], findings[Fact.CONTEXT_USED]
    # The three context metrics tell one story: a useful context ranked first gives precision
    # 1, none gives 0, and the relevance rating is high exactly when some context is useful.
    assert v["context_precision"] == pytest.approx(1.0 if useful[0] else 0.0, abs=1e-6)
    assert (v["context_relevance"] >= HIGH) if any(useful) else (v["context_relevance"] < LOW), v
    # A context that supports an answer addressing the question is useful by definition.
    if exp["relevant"] and v["answer_relevancy"] >= HIGH and any(used):
        assert any(u and f for u, f in zip(used, useful)), (used, useful)


def test_chinese_degree_questions_keep_only_their_content() -> None:
    # "How long is the Great Wall?": 有多长 is the question word, as "how long" is in English.
    assert content_units("长城有多长？", question=True) == {"长城"}
    assert content_units("故宫有多大", question=True) == {"故宫"}
    assert content_units("中国有多少人口？", question=True) >= {"中国", "人口"}
    # Japanese keeps 多大 (a word there, "great"), and non-questions keep everything.
    assert "多大" in content_units("多大な影響は何ですか", question=True)
    assert "多长" in content_units("长城有多长")


async def test_usefulness_sees_the_question_and_contexts_only(local_judge: LocalJudge) -> None:
    """context_precision is defined on (question, contexts) (the metric definitions): the same
    question and contexts give the same verdicts whatever the answer says, or if it is empty."""
    needs = Needs(facts=frozenset({Fact.CONTEXT_USEFUL}))
    for sid in ("zh-faithful", "en-faithful", "en-noncommittal"):
        base = SAMPLES[sid]
        verdicts = set()
        for answer in (base.answer, "", "I don't know.", "完全に無関係な答えです。"):
            found = await local_judge.gather(base.model_copy(update={"answer": answer}), needs)
            verdicts.add(tuple(found[Fact.CONTEXT_USEFUL].value))
        assert verdicts == {tuple(EXPECTED[sid]["useful"])}, (sid, verdicts)


def test_score_command_rounds_and_reports_the_judges_own_time(tmp_path: Path) -> None:
    from ragpulse.deploy.cli import _register, app

    _register()
    out = tmp_path / "scores.jsonl"
    t0 = time.perf_counter()
    res = CliRunner().invoke(app, ["score", "--input", str(EXAMPLES), "--output", str(out),
                                   "--judge", "fast", "--concurrency", "8", "--quiet"])
    wall_ms = (time.perf_counter() - t0) * 1000.0
    assert res.exit_code == 0, res.output
    lines = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert [x["id"] for x in lines] == list(SAMPLES)
    for x in lines:
        for s in x["scores"].values():
            for n in [s["value"], *(s["interval"] or [])]:
                assert n is None or n == round(n, 4), s
        # The line's latency is the sum of its scores' shares of the judge's time.
        own = sum(s["cost"]["latency_ms"] for s in x["scores"].values())
        assert x["latency_ms"] == pytest.approx(own, abs=0.05)
        assert x["latency_ms"] > 0
    # One worker thread judges one sample at a time, so the judge's own times cannot add up to
    # more than the run took. The wall-clock latencies this replaces (each including the wait
    # behind the samples queued before it) added up to several times the run.
    assert sum(x["latency_ms"] for x in lines) <= wall_ms
    zh = next(x for x in lines if x["id"] == "zh-faithful")["scores"]
    assert zh["context_precision"]["value"] == 1.0 and zh["context_utilization"]["value"] == 1.0
    assert zh["context_precision"]["counts"] == {"contexts": 2, "useful": 1}
