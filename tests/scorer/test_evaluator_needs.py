"""The evaluator's precomputed Needs (all metrics runnable) equal what it computes per sample,
and fall back to per-sample computation when a precondition drops a metric or ``metrics`` is
replaced after construction."""

from __future__ import annotations

import asyncio

from ragpulse.scorer.evaluator import Evaluator
from ragpulse.scorer.metrics import resolve_metrics
from ragpulse.scorer.model import Cost, Fact, Sample

from .doubles import TableJudge

FACTS = {
    Fact.STATEMENTS: ["a", "b"],
    Fact.STATEMENT_SUPPORT: [1, 0],
    Fact.QUESTION_SIMILARITY: {"questions": ["q"], "similarities": [0.8], "noncommittal": False},
    Fact.CONTEXT_USEFUL: [1],
    Fact.CONTEXT_USED: [0],
    Fact.CONTEXT_RATINGS: [2, 2],
}
FULL = Sample(id="t1", question="q?", contexts=("c",), answer="a.")


def _facts_of(metrics: list) -> frozenset[Fact]:
    return frozenset(f for m in metrics for f in m.facts)


def test_all_runnable_uses_the_facts_of_every_metric_and_shares_costs() -> None:
    judge = TableJudge(FACTS, cost=Cost(llm_calls=6.0))
    ev = Evaluator(judge)
    res = asyncio.run(ev.evaluate(FULL))
    assert judge.calls == [("t1", _facts_of(resolve_metrics(None)))]
    # Each fact's cost is split between the metrics that use it: the shares sum to the total.
    assert abs(sum(s.cost.llm_calls for s in res.scores) - 6.0) < 1e-9


def test_a_failed_precondition_asks_only_for_the_runnable_metrics_facts() -> None:
    judge = TableJudge(FACTS)
    ev = Evaluator(judge)
    no_contexts = Sample(id="t2", question="q?", answer="a.")
    res = asyncio.run(ev.evaluate(no_contexts))
    runnable = [m for m in ev.metrics if not m.needs_contexts]
    assert judge.calls == [("t2", _facts_of(runnable))]
    assert {s.metric: s.status for s in res.scores}["context_precision"] == "null"


def test_replacing_metrics_after_construction_is_honoured() -> None:
    judge = TableJudge(FACTS)
    ev = Evaluator(judge)
    ev.metrics = tuple(resolve_metrics(["faithfulness"]))
    res = asyncio.run(ev.evaluate(FULL))
    assert [s.metric for s in res.scores] == ["faithfulness"]
    assert judge.calls == [("t1", frozenset({Fact.STATEMENTS, Fact.STATEMENT_SUPPORT}))]
