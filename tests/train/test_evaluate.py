"""train.evaluate: its HaluEval length control (pure: no model) and its judge option."""

from __future__ import annotations

import pytest

from train.evaluate import length_matched


def test_length_matched_counts_every_equal_length_pair_without_choosing_by_score():
    # length 1: 3 right answers (0.9, 0.8, 0.1), 1 hallucinated (0.5); length 5: 1 right (0.7),
    # 2 hallucinated (0.2, 0.95). An earlier version kept, per length, the lowest-scored right
    # and the highest-scored hallucinated answers (0.1 vs 0.5 and 0.7 vs 0.95: AUROC 0.25).
    v = [0.9, 0.8, 0.1, 0.5, 0.7, 0.2, 0.95, 0.3]
    y = [1, 1, 1, 0, 1, 0, 0, 1]
    lens = [1, 1, 1, 1, 5, 5, 5, 9]  # length 9 has no hallucinated answer: not counted
    a, pairs = length_matched(v, y, lens)
    assert pairs == 3 * 1 + 1 * 2
    assert a == pytest.approx((2 + 1) / 5)  # wins: 0.9>0.5, 0.8>0.5, 0.7>0.2
    assert length_matched([0.5, 0.5], [1, 0], [2, 2]) == (0.5, 1)
    assert length_matched([0.5, 0.5], [1, 0], [2, 3])[1] == 0


def test_judge_option_reads_the_registry_and_its_old_names(
        caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]) -> None:
    """``--judge local-model`` / ``local`` (the commands in train/README.md's history and in
    docs/history) still run, as ``model`` / ``fast`` with the registry's warning; the default is
    the default judge; a judge this command cannot run here is refused when parsed."""
    from train.evaluate import parser

    assert parser().parse_args([]).judge == "model"
    with caplog.at_level("WARNING"):
        assert parser().parse_args(["--judge", "local-model"]).judge == "model"
        assert parser().parse_args(["--judge", "local"]).judge == "fast"
    assert "'local' is now called 'fast'" in caplog.text
    assert parser().parse_args(["--judge", "nli", "--model-dir", "M"]).judge == "nli"
    with pytest.raises(SystemExit):
        parser().parse_args(["--judge", "llm"])
    assert "this command runs model, fast, nli" in capsys.readouterr().err


def test_canonical_values_flag_reaches_the_model_judges_settings(monkeypatch) -> None:
    import argparse

    from ragpulse.scorer.judges import factory
    from train import evaluate

    seen = {}
    monkeypatch.setattr(factory, "build_judge", lambda name, **kw: seen.update(kw, name=name))

    def args(*flags: str) -> argparse.Namespace:
        return evaluate.parser().parse_args(["--judge", "model", *flags])

    evaluate.build_judge(args("--canonical-values"))
    assert seen["name"] == "model" and seen["nli"].canonical_values is True
    evaluate.build_judge(args())
    assert seen["nli"] is None  # nothing given: the judge's own settings, values off
    evaluate.build_judge(args("--candidates", "2", "--evidence-cut", "0.9"))
    assert seen["nli"].candidates == 2 and seen["nli"].evidence_cut == 0.9
    assert seen["nli"].model_fields_set == {"candidates", "evidence_cut"}
