"""``max_pairs`` is checked before the ranking work (issue 38).

The local-model judge ranked every statement against every context sentence (or chunk) before
counting the pairs: a 350 KB sample of 4,000 statements against 2,600 sentences spent 18 s of
CPU (and 42 s on the issue's 374 KB sample) to end as ``input_too_large``. The fewest pairs a
sample can need is known from the statement count and the premise modes alone.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ragpulse.scorer.judges.factory import build_judge
from ragpulse.scorer.judges.nli import NliJudgeSettings, onnx_model
from ragpulse.scorer.judges.nli.onnx_model import NliModel, PairsTooMany
from ragpulse.scorer.model import Fact, Reason, Sample


class _Ranks:
    """Counts the calls of the ranking helper (it still ranks)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        real = onnx_model._top_by_share

        def counted(*args, **kw):  # type: ignore[no-untyped-def]
            self.calls += 1
            return real(*args, **kw)

        monkeypatch.setattr(onnx_model, "_top_by_share", counted)


def _big_sample() -> Sample:
    context = "".join(f"The product number {i} ships from warehouse {i % 37} within {i % 9 + 1} "
                      "days. " for i in range(2600))
    answer = " ".join(f"Product {i} ships from warehouse {i % 37} in {i % 9 + 1} days."
                      for i in range(4000))
    return Sample(id="big", question="Where do products ship from?", contexts=[context],
                  answer=answer)


def test_local_model_refuses_too_many_pairs_before_ranking(monkeypatch: pytest.MonkeyPatch) -> None:
    judge = build_judge("local-model", threads=1)
    ranks = _Ranks(monkeypatch)
    out = judge.judge(_big_sample(), frozenset({Fact.STATEMENT_SUPPORT, Fact.CONTEXT_USED}))
    assert {f.reason for f in out.values()} == {Reason.INPUT_TOO_LARGE}
    assert ranks.calls == 0  # refused before ranking (0.5 s of CPU here; 18 s before)
    # evidence premises: each statement's candidate window (one) and its best sentence view
    assert "at least 8000 pairs; max_pairs 512" in (out[Fact.STATEMENT_SUPPORT].detail or "")


def test_sentences_mode_checks_the_floor_before_ranking(tiny_dir: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    m = NliModel(NliJudgeSettings(model_dir=tiny_dir, premise="views", premise_sentences=2,
                                  premise_neighbours=1, max_pairs=5))
    ranks = _Ranks(monkeypatch)
    ctx = ["Paris is here . Tokyo is there .", "The river is long . The city is large ."]
    with pytest.raises(PairsTooMany, match="at least 6 pairs; max_pairs 5"):
        m.support_matrix(["paris", "tokyo", "river"], ctx)  # 3 statements x 2 modes
    assert ranks.calls == 0
    # within the floor the ranking runs and the late, exact check still holds
    p, pairs = m.support_matrix(["paris", "tokyo"], ctx)
    assert ranks.calls == 2 and 4 <= pairs <= 5 and p.shape == (2, 2)


def test_chunks_mode_checks_the_count_before_ranking(tiny_dir: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    m = NliModel(NliJudgeSettings(model_dir=tiny_dir, premise="chunks", candidates=1,
                                  max_pairs=2))
    ranked: list[int] = []
    real = m._candidates
    monkeypatch.setattr(m, "_candidates", lambda h, p, k: ranked.append(len(h)) or real(h, p, k))
    ctx = ["paris " * 60, "tokyo " * 60]  # several chunks each: the candidates are ranked
    with pytest.raises(PairsTooMany, match="3 statements x .* context chunks = 3 pairs"):
        m.support_matrix(["paris", "tokyo", "river"], ctx)
    assert ranked == []
    _, pairs = m.support_matrix(["paris", "tokyo"], ctx)
    assert ranked == [2] and pairs == 2
