"""The scorer's hot-path shortcuts give exactly what the validating code gives (issue 3 speed work).

``Score._fast`` skips pydantic validation for values that already have their exact types; it must
build equal scores, refuse the same invalid ones with the same error type, and fall back to the
validating constructor for anything it does not recognise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import ValidationError

from ragpulse.scorer.evaluator import Evaluator
from ragpulse.scorer.metrics import DEFAULT_METRICS, METRICS, Metric, MetricResult, to_score
from ragpulse.scorer.model import Cost, Fact, Interval, Reason, Sample, Score
from ragpulse.scorer.store.rows import _label, safe_text

from .doubles import TableJudge

FACTS = {
    Fact.STATEMENTS: ["s1", "s2"],
    Fact.STATEMENT_SUPPORT: [1, 0],
    Fact.QUESTION_SIMILARITY: {"questions": ["q"], "similarities": [0.8], "noncommittal": False},
    Fact.CONTEXT_USEFUL: [1],
    Fact.CONTEXT_USED: [0],
    Fact.CONTEXT_RATINGS: [2, 1],
    Fact.REFERENCE_ATTRIBUTION: {"statements": ["r"], "verdicts": [1]},
    Fact.ANSWER_SIMILARITY: 0.7,
}

VALID: list[dict[str, Any]] = [
    {"metric": "m", "value": 0.0},
    {"metric": "m", "value": 1.0, "counts": {"n": 3, "k": 1}, "interval": Interval(low=0.2, high=1.0)},
    {"metric": "m", "value": None, "status": "null", "reason": "no_contexts"},
    {"metric": "m", "value": None, "status": "error", "reason": "judge_error", "explanation": "x"},
    {"metric": "m", "value": 0.5, "judge": "j", "model": "gpt", "prompt_version": "v1+v2",
     "cost": Cost(llm_calls=0.5, prompt_tokens=10.0)},
    # coercible types take the validating path and are coerced exactly as Score() does
    {"metric": "m", "value": 1},
    {"metric": "m", "value": 0.25, "counts": {"n": True}},
    {"metric": "m", "value": 0.25, "unknown_key": 1},
]

INVALID: list[dict[str, Any]] = [
    {"metric": "m", "value": math.nan},
    {"metric": "m", "value": 1.5},
    {"metric": "m", "value": -0.1},
    {"metric": "m", "value": 0.5, "status": "error"},
    {"metric": "m", "value": None},
    {"metric": "m", "value": None, "status": "ok", "reason": "no_answer"},
    {"metric": "m", "value": None, "status": "null", "reason": ""},
    {"metric": "m", "value": 0.5, "status": "bogus"},
    {"metric": "m", "value": "high"},
    {"metric": "m", "value": 0.5, "status": ["ok"]},  # unhashable: refused, not a TypeError
    {"metric": "m", "value": 0.5, "counts": {"n": "x"}},
    {"value": 0.5},
]


@pytest.mark.parametrize("kw", VALID)
def test_fast_score_equals_validated_score(kw: dict[str, Any]) -> None:
    fast, slow = Score._fast(**kw), Score(**kw)
    assert fast == slow
    assert fast.model_dump() == slow.model_dump()
    assert fast.model_dump_json() == slow.model_dump_json()
    assert fast.model_copy(update={"metric": "n"}).metric == "n"
    with pytest.raises(ValidationError):  # frozen like any Score
        fast.value = 0.1  # type: ignore[misc]


@pytest.mark.parametrize("kw", INVALID)
def test_fast_score_refuses_what_the_constructor_refuses(kw: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        Score(**kw)
    with pytest.raises(ValidationError):
        Score._fast(**kw)


def test_fast_scores_never_share_their_counts() -> None:
    a, b = Score._fast(metric="a", value=0.5), Score._fast(metric="b", value=0.5)
    assert a.counts == {} and a.counts is not b.counts


def test_to_score_clamps_and_never_emits_nan() -> None:
    m = METRICS["faithfulness"]
    assert to_score(m, MetricResult(math.nan)).value == 0.0
    assert to_score(m, MetricResult(1.7)).value == 1.0
    s = to_score(m, MetricResult(0.5, counts={"statements": 2, "supported": 1}, interval_of=(1, 2)))
    assert s == Score(metric="faithfulness", value=0.5, counts={"statements": 2, "supported": 1},
                      interval=s.interval)
    assert s.interval is not None and 0.0 <= s.interval.low < 0.5 < s.interval.high <= 1.0


SAMPLES = [
    Sample(id="1", question="q", contexts=("c",), answer="a"),
    Sample(id="2", question=" ", contexts=("c",), answer="a"),
    Sample(id="3", question="q", contexts=(" ", ""), answer="a"),
    Sample(id="4", question="q", contexts=("c",), answer="\n"),
    Sample(id="5", question="q", contexts=("c",), answer="a", reference=" "),
    Sample(id="6", question="q", contexts=("c",), answer="a", reference="r"),
    Sample(id="7"),
]


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda s: s.id)
async def test_evaluator_preconditions_match_metric_precondition(sample: Sample) -> None:
    """The evaluator checks each sample's texts once; the outcome per metric must be exactly
    ``Metric.precondition``'s (which reason, in which order of checks)."""
    ev = Evaluator(TableJudge(FACTS), [*DEFAULT_METRICS, "context_recall", "answer_similarity"])
    result = await ev.evaluate(sample)
    for metric, score in zip(ev.metrics, result.scores, strict=True):
        want = metric.precondition(sample)
        if want is None:
            assert score.status == "ok", (metric.name, score)
        else:
            assert (score.value, score.reason, score.judge) == (None, want.value, "table")


