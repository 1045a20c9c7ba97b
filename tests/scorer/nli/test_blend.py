"""The nli judge's blend with the lexical detector (``blend.json`` beside the model): the
arithmetic, what a bad or stale file does, and the judge's findings with the tiny model and the
real ``support-lr@5`` detector."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from ragpulse.scorer.judges.local.support_detector import SupportDetector
from ragpulse.scorer.judges.nli import Blend, BlendError, NliJudge, NliJudgeSettings
from ragpulse.scorer.judges.nli.judge import lexical_identity, model_identity
from ragpulse.scorer.model import Fact

from .test_nli_judge import SAMPLE  # one supported and one unsupported statement

FACTS = frozenset({Fact.STATEMENT_SUPPORT})


def _logit(p: float) -> float:
    return math.log(p / (1 - p))


def test_combine_is_the_logistic_blend_of_both_logits() -> None:
    b = Blend(-0.3, 0.8, 0.4, "lex", "mod")
    out = b.combine([0.9, 0.2], [0.6, 0.99])
    for got, pl, pm in zip(out, [0.9, 0.2], [0.6, 0.99], strict=True):
        z = -0.3 + 0.8 * _logit(pl) + 0.4 * _logit(pm)
        assert got == pytest.approx(1 / (1 + math.exp(-z)))
    # probabilities of exactly 0 and 1 are clipped, not a math error
    assert 0.0 < b.combine([0.0], [1.0])[0] < 1.0
    with pytest.raises(ValueError, match="2 lexical and 1 model"):
        b.combine([0.1, 0.2], [0.3])


@pytest.mark.parametrize("body, message", [
    ("{not json", "unreadable"),
    (json.dumps({"intercept": 0, "lexical": 1}), "need intercept"),
    (json.dumps({"intercept": "x", "lexical": 1, "model": 1, "lexical_version": "a",
                 "model_version": "b"}), "need intercept"),
    (json.dumps({"intercept": float("nan"), "lexical": 1, "model": 1, "lexical_version": "a",
                 "model_version": "b"}), "finite"),
])
def test_a_bad_blend_file_is_a_clear_error(tmp_path: Path, body: str, message: str) -> None:
    path = tmp_path / "blend.json"
    path.write_text(body)
    with pytest.raises(BlendError, match=message):
        Blend.load(path)


def _model_dir_with_blend(tiny_dir: Path, tmp_path: Path, blend: dict | None) -> Path:
    d = tmp_path / "model"
    shutil.copytree(tiny_dir, d)
    if blend is not None:
        (d / "blend.json").write_text(json.dumps(blend))
    return d


def _identities(model_dir: Path, use_embedder) -> tuple[str, str]:
    judge = NliJudge(NliJudgeSettings(model_dir=model_dir, blend="off"), embedder=use_embedder)
    return model_identity(judge.nli), lexical_identity(SupportDetector(embedder=use_embedder))


async def test_the_judge_blends_each_statement(tiny_dir: Path, tmp_path: Path,
                                               use_embedder) -> None:
    d = _model_dir_with_blend(tiny_dir, tmp_path, None)
    model_id, lexical_id = _identities(d, use_embedder)
    weights = {"intercept": -0.5, "lexical": 0.9, "model": 0.35,
               "lexical_version": lexical_id, "model_version": model_id}
    (d / "blend.json").write_text(json.dumps(weights))
    plain = NliJudge(NliJudgeSettings(model_dir=d, blend="off"), embedder=use_embedder)
    blended = NliJudge(NliJudgeSettings(model_dir=d), embedder=use_embedder)  # auto: file found
    try:
        base = plain.judge(SAMPLE, FACTS)[Fact.STATEMENT_SUPPORT]
        got = blended.judge(SAMPLE, FACTS)[Fact.STATEMENT_SUPPORT]
        assert blended.blend is not None and plain.blend is None
        assert got.extra["model_probabilities"] == base.extra["probabilities"]
        lexical = SupportDetector(embedder=use_embedder).predict(
            ["Paris is the capital of France.", "It is unsupported by anything."],
            list(SAMPLE.contexts))
        assert got.extra["lexical_probabilities"] == [round(p, 4) for p in lexical]
        expected = Blend(-0.5, 0.9, 0.35, lexical_id, model_id).combine(
            lexical, base.extra["probabilities"])
        assert got.extra["probabilities"] == pytest.approx(expected, abs=1e-4)
        assert got.value == [int(p >= 0.5) for p in got.extra["probabilities"]]
        # stored scores of the blend are never mixed up with the model's alone
        assert got.prompt_version != base.prompt_version
        assert "support-lr@5" in got.prompt_version and "blend(" in got.prompt_version
        # context utilization stays the model's own
        used_plain = plain.judge(SAMPLE, frozenset({Fact.CONTEXT_USED}))[Fact.CONTEXT_USED]
        used = blended.judge(SAMPLE, frozenset({Fact.CONTEXT_USED}))[Fact.CONTEXT_USED]
        assert used.value == used_plain.value and used.extra == used_plain.extra
    finally:
        await plain.aclose()
        await blended.aclose()


async def test_weights_fitted_for_another_model_are_refused(tiny_dir: Path, tmp_path: Path,
                                                            use_embedder) -> None:
    d = _model_dir_with_blend(tiny_dir, tmp_path, None)
    model_id, lexical_id = _identities(d, use_embedder)
    (d / "blend.json").write_text(json.dumps({
        "intercept": 0, "lexical": 1, "model": 1, "lexical_version": lexical_id,
        "model_version": model_id.split("#")[0] + "#000000000000"}))
    with pytest.raises(BlendError, match="refit"):
        NliJudge(NliJudgeSettings(model_dir=d), embedder=use_embedder)
    # off ignores the file
    judge = NliJudge(NliJudgeSettings(model_dir=d, blend="off"), embedder=use_embedder)
    assert judge.blend is None
    await judge.aclose()


def test_blend_on_without_a_file_is_an_error(tiny_dir: Path, use_embedder) -> None:
    with pytest.raises(BlendError, match="blend 'on' needs"):
        NliJudge(NliJudgeSettings(model_dir=tiny_dir, blend="on"), embedder=use_embedder)


async def test_blend_max_contexts_leaves_multi_passage_samples_to_the_model(
        tiny_dir: Path, tmp_path: Path, use_embedder) -> None:
    d = _model_dir_with_blend(tiny_dir, tmp_path, None)
    model_id, lexical_id = _identities(d, use_embedder)
    (d / "blend.json").write_text(json.dumps({
        "intercept": -0.5, "lexical": 0.9, "model": 0.35, "lexical_version": lexical_id,
        "model_version": model_id}))
    one = SAMPLE.model_copy(update={"contexts": [SAMPLE.contexts[0], "  ", ""]})  # blanks: 1
    several = SAMPLE.model_copy(update={"contexts": [SAMPLE.contexts[0], "Lyon is in France."]})
    plain = NliJudge(NliJudgeSettings(model_dir=d, blend="off"), embedder=use_embedder)
    capped = NliJudge(NliJudgeSettings(model_dir=d, blend_max_contexts=1), embedder=use_embedder)
    every = NliJudge(NliJudgeSettings(model_dir=d), embedder=use_embedder)
    try:
        alone = plain.judge(several, FACTS)[Fact.STATEMENT_SUPPORT]
        got = capped.judge(several, FACTS)[Fact.STATEMENT_SUPPORT]
        # two non-blank contexts > 1: the model alone, stored under the model's own version
        assert got.extra["probabilities"] == alone.extra["probabilities"]
        assert "lexical_probabilities" not in got.extra
        assert got.prompt_version == alone.prompt_version and "blend(" not in got.prompt_version
        # without the cap the same sample is blended
        assert "blend(" in every.judge(several, FACTS)[Fact.STATEMENT_SUPPORT].prompt_version
        # blank contexts do not count: one real context is blended
        blended = capped.judge(one, FACTS)[Fact.STATEMENT_SUPPORT]
        assert "blend(" in blended.prompt_version and "lexical_probabilities" in blended.extra
    finally:
        for j in (plain, capped, every):
            await j.aclose()


def test_blend_max_contexts_must_be_positive() -> None:
    with pytest.raises(ValueError):
        NliJudgeSettings(blend_max_contexts=0)
