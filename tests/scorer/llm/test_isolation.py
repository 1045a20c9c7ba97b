"""Each verdict sees exactly the inputs its metric's definition names (docs/metrics.md),
whatever other metrics run beside it, and a metric's value does not depend on the metric set."""

from __future__ import annotations

import itertools
import re
from typing import Any

import pytest

from ragpulse.scorer import Evaluator, Reason, Sample
from ragpulse.scorer.judges.base import Needs
from ragpulse.scorer.judges.llm import LLMJudgeSettings, render_requests
from ragpulse.scorer.metrics import resolve_metrics
from ragpulse.scorer.segment import split_sentences
from testkit.judge import TableEmbedder
from testkit.openai_server import Recorded, Reply, data_blocks

from .conftest import words
from .test_call_plan import SAMPLE

# The data a task may show, by data-block kind, from the metric definitions: context_precision
# (Q, C), faithfulness and context_utilization (Q, C, A), answer relevancy's generated questions
# (A alone: the user question is what they are compared with), context_relevance and legacy
# context_relevancy (Q, C), context_recall (C, R), answer_correctness (Q, A, R).
SEES: dict[str, set[str]] = {
    "context_useful": {"question", "context"},
    "claims": {"question", "context", "answer"},
    "context_used": {"question", "context", "answer"},
    "questions": {"answer"},
    "rating": {"question", "context"},
    "needed": {"question", "context"},
    "statements": {"question", "answer"},
    "reference_statements": {"reference"},
    "reference_attribution": {"context", "reference_statement"},
    "correctness": {"question", "statement", "reference_statement"},
}
METRICS = ["faithfulness", "answer_relevancy", "context_precision", "context_utilization",
           "context_relevance", "context_relevancy", "context_recall", "answer_correctness"]
WITH_REFERENCE = SAMPLE.model_copy(update={
    "reference": "The head office is in Delhi. The group was founded in 1934."})


def asked(user: str) -> set[str]:
    """The tasks a rendered request asks, from the reply keys its output section names."""
    return {t for t in SEES if re.search(rf'(?<![_a-z])"{t}"', user)}


def needs_of(metrics: tuple[str, ...]) -> Needs:
    return Needs(frozenset(f for m in resolve_metrics(list(metrics)) for f in m.facts))


def subsets(items: list[str]) -> list[tuple[str, ...]]:
    return [c for r in range(1, len(items) + 1) for c in itertools.combinations(items, r)]


def test_every_request_for_every_metric_subset_shows_exactly_its_tasks_inputs():
    settings = LLMJudgeSettings(api_key="x")
    seen_tasks: set[str] = set()
    for metrics in subsets(METRICS):
        for req in render_requests(WITH_REFERENCE, needs_of(metrics), settings, nonce="0a1b2c3d4e5f6071"):
            user = req[-1]["content"]
            tasks = asked(user)
            assert tasks, f"{metrics}: a request asking nothing known"
            kinds = {k for (_, k, _, _) in data_blocks(user)}
            for t in tasks:
                assert kinds == SEES[t], f"{metrics}: {t} saw {sorted(kinds)}"
            assert "rank order" not in user
            seen_tasks |= tasks
    assert seen_tasks == set(SEES)  # every task was rendered at least once


def test_aspect_critique_sees_question_contexts_and_answer():
    from ragpulse.scorer import Fact
    from ragpulse.scorer.judges.base import BUILTIN_CRITERIA

    needs = Needs(frozenset({Fact.ASPECTS}), (BUILTIN_CRITERIA["correctness"],))
    (req,) = render_requests(SAMPLE, needs, LLMJudgeSettings(api_key="x"),
                             nonce="0a1b2c3d4e5f6071")
    assert {k for (_, k, _, _) in data_blocks(req[-1]["content"])} == {
        "question", "context", "answer"}


def test_the_card_takes_three_calls_whatever_else_runs():
    settings = LLMJudgeSettings(api_key="x")
    card = ("faithfulness", "answer_relevancy", "context_precision", "context_utilization")
    assert len(render_requests(SAMPLE, needs_of(card), settings)) == 3
    assert len(render_requests(SAMPLE, needs_of(("context_precision",)), settings)) == 1
    assert len(render_requests(SAMPLE, needs_of(("faithfulness", "context_utilization")),
                               settings)) == 1