@dataclass(frozen=True)
class _Strict(Metric):
    """A metric type with its own precondition: the evaluator must ask it."""

    def precondition(self, sample: Sample) -> Reason | None:
        return Reason.INPUT_TOO_LARGE if len(sample.answer) > 3 else None


async def test_evaluator_asks_metrics_that_override_precondition() -> None:
    base = METRICS["faithfulness"]
    strict = _Strict("strict_faithfulness", base.facts, base.compute)
    ev = Evaluator(TableJudge(FACTS), [strict, base])
    long_answer = await ev.evaluate(Sample(id="x", question="q", contexts=("c",), answer="long"))
    assert [s.status for s in long_answer.scores] == ["skipped", "ok"]
    assert long_answer.scores[0].reason == "input_too_large"
    short = await ev.evaluate(Sample(id="y", question="q", contexts=("c",), answer="ok"))
    assert [s.value for s in short.scores] == [0.5, 0.5]


def test_row_labels_are_made_safe_once_and_cached_safely() -> None:
    assert _label("faithfulness") == "faithfulness"
    bad = "judge\udcff"
    assert _label(bad) == safe_text(bad, 256) == "judge\ufffd"
    assert _label(bad) == "judge\ufffd"  # from the cache, still repaired
    assert _label("x" * 300) == "x" * 256
    assert _label(None) == ""
    assert _label(b"caf\xc3\xa9") == "café"
    assert _label(bytearray(b"ab")) == "ab"  # unhashable: not cached, still made safe


def test_row_label_cache_is_bounded() -> None:
    from ragpulse.scorer.store import rows

    for i in range(rows._LABEL_CACHE_MAX + 10):
        assert _label(f"label-{i}") == f"label-{i}"
    assert len(rows._label_cache) <= rows._LABEL_CACHE_MAX


def test_dedup_token_names_the_rows_identity() -> None:
    """The writer's deduplication token hashes datetimes as epoch microseconds: equal batches
    get equal tokens, and a batch differing by one microsecond in ``ts`` gets another."""
    from datetime import UTC, datetime, timedelta

    from ragpulse.scorer.store.rows import ScoredTraceMeta, columns_of, rows_from_scores
    from ragpulse.scorer.store.writer import ScoreWriter, _epoch_us

    ts = datetime(2026, 11, 22, 4, 30, 1, 123456, tzinfo=UTC)
    at = datetime(2026, 11, 22, 4, 31, tzinfo=UTC)
    scores = [Score(metric="faithfulness", value=0.5), Score(metric="answer_relevancy", value=1.0)]

    def columns(t: datetime) -> list[list[Any]]:
        meta = ScoredTraceMeta(trace_id="ab" * 16, ts=t, service="svc")
        return columns_of(rows_from_scores(scores, meta, scored_at=at))

    writer = ScoreWriter(None, "rag")  # type: ignore[arg-type]  # _token never touches the client
    assert writer._token(columns(ts)) == writer._token(columns(ts))
    assert writer._token(columns(ts)) != writer._token(columns(ts + timedelta(microseconds=1)))
    assert _epoch_us(ts) == round(ts.timestamp() * 1_000_000)
    naive = datetime(2026, 1, 1)
    assert _epoch_us(naive) is naive and _epoch_us("x") == "x"  # hashed by repr as before


SAMPLE_KW: list[dict[str, Any]] = [
    {"id": "ab" * 16, "question": "q", "contexts": ("c1", "c2"), "answer": "a",
     "metadata": {"service": "svc", "conventions": ["openinference"]}},
    {"id": "t"},
    {"id": "t", "reference": "r"},
    # coercible inputs take the validating path
    {"id": 7, "question": None, "contexts": "one", "answer": None},
    {"id": "t", "contexts": ["c"]},
]


@pytest.mark.parametrize("kw", SAMPLE_KW)
def test_fast_sample_equals_validated_sample(kw: dict[str, Any]) -> None:
    fast, slow = Sample._fast(**kw), Sample(**kw)
    assert fast == slow
    assert fast.model_dump_json() == slow.model_dump_json()
    with pytest.raises(ValidationError):
        fast.id = "other"  # type: ignore[misc]


@pytest.mark.parametrize("bad", ["", "  ", None])
def test_fast_sample_refuses_what_the_constructor_refuses(bad: Any) -> None:
    with pytest.raises(ValidationError):
        Sample(id=bad)
    with pytest.raises(ValidationError):
        Sample._fast(id=bad)
