"""Faithfulness as the expected share of supported statements (``metrics.EXPECTED_SHARE``).

The metric tests use a real Judge implementation that returns fixed findings with ``extra``;
the local-judge tests run the real detector and USE model (fixtures in ``conftest.py``).
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from pydantic import ValidationError

from ragpulse.scorer import Evaluator, Fact, Sample
from ragpulse.scorer.judges.base import Needs
from ragpulse.scorer.judges.local import LocalJudge, LocalJudgeSettings
from ragpulse.scorer.metrics import EXPECTED_SHARE
from ragpulse.scorer.model import Finding, Score
from ragpulse.scorer.stats import wilson_interval

SAMPLE = Sample(id="s1", question="Q?", contexts=("c1",), answer="A.")


class SupportJudge:
    """Answers STATEMENTS and STATEMENT_SUPPORT with fixed verdicts and ``extra``."""

    name = "support-table"
    model = "table-v1"

    def __init__(self, verdicts: list[int], extra: dict[str, Any]) -> None:
        self.verdicts, self.extra = verdicts, extra

    async def gather(self, sample: Sample, needs: Needs) -> dict[Fact, Finding]:
        statements = [f"s{i}" for i in range(len(self.verdicts))]
        out = {Fact.STATEMENTS: Finding(Fact.STATEMENTS, statements, prompt_version="t@1"),
               Fact.STATEMENT_SUPPORT: Finding(Fact.STATEMENT_SUPPORT, self.verdicts,
                                               prompt_version="t@1", extra=self.extra)}
        return {f: out[f] for f in needs.facts}

    async def aclose(self) -> None:
        return None


async def faithfulness(verdicts: list[int], extra: dict[str, Any]) -> Score:
    (s,) = (await Evaluator(SupportJudge(verdicts, extra), ["faithfulness"]).evaluate(SAMPLE)).scores
    return s


async def test_value_is_mean_probability_counts_stay_verdicts() -> None:
    probs = [0.95, 0.4, 0.8, 0.1, 0.75]
    s = await faithfulness([1, 0, 1, 0, 1], {EXPECTED_SHARE: True, "probabilities": probs})
    assert s.status == "ok"
    assert s.value == pytest.approx(3.0 / 5)  # 0.95 + 0.4 + 0.8 + 0.1 + 0.75 = 3.0
    assert s.counts == {"statements": 5, "supported": 3}
    expected = wilson_interval(3.0, 5)
    assert s.interval is not None and expected is not None
    assert (s.interval.low, s.interval.high) == pytest.approx((expected.low, expected.high))
    assert s.explanation and "expected share" in s.explanation


async def test_value_differs_from_verdict_share_when_probabilities_say_so() -> None:
    # Two statements just above the threshold and one far below: 2/3 of verdicts, but the
    # expected share is lower. The interval is centred on the value it reports.
    s = await faithfulness([1, 1, 0], {EXPECTED_SHARE: True, "probabilities": [0.71, 0.72, 0.05]})
    assert s.value == pytest.approx(1.48 / 3)
    assert s.counts == {"statements": 3, "supported": 2}
    assert s.interval is not None and s.interval.low < s.value < s.interval.high


async def test_binary_probabilities_reproduce_the_seed_example() -> None:
    # Verdicts are the special case P in {0, 1}: seed 001's 3 of 5 is still exactly 0.6.
    s = await faithfulness([1, 0, 1, 0, 1], {EXPECTED_SHARE: True,
                                             "probabilities": [1, 0, 1, 0, 1]})
    assert s.value == pytest.approx(0.6)
    assert s.counts == {"statements": 5, "supported": 3}


async def test_probabilities_without_the_flag_are_ignored() -> None:
    s = await faithfulness([1, 0, 1, 0, 1], {"probabilities": [0.2, 0.2, 0.2, 0.2, 0.2]})
    assert s.value == pytest.approx(0.6)


@pytest.mark.parametrize("probs", [
    [0.9, 0.1],                    # one missing
    [0.9, 0.1, 1.2],               # out of range
    [0.9, 0.1, math.nan],          # NaN
    [0.9, 0.1, "0.5"],             # not a number
    [0.9, 0.1, True],              # a bool is not a probability
    None,                          # flag without probabilities
], ids=["short", "range", "nan", "str", "bool", "none"])
async def test_flag_with_unusable_probabilities_is_an_error_not_a_value(probs: Any) -> None:
    s = await faithfulness([1, 0, 1], {EXPECTED_SHARE: True, "probabilities": probs})
    assert s.value is None and s.status == "error" and s.reason == "verdicts_mismatch"


# ------------------------------------------------------------------ the local judge


EN = Sample(
    id="en", question="When was the Eiffel Tower completed?",
    contexts=(("The Eiffel Tower is a wrought-iron lattice tower in Paris. It was completed "
               "in 1889 for the World's Fair."),),
    answer="The Eiffel Tower is a wrought-iron lattice tower in Paris. "
           "It was moved to Berlin in 1999.",
)


async def _faithfulness_and_support(judge: LocalJudge) -> tuple[Score, Finding]:
    (s,) = (await Evaluator(judge, ["faithfulness"]).evaluate(EN)).scores
    f = await judge.gather(EN, Needs(frozenset({Fact.STATEMENT_SUPPORT})))
    return s, f[Fact.STATEMENT_SUPPORT]


async def test_local_judge_reports_the_expected_share(local_judge: LocalJudge) -> None:
    s, support = await _faithfulness_and_support(local_judge)
    probs = support.extra["probabilities"]
    assert support.extra[EXPECTED_SHARE] is True
    assert len(probs) == 2 and probs[0] > local_judge.detector().threshold > probs[1]
    assert s.value == pytest.approx(sum(probs) / 2)
    assert s.counts == {"statements": 2, "supported": sum(support.value)} == {
        "statements": 2, "supported": 1}
    assert s.prompt_version and "/expected" in s.prompt_version


async def test_local_judge_verdict_share_setting(use_embedder, support_detector) -> None:
    judge = LocalJudge(LocalJudgeSettings(faithfulness_value="verdicts"), embedder=use_embedder,
                       detector=support_detector)
    try:
        s, support = await _faithfulness_and_support(judge)
    finally:
        await judge.aclose()
    assert EXPECTED_SHARE not in support.extra
    assert s.value == pytest.approx(0.5) and s.counts == {"statements": 2, "supported": 1}
    assert s.prompt_version and "/expected" not in s.prompt_version


def test_faithfulness_value_setting_is_validated() -> None:
    with pytest.raises(ValidationError):
        LocalJudgeSettings(faithfulness_value="mean")  # type: ignore[arg-type]
