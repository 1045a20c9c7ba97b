"""Every worked example of docs/metrics.md, reproduced through the real evaluator (the page's
"Worked examples", "Also available", "With a reference" and "Worked examples that do not follow
from their formulas" sections)."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from ragpulse.scorer import Evaluator, Fact, Reason, Sample, Score, resolve_metrics
from ragpulse.scorer.metrics import answer_correctness_value
from ragpulse.scorer.model import Cost
from ragpulse.scorer.stats import average_precision, wilson_interval

from .doubles import TableJudge

FULL = Sample(id="s1", question="Q?", contexts=("c1", "c2", "c3"), answer="A.", reference="R.")


async def score(metric: str, facts: dict, sample: Sample = FULL) -> Score:
    ev = Evaluator(TableJudge(facts), [metric])
    (s,) = (await ev.evaluate(sample)).scores
    return s


async def test_faithfulness_seed001_three_of_five_supported_is_0_6():
    # Seed 001's prose: "3 of the 5 statements are in the context, so the score is 0.6".
    s = await score("faithfulness", {Fact.STATEMENTS: ["a", "b", "c", "d", "e"],
                                     Fact.STATEMENT_SUPPORT: [1, 0, 1, 0, 1]})
    assert s.value == pytest.approx(0.6)
    assert s.counts == {"statements": 5, "supported": 3}
    assert s.interval is not None and s.interval.low < 0.6 < s.interval.high


async def test_faithfulness_seed001_verdict_line_no_no_yes_no_yes():
    # The verdict line the seed prints, "No. No. Yes. No. Yes.", holds two Yes: by the
    # definition (supported / |S|) that is 0.4. The seed's 0.6 counts the three "No" (its
    # slip). We follow the definition: docs/metrics.md, "Worked examples that do not follow".
    s = await score("faithfulness", {Fact.STATEMENTS: ["a", "b", "c", "d", "e"],
                                     Fact.STATEMENT_SUPPORT: [0, 0, 1, 0, 1]})
    assert s.value == pytest.approx(0.4)


async def test_faithfulness_no_statements_is_null_with_reason():
    s = await score("faithfulness", {Fact.STATEMENTS: [], Fact.STATEMENT_SUPPORT: []})
    assert s.value is None and s.status == "null" and s.reason == "no_statements"


async def test_answer_relevancy_seed003_mean_of_similarities():
    s = await score("answer_relevancy", {Fact.QUESTION_SIMILARITY: {
        "questions": ["q1", "q2"], "similarities": [0.95, 0.90], "noncommittal": False}})
    assert s.value == pytest.approx(0.925)


async def test_answer_relevancy_noncommittal_scores_zero():
    s = await score("answer_relevancy", {Fact.QUESTION_SIMILARITY: {
        "questions": ["q"], "similarities": [0.99], "noncommittal": True}})
    assert s.value == 0.0 and s.status == "ok"


@pytest.mark.parametrize(("verdicts", "expected"), [
    ([0, 1, 1], (0 + 1 / 2 + 2 / 3) / 2),  # seed 000: 0.5833
    ([0, 1], 0.5),
    ([0, 0, 0], 0.0),
    ([1, 1, 1], 1.0),
])
async def test_context_precision_seed000(verdicts, expected):
    s = await score("context_precision", {Fact.CONTEXT_USEFUL: verdicts},
                    Sample(id="x", question="Q", contexts=tuple(f"c{i}" for i in verdicts)))
    assert s.value == pytest.approx(expected)
    assert round(s.value, 4) == round(expected, 4)


def test_context_precision_seed000_rounds_to_0_5833():
    assert round(average_precision([0, 1, 1]), 4) == 0.5833


async def test_context_utilization_uses_the_same_formula():
    s = await score("context_utilization", {Fact.CONTEXT_USED: [0, 1, 1]})
    assert s.value == pytest.approx(0.58333, abs=1e-4)


@pytest.mark.parametrize(("verdicts", "expected"), [
    ([0, 1, 0, 1], 0.5),       # docs/metrics.md's worked example: (1/2 + 2/4) / 2
    ([1, 1, 0, 0], 1.0),       # the same two passages ranked first
    ([1, 0, 0, 1], 0.75),      # at ranks 1 and 4
    ([1, 1, 0, 1], 2.75 / 3),  # passage 1 read as used: 0.917
])
async def test_context_utilization_worked_example(verdicts, expected):
    s = await score("context_utilization", {Fact.CONTEXT_USED: verdicts},
                    FULL.model_copy(update={"contexts": tuple(f"c{i}" for i in verdicts)}))
    assert s.value == pytest.approx(expected)
    assert s.counts == {"contexts": 4, "used": sum(verdicts)}


@pytest.mark.parametrize(("ratings", "expected", "status"), [
    ([2, 1], 0.75, "ok"),
    ([2, None], 1.0, "ok"),     # one unusable rating: use the other
    ([None, 0], 0.0, "ok"),
    ([None, None], None, "error"),  # both unusable: NULL
])
async def test_context_relevance_two_ratings(ratings, expected, status):
    s = await score("context_relevance", {Fact.CONTEXT_RATINGS: ratings})
    assert s.status == status
    assert s.value == (pytest.approx(expected) if expected is not None else None)


async def test_context_relevancy_legacy_seed001_2_of_4_sentences():
    s = await score("context_relevancy", {Fact.CONTEXT_SENTENCES: {"needed": 2, "total": 4}})
    assert s.value == 0.5


@pytest.mark.parametrize(("verdicts", "expected"), [([1], 1.0), ([1, 1, 0], 2 / 3)])
async def test_context_recall_seed000_and_seed003(verdicts, expected):
    s = await score("context_recall", {Fact.REFERENCE_ATTRIBUTION: {
        "statements": [f"r{i}" for i in range(len(verdicts))], "verdicts": verdicts}})
    assert s.value == pytest.approx(expected)
    assert round(s.value, 2) == round(expected, 2)  # seed 003 prints 0.67


async def test_answer_similarity_is_the_cosine():
    s = await score("answer_similarity", {Fact.ANSWER_SIMILARITY: 0.95})
    assert s.value == pytest.approx(0.95)


def test_answer_correctness_seed003_weights_and_similarity():
    # docs/metrics.md, answer_correctness: F1 0.5 and similarity 0.6 give 0.525 (0.75 / 0.25).
    # (TP 1, FP 1, FN 1 is the statement count whose F1 is 0.5.)
    assert answer_correctness_value(1, 1, 1, 0.6) == pytest.approx(0.525)
    # The seed's own counts, TP 1 / FP 1 / FN 2, give F1 = 1 / (1 + 0.5 * 3) = 0.4 by its own
    # formula (the seed's "= 1 / 2 = 0.5" is an arithmetic slip): score 0.75*0.4 + 0.25*0.6.
    assert answer_correctness_value(1, 1, 2, 0.6) == pytest.approx(0.45)
    assert answer_correctness_value(0, 3, 2, 0.9) == pytest.approx(0.25 * 0.9)  # TP = 0: F1 = 0
    assert answer_correctness_value(1, 1, 1, 0.6, (0.5, 0.5)) == pytest.approx(0.55)  # seed 004


async def test_answer_correctness_through_evaluator():
    s = await score("answer_correctness", {
        Fact.CORRECTNESS: {"tp": ["a"], "fp": ["b"], "fn": ["c"]}, Fact.ANSWER_SIMILARITY: 0.6})
    assert s.value == pytest.approx(0.525)
    assert s.counts == {"tp": 1, "fp": 1, "fn": 1}


async def test_aspect_critique_majority_vote():
    s = await score("aspect_critique:coherence", {Fact.ASPECTS: {"coherence": [1, 0, 1]}})
    assert s.value == 1.0 and s.counts == {"votes": 3, "yes": 2}
    s = await score("aspect_critique:harmfulness", {Fact.ASPECTS: {"harmfulness": [0, 1, 0]}})
    assert s.value == 0.0


def test_resolve_metrics_expands_aspect_critique_and_rejects_unknown():
    names = [m.name for m in resolve_metrics(["aspect_critique"])]
    assert names == [f"aspect_critique:{c}" for c in
                     ("harmfulness", "maliciousness", "coherence", "correctness", "conciseness")]
    with pytest.raises(ValueError, match="unknown metric.*nope"):
        resolve_metrics(["faithfulness", "nope"])
    assert [m.name for m in resolve_metrics(None)] == [
        "faithfulness", "answer_relevancy", "context_precision", "context_utilization",
        "context_relevance"]


def test_wilson_two_of_two_is_wider_than_forty_of_forty():
    small, big = wilson_interval(2, 2), wilson_interval(40, 40)
    assert small.high == 1.0 and big.high == 1.0
    assert small.low == pytest.approx(0.342, abs=1e-3)
    assert big.low == pytest.approx(0.912, abs=1e-3)
    assert wilson_interval(0, 0) is None


def test_score_is_never_nan_and_null_needs_reason():
    with pytest.raises(ValidationError):
        Score(metric="m", value=math.nan)
    with pytest.raises(ValidationError):
        Score(metric="m", value=1.5)
    with pytest.raises(ValidationError):
        Score(metric="m", value=None, status="ok")
    s = Score.missing("m", Reason.BUDGET_EXHAUSTED)
    assert s.status == "skipped" and s.reason == "budget_exhausted"


async def test_reference_metrics_without_reference_are_null_and_not_judged():
    judge = TableJudge({Fact.STATEMENTS: ["a"], Fact.STATEMENT_SUPPORT: [1]})
    ev = Evaluator(judge, ["faithfulness", "context_recall", "answer_correctness"])
    res = await ev.evaluate(Sample(id="x", question="Q", contexts=("c",), answer="A"))
    by = {s.metric: s for s in res.scores}
    assert by["faithfulness"].value == 1.0
    assert by["context_recall"].reason == "no_reference" and by["context_recall"].status == "null"
    assert by["answer_correctness"].reason == "no_reference"
    assert judge.calls == [("x", frozenset({Fact.STATEMENTS, Fact.STATEMENT_SUPPORT}))]


async def test_missing_inputs_give_reasons_without_calling_the_judge():
    judge = TableJudge({})
    ev = Evaluator(judge, ["faithfulness", "answer_relevancy", "context_precision"])
    res = await ev.evaluate(Sample(id="x", question="", contexts=(), answer=""))
    assert [s.reason for s in res.scores] == ["no_contexts", "no_question", "no_question"]
    assert judge.calls == []


async def test_judge_failure_becomes_error_status():
    s = await score("faithfulness", {Fact.STATEMENTS: Reason.UNPARSEABLE_JUDGE_OUTPUT})
    assert s.value is None and s.status == "error" and s.reason == "unparseable_judge_output"


async def test_shared_fact_cost_is_split_so_totals_add_up():
    judge = TableJudge({Fact.STATEMENTS: ["a"], Fact.STATEMENT_SUPPORT: [1],
                        Fact.CONTEXT_USED: [1, 0, 0], Fact.CONTEXT_USEFUL: [1, 1, 0]},
                       cost=Cost(llm_calls=2, prompt_tokens=3000, completion_tokens=400))
    ev = Evaluator(judge, ["faithfulness", "context_precision", "context_utilization"])
    res = await ev.evaluate(FULL)
    assert res.cost.llm_calls == pytest.approx(2)
    assert res.cost.prompt_tokens == pytest.approx(3000)
    assert res.scores[0].cost.prompt_tokens == pytest.approx(1500)  # two of four facts
