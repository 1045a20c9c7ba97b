"""The call plan against a real OpenAI-compatible server: the card's four metrics in three
isolated calls, exact scores from scripted replies, cost shares, the verdict cache, and the other
facts."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ragpulse.scorer import Evaluator, Fact, Sample
from ragpulse.scorer.judges.base import Criterion, Needs
from ragpulse.scorer.judges.llm import LLMJudgeSettings, render_requests
from ragpulse.scorer.stats import average_precision
from testkit.judge import TableEmbedder
from testkit.openai_server import Reply, data_blocks

CARD = ["faithfulness", "answer_relevancy", "context_precision", "context_utilization"]
QUESTION = "Where is the head office of the Oberoi Group?"
SAMPLE = Sample(
    id="oberoi",
    question=QUESTION,
    contexts=(
        "The Oberoi family is famous for its involvement in hotels.",
        "The Oberoi Group is a hotel company with its head office in Delhi.",
        "The group runs 30 luxury hotels.",
        "Mumbai is the financial capital of India.",
        "Cricket is popular in India.",
    ),
    answer="The head office is in Delhi. It was founded in 1934. It runs 30 hotels.",
)
STATEMENTS = ["The head office of the Oberoi Group is in Delhi.",
              "The Oberoi Group was founded in 1934.", "The Oberoi Group runs 30 hotels."]
GEN_QS = ["Where is the Oberoi Group's head office?", "When was the Oberoi Group founded?",
          "How many hotels does the Oberoi Group run?"]


def angle(cos: float) -> list[float]:
    return [cos, float(np.sqrt(1 - cos * cos))]


EMBEDDER = TableEmbedder({QUESTION: [1.0, 0.0], GEN_QS[0]: angle(1.0), GEN_QS[1]: angle(0.8),
                          GEN_QS[2]: angle(0.6)})

DECOMPOSE = {"questions": GEN_QS, "noncommittal": 0}
CLAIMS = [{"statement": STATEMENTS[0], "reason": "context 2 names Delhi", "contexts": [2],
           "supported": 1},
          {"statement": STATEMENTS[1], "reason": "no context gives a year", "contexts": [],
           "supported": 0},
          {"statement": STATEMENTS[2], "reason": "contexts 2 and 3 together", "contexts": [3, 2],
           "supported": 1}]
GROUNDING = {
    "claims": CLAIMS,
    "context_used": [{"context": i, "used": u} for i, u in enumerate([1, 0, 0, 0, 1], 1)],
}
ASSESS = {
    "context_useful": [{"context": i, "useful": u} for i, u in enumerate([0, 1, 1, 0, 0], 1)],
}


def script_card(server, *, usage: bool = False):
    server.script("decompose", Reply.json(DECOMPOSE, **({"usage": (300, 60)} if usage else {})))
    server.script("grounding", Reply.json(GROUNDING, **({"usage": (1500, 200)} if usage else {})))
    server.script("assess", Reply.json(ASSESS, **({"usage": (1200, 40)} if usage else {})))


async def test_card_metrics_take_three_isolated_calls_and_score_exactly(server, make_judge):
    script_card(server, usage=True)
    judge = make_judge(embedder=EMBEDDER)
    result = await Evaluator(judge, CARD).evaluate(SAMPLE)
    s = {x.metric: x for x in result.scores}

    assert sorted(r.prompt for r in server.requests) == ["assess@2", "decompose@2", "grounding@1"]
    assert s["faithfulness"].value == pytest.approx(2 / 3)
    assert s["faithfulness"].counts == {"statements": 3, "supported": 2}
    assert s["answer_relevancy"].value == pytest.approx((1.0 + 0.8 + 0.6) / 3, abs=1e-6)
    assert s["context_precision"].value == pytest.approx((1 / 2 + 2 / 3) / 2)
    assert s["context_utilization"].value == pytest.approx(average_precision([1, 0, 0, 0, 1]))
    assert s["faithfulness"].prompt_version == "grounding@1"
    assert s["context_precision"].prompt_version == "assess@2"
    assert s["answer_relevancy"].prompt_version == "decompose@2"
    assert all(x.judge == "llm" and x.model == "fake-judge" for x in result.scores)
    # Cost shares sum to what the server billed.
    assert result.cost.llm_calls == pytest.approx(3.0)
    assert result.cost.prompt_tokens == pytest.approx(300 + 1500 + 1200)
    assert result.cost.completion_tokens == pytest.approx(60 + 200 + 40)
    assert judge.stats.as_dict()["prompt_tokens"] == 3000


async def test_each_call_shows_only_its_inputs_and_support_may_cite_several_contexts(
        server, make_judge):
    script_card(server)
    judge = make_judge(embedder=EMBEDDER)
    findings = await judge.gather(SAMPLE, Needs(frozenset({
        Fact.STATEMENTS, Fact.STATEMENT_SUPPORT, Fact.QUESTION_SIMILARITY, Fact.CONTEXT_USEFUL,
        Fact.CONTEXT_USED})))
    by = {r.prompt.split("@")[0]: r for r in server.requests}
    kinds = {p: {k for (_, k, _, _) in data_blocks(r.text())} for p, r in by.items()}
    assert kinds == {"decompose": {"answer"}, "assess": {"question", "context"},
                     "grounding": {"question", "context", "answer"}}
    blocks = data_blocks(by["grounding"].text())
    assert [(n, c) for (_, k, n, c) in blocks if k == "context"] == list(
        enumerate(SAMPLE.contexts, start=1))
    assert "rank order" not in by["assess"].text()
    assert findings[Fact.STATEMENTS].value == STATEMENTS
    support = findings[Fact.STATEMENT_SUPPORT]
    assert support.value == [1, 0, 1] and support.extra["contexts"] == [[2], [], [2, 3]]
    assert support.extra["reasons"][2] == "contexts 2 and 3 together"
    body = by["grounding"].body
    assert body["temperature"] == 0.0 and body["seed"] == 42
    assert body["response_format"]["type"] == "json_schema"
    schema = body["response_format"]["json_schema"]["schema"]
    assert schema["required"] == ["claims", "context_used"]
    claim = schema["$defs"]["_Claim"]["properties"]
    assert list(claim) == ["statement", "reason", "contexts", "supported"]  # reason first
    assert body["model"] == "fake-judge" and body["max_tokens"] == 2048
    assert by["assess"].headers["authorization"] == "Bearer sk-test-secret"


async def test_only_the_needed_tasks_are_asked(server, make_judge):
    judge = make_judge()
    res = await Evaluator(judge, ["context_precision"]).evaluate(SAMPLE)
    (req,) = server.requests
    assert req.prompt == "assess@2"
    user = req.messages[-1]["content"]
    assert '"context_useful"' in user
    assert '"context_used"' not in user and '"claims"' not in user
    assert {k for (_, k, _, _) in data_blocks(user)} == {"question", "context"}  # no answer shown
    # content-aware model: contexts sharing a word with the question are useful
    assert res.scores[0].value == pytest.approx(average_precision([1, 1, 0, 0, 0]))


async def test_rescoring_hits_the_verdict_cache(server, make_judge):
    judge = make_judge(embedder=EMBEDDER)
    ev = Evaluator(judge, CARD)
    first = await ev.evaluate(SAMPLE)
    n = len(server.requests)
    second = await ev.evaluate(SAMPLE)
    assert len(server.requests) == n == 3
    assert [x.value for x in first.scores] == [x.value for x in second.scores]
    assert second.cost.llm_calls == 0
    assert judge.stats.cache_hits == 3
    # A different model is a different cache key.
    other = make_judge(embedder=EMBEDDER, model="other-judge")
    await Evaluator(other, CARD).evaluate(SAMPLE)
    assert len(server.requests) == 6


async def test_noncommittal_answer_scores_zero_relevancy(server, make_judge):
    sample = SAMPLE.model_copy(update={"answer": "I don't know."})
    res = await Evaluator(make_judge(), ["answer_relevancy"]).evaluate(sample)
    assert res.scores[0].value == 0.0 and res.scores[0].explanation == "non-committal answer"


async def test_reference_facts_take_their_own_isolated_calls(server, make_judge):
    sample = SAMPLE.model_copy(update={
        "reference": "The head office is in Delhi. The group was founded in 1934."})
    emb = TableEmbedder({sample.answer: [1.0, 0.0], sample.reference: angle(0.5)})
    judge = make_judge(embedder=emb)
    res = await Evaluator(judge, ["faithfulness", "context_recall", "answer_correctness",
                                  "answer_similarity"]).evaluate(sample)
    s = {x.metric: x for x in res.scores}
    shown = {tuple(sorted(t for t in ("statements", "reference_statements", "claims",
                                      "reference_attribution", "correctness")
                          if f'"{t}"' in r.messages[-1]["content"])):
             {k for (_, k, _, _) in data_blocks(r.text())} for r in server.requests}
    assert shown == {("statements",): {"question", "answer"},
                     ("reference_statements",): {"reference"},
                     ("claims",): {"question", "context", "answer"},
                     ("reference_attribution",): {"context", "reference_statement"},
                     ("correctness",): {"question", "statement", "reference_statement"}}
    # content-aware: ref "The head office is in Delhi." is in context 2; "founded in 1934" nowhere
    assert s["context_recall"].value == pytest.approx(0.5)
    # word-subset model: answer "It was founded in 1934." is in the reference (TP) but the
    # reference's "The group was founded in 1934." is not in the answer ("group"): FN.
    assert s["answer_correctness"].counts == {"tp": 2, "fp": 1, "fn": 1}
    assert s["answer_similarity"].value == pytest.approx(0.5, abs=1e-6)
    assert s["answer_similarity"].model == "table-embedder"


async def test_context_ratings_use_two_differently_worded_prompts(server, make_judge):
    server.script("context_rating_a", Reply.json({"rating": 2}))
    server.script("context_rating_b", Reply.json({"rating": 1}))
    res = await Evaluator(make_judge(), ["context_relevance"]).evaluate(SAMPLE)
    a, b = sorted(server.requests, key=lambda r: r.prompt)
    assert (a.prompt, b.prompt) == ("context_rating_a@2", "context_rating_b@2")
    assert a.messages[0]["content"] != b.messages[0]["content"]
    for r in (a, b):  # the answerability scale, not "any relevant information"
        user = r.messages[-1]["content"]
        assert "fully answers" in user or "whole answer" in user
        assert "any relevant information" not in user
    assert res.scores[0].value == pytest.approx((2 + 1) / 2 / 2)
    assert res.scores[0].prompt_version == "context_rating_a@2+context_rating_b@2"


async def test_one_unusable_rating_leaves_the_other(server, make_judge):
    server.script("context_rating_a", Reply.json({"rating": 7}), Reply.json({"rating": 9}))
    server.script("context_rating_b", Reply.json({"rating": 2}))
    res = await Evaluator(make_judge(), ["context_relevance"]).evaluate(SAMPLE)
    assert res.scores[0].value == 1.0


async def test_context_sentences_are_numbered_by_segmentation(server, make_judge):
    server.script("context_sentences", Reply.json({"needed": [2, 2, 5]}))
    res = await Evaluator(make_judge(), ["context_relevancy"]).evaluate(SAMPLE)
    (req,) = server.requests
    user = req.messages[-1]["content"]
    assert "[S1] The Oberoi family" in user and "[S5] Cricket is popular in India." in user
    assert res.scores[0].value == pytest.approx(2 / 5)
    assert res.scores[0].counts == {"sentences": 5, "needed": 2}


async def test_aspect_strictness_is_the_number_of_votes(server, make_judge):
    crit = Criterion("polite", "Is the submission polite?", strictness=3)
    server.script("aspects", *[Reply.json({"verdicts": [{"criterion": "polite", "verdict": v}]})
                               for v in (1, 0, 1)])
    judge = make_judge()
    findings = await judge.gather(SAMPLE, Needs(frozenset({Fact.ASPECTS}), (crit,)))
    assert sorted(findings[Fact.ASPECTS].value["polite"]) == [0, 1, 1]
    seeds = sorted(r.body["seed"] for r in server.requests)
    assert seeds == [42, 43, 44]
    assert {r.body["temperature"] for r in server.requests} == {0.7}  # vote_temperature
    assert "polite: Is the submission polite?" in server.requests[0].messages[-1]["content"]


async def test_self_consistency_takes_the_majority_per_verdict(server, make_judge):
    votes = [[1, 0, 1], [1, 1, 0], [0, 0, 1]]
    server.script("assess", *[Reply.json({"context_useful": [
        {"context": i, "useful": u} for i, u in enumerate(v + [0, 0], 1)]}) for v in votes])
    judge = make_judge(votes=3, vote_temperature=0.9)
    f = await judge.gather(SAMPLE, Needs(frozenset({Fact.CONTEXT_USEFUL})))
    assert f[Fact.CONTEXT_USEFUL].value == [1, 0, 1, 0, 0]
    assert [r.body["temperature"] for r in server.requests] == [0.9] * 3
    assert f[Fact.CONTEXT_USEFUL].cost.llm_calls == pytest.approx(3)


async def test_empty_answer_needs_no_call(server, make_judge):
    judge = make_judge()
    f = await judge.gather(SAMPLE.model_copy(update={"answer": ""}),
                           Needs(frozenset({Fact.STATEMENTS, Fact.STATEMENT_SUPPORT})))
    assert f[Fact.STATEMENTS].value == [] and f[Fact.STATEMENT_SUPPORT].value == []
    assert server.requests == []


async def test_render_requests_is_what_goes_on_the_wire(server, make_judge):
    script_card(server)
    judge = make_judge(embedder=EMBEDDER, max_concurrency=1)
    needs = Needs(frozenset({Fact.STATEMENTS, Fact.STATEMENT_SUPPORT, Fact.QUESTION_SIMILARITY,
                             Fact.CONTEXT_USEFUL, Fact.CONTEXT_USED}))
    await judge.gather(SAMPLE, needs)
    rendered = render_requests(SAMPLE, needs, judge.settings, statements=STATEMENTS, nonce="N")

    def normalized(messages):
        text = json.dumps(messages)
        for nonce, *_ in data_blocks("\n".join(m["content"] for m in messages)):
            text = text.replace(nonce, "N")
        return json.loads(text)

    key = lambda m: json.dumps(m, sort_keys=True)  # noqa: E731 - concurrent: any order
    assert sorted(map(key, (normalized(r.messages) for r in server.requests))) == sorted(
        map(key, rendered))
    assert len(render_requests(SAMPLE, needs, LLMJudgeSettings(api_key="x"))) == 3


async def test_voted_grounding_takes_the_majority_over_votes_with_as_many_statements(
        server, make_judge):
    def claims(bits):
        return Reply.json({"claims": [{"statement": STATEMENTS[i], "reason": "r", "contexts": [],
                                       "supported": b} for i, b in enumerate(bits)]})

    by_seed = {42: [1, 0, 1], 43: [1, 1, 0], 44: [1, 1]}  # vote i is sent with seed 42 + i
    server.handler = lambda rec: claims(by_seed[rec.body["seed"]])
    judge = make_judge(votes=3)
    f = await judge.gather(SAMPLE, Needs(frozenset({Fact.STATEMENTS, Fact.STATEMENT_SUPPORT})))
    assert len(server.requests) == 3
    assert f[Fact.STATEMENTS].value == STATEMENTS
    # the two-statement vote is dropped; of the other two, a 1-1 tie is 0
    assert f[Fact.STATEMENT_SUPPORT].value == [1, 0, 0]
    assert f[Fact.STATEMENT_SUPPORT].extra["votes_dropped"] == 1