def leaky_model(rec: Recorded) -> Reply:
    """A deterministic model that uses *everything* a request shows: every verdict compares the
    contexts with all the non-context text in the request (so a verdict that was shown the
    answer when it should not be, or the question, changes value)."""
    blocks = data_blocks(rec.text())
    user = rec.messages[-1]["content"]
    contexts = [c for (_, k, _, c) in blocks if k == "context"]
    shown = " ".join(c for (_, k, _, c) in blocks if k not in ("context",))
    answer = " ".join(c for (_, k, _, c) in blocks if k == "answer")
    out: dict[str, Any] = {}
    tasks = asked(user)
    if "questions" in tasks:
        out["questions"] = [f"What about {shown}?"]
        out["noncommittal"] = 0
    if "context_useful" in tasks:
        out["context_useful"] = [{"context": i, "useful": int(bool(words(c) & words(shown)))}
                                 for i, c in enumerate(contexts, start=1)]
    if "claims" in tasks:
        out["claims"] = [
            {"statement": s, "reason": "r", "contexts": [],
             "supported": int(any(words(s) <= words(c) | words(shown) - words(answer)
                                  for c in contexts))}
            for s in split_sentences(answer)]
    if "context_used" in tasks:
        out["context_used"] = [{"context": i, "used": int(bool(words(c) & words(shown)))}
                               for i, c in enumerate(contexts, start=1)]
    if "rating" in tasks:
        hits = sum(bool(words(c) & words(shown)) for c in contexts)
        out["rating"] = min(2, hits)
    if "needed" in tasks:
        out["needed"] = [int(m.group(1)) for m in re.finditer(r"\[S(\d+)\] ([^\n<]*)", user)
                         if words(m.group(2)) & words(shown)]
    return Reply.json(out)


CASES = [
    SAMPLE,
    Sample(id="ja", question="オベロイ・グループの本社はどこですか？",
           contexts=("オベロイ・グループはデリーに本社を置くホテル会社である。", "クリケットはインドで人気がある。",
                     "本社 の 所在地 は 公開 されて いる 。"),
           answer="デリーです。創業は1934年です。"),
    SAMPLE.model_copy(update={"id": "mumbai", "answer": "The head office is in Mumbai. "
                              "Cricket is popular."}),
]


@pytest.mark.parametrize("sample", CASES, ids=lambda s: s.id)
async def test_a_metrics_value_does_not_change_with_the_metric_set(server, make_judge, sample):
    server.handler = leaky_model
    metrics = ["faithfulness", "answer_relevancy", "context_precision", "context_utilization",
               "context_relevance", "context_relevancy"]
    emb = TableEmbedder()
    alone: dict[str, float | None] = {}
    for m in metrics:
        (score,) = (await Evaluator(make_judge(embedder=emb), [m]).evaluate(sample)).scores
        assert score.status == "ok", (m, score.reason, score.detail)
        alone[m] = score.value
    for subset in subsets(metrics):
        if len(subset) == 1:
            continue
        res = await Evaluator(make_judge(embedder=emb), list(subset)).evaluate(sample)
        got = {s.metric: s.value for s in res.scores}
        assert got == {m: alone[m] for m in subset}, subset


def test_claims_must_be_drawn_from_the_answer_in_its_language():
    from ragpulse.scorer.judges.llm.parsing import ParseFailure, parse_task

    source = {"contexts": 1, "source_text": "オベロイ・グループの本社はどこですか？\nデリーです。"}

    def claims(*statements):
        return {"claims": [{"statement": st, "reason": "r", "contexts": [1], "supported": 1}
                           for st in statements]}

    ok = parse_task("claims", claims("オベロイ・グループの本社はデリーにある。"), source)
    assert ok["statements"] == ["オベロイ・グループの本社はデリーにある。"] and ok["verdicts"] == [1]
    for bad in ("The Oberoi Group's head office is in Delhi.", "すべての文は支持されている。"):
        got = parse_task("claims", claims(bad), source)
        assert isinstance(got, ParseFailure) and got.reason is Reason.VERDICTS_MISMATCH
    assert parse_task("claims", {"claims": []}, source)["statements"] == []
