"""The ``model`` judge (once ``local-model``): the nli judge with ragpulse's bundled faithfulness model, terse
statements judged as claims about the question."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragpulse.scorer.judges.factory import build_judge
from ragpulse.scorer.model import Fact, Sample


def test_bundled_model_scores_each_statement() -> None:
    judge = build_judge("model", threads=1)
    assert judge.name == "model" and judge.model == "ragpulse/faith-e5-small@5.1"
    # the bundled blend.json was fitted for exactly this model and support-lr weights (a refit of
    # either makes the judge refuse to start until bench/blend_faithfulness.py refits the blend)
    assert judge.blend is not None and judge.settings.blend == "auto"
    # the blend for one-passage samples only; several passages get the model alone
    assert judge.settings.blend_max_contexts == 1
    assert judge.settings.terse_claims == "with-question" and judge.settings.candidates == 1
    assert judge.settings.evidence_cut == 0.7
    assert judge.settings.workers == 2 and judge.settings.threads == 1
    # evidence premises: whole passages in windows, the best sentence alone and the best two
    # packed; a statement's P is its best premise's
    assert judge.settings.premise == "evidence" and judge.settings.premise_sentences == 2
    assert judge.settings.premise_view_sentences == 1
    assert judge.settings.premise_neighbours == 0 and judge.settings.premise_tokens == 128
    ctx = ["The Basic plan includes email support only. Phone support is available on the "
           "Business plan."]
    q = "Does the Basic plan include phone support?"
    good = Sample(id="a", question=q, contexts=ctx,
                  answer="No. The Basic plan only includes email support; phone support comes "
                         "with the Business plan.")
    bad = Sample(id="b", question=q, contexts=ctx,
                 answer="Yes. The Basic plan includes email and phone support.")
    facts = frozenset({Fact.STATEMENT_SUPPORT})
    found = judge.judge(good, facts)[Fact.STATEMENT_SUPPORT]
    p_good = found.extra["probabilities"]
    bad_found = judge.judge(bad, facts)[Fact.STATEMENT_SUPPORT]
    p_bad = bad_found.extra["probabilities"]
    assert len(p_good) == 2 and len(p_bad) == 2  # one per statement
    # "Yes." is judged by the model together with the statement that follows it (the lexical
    # half of the blend reads each statement alone, as it was fitted)
    assert bad_found.extra["model_probabilities"][0] == bad_found.extra["model_probabilities"][1]
    assert all(0.0 <= p <= 1.0 for p in p_good + p_bad)
    assert len(found.extra["model_probabilities"]) == len(found.extra["lexical_probabilities"]) == 2
    assert "support-lr@5" in found.prompt_version and "blend(" in found.prompt_version
    # the version docs/judges.md shows is the one this judge stores
    from ragpulse.scorer.judges.nli.settings import settings_tag

    tag = settings_tag(judge.settings)
    assert tag.startswith("evidence#")
    assert found.prompt_version.startswith(f"nli-support@2/{tag}+support-lr@5/blend(")
    docs = (Path(__file__).resolve().parents[3] / "docs" / "judges.md").read_text()
    assert f"nli-support@2/{tag}+support-lr@5/{judge.blend.tag}/expected" in docs
    # (the wrong answer is one the model still reads as supported: "Yes." with the statement
    # after it; docs/history/judges.md, "What it misses")


def test_a_missing_bundled_model_is_a_clear_error(tmp_path) -> None:
    with pytest.raises(ValueError, match="the model judge's model directory"):
        from ragpulse.scorer.judges.nli import NliJudgeSettings

        build_judge("local-model", nli=NliJudgeSettings(model_dir=tmp_path / "none"))


def test_given_premise_settings_win() -> None:
    from ragpulse.scorer.judges.factory import _local_model_settings
    from ragpulse.scorer.judges.nli import NliJudgeSettings

    own = _local_model_settings(NliJudgeSettings(premise="chunks"))
    assert own.premise == "chunks" and own.candidates == 1
    own = _local_model_settings(NliJudgeSettings(premise="packed", premise_neighbours=1))
    assert own.premise == "packed" and own.premise_neighbours == 1
    own = _local_model_settings(NliJudgeSettings(premise_view_sentences=2))
    assert own.premise == "evidence" and own.premise_view_sentences == 2


def test_a_statement_scores_the_same_whatever_it_is_batched_with() -> None:
    """``@4``'s graph was quantized dynamically (each activation tensor scaled by its maximum
    over the padded batch), so batched pairs moved each other's P (a warranty statement scored
    0.817 alone and 0.712 in its sample's batch). ``@5`` (block8) kept per-row activations and
    batched its pairs. ``@5.1`` (gptq8) scales its attention MatMuls' activations per tensor
    again, for speed: the model finds at load that batching would move a P and runs its pairs
    one at a time, whatever ``batch_size`` says (on the CPU a padded batch saves nothing). A
    statement's P is its pair's alone, never its sample's."""
    import numpy as np

    from ragpulse.scorer.judges.nli import NliJudgeSettings
    from ragpulse.scorer.judges.nli.onnx_model import NliModel

    model = build_judge("model", threads=1).nli
    assert model.batch_invariant is False and model.effective_batch_size == 1
    ctx = ["Brevia 3 warranty. In the EU and the UK the Brevia 3 comes with a two-year warranty, "
           "extended to three years when the machine is registered within 30 days of purchase.",
           "To make a claim, contact support with the serial number printed under the drip "
           "tray and the receipt. Repairs take 10 working days."]
    sts = ["In the EU and the UK the Brevia 3 has a 2-year warranty, or 3 years if you "
           "register it within 30 days.",
           "To claim, contact support with the serial number from under the drip tray and your "
           "receipt."]
    pairs = [(c, st) for c in ctx for st in sts] + [("Nothing related at all.", "Short.")]
    alone = np.array([model.pair_probabilities([p])[0] for p in pairs])
    assert np.array_equal(model.pair_probabilities(pairs), alone)
    assert np.array_equal(model.pair_probabilities(pairs[::-1]), alone[::-1])
    # the graph itself does depend on its batch: what the probe found
    batched = model._run([pairs[0], NliModel._PROBE_OTHER])
    assert not np.allclose(batched[0], model._run([pairs[0]])[0], rtol=0.0, atol=1e-4)
    # one statement's support does not depend on the other statements of its answer, nor on
    # batch_size (a resource setting)
    full, _ = model.support_matrix(sts, ctx)
    first, _ = model.support_matrix(sts[:1], ctx)
    assert np.array_equal(full[0], first[0])
    wide = NliModel(NliJudgeSettings(**{**model.settings.model_dump(), "batch_size": 64}))
    assert wide.effective_batch_size == 1
    assert np.array_equal(wide.support_matrix(sts, ctx)[0], full)


def test_a_repeated_pair_runs_once_and_scores_as_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under ``views`` a statement's packed premise is often its best sentence alone, the same
    pair twice (6 % of the speed trace's pairs): it runs once, and every copy gets the P the
    pair has alone (issue 39, item 4: a speed-up that moves no score)."""
    import numpy as np

    model = build_judge("model", threads=1).nli
    pairs = [("Repairs take 10 working days.", "A repair takes two weeks."),
             ("The warranty lasts two years.", "The warranty lasts two years."),
             ("Repairs take 10 working days.", "A repair takes two weeks."),
             ("Repairs take 10 working days.", "A repair takes 10 working days.")]
    alone = np.array([model.pair_probabilities([p])[0] for p in pairs])
    runs: list[int] = []
    run = model._run_encoded
    monkeypatch.setattr(model, "_run_encoded", lambda batch: runs.append(len(batch)) or run(batch))
    got = model.pair_probabilities(pairs)
    assert np.allclose(got, alone, rtol=0.0, atol=1e-6)  # batched: float noise only
    assert sum(runs) == 3
    # a several-passage sample under the default premises: the same matrix as with every
    # pair run alone
    from ragpulse.scorer.judges.nli.onnx_model import NliModel

    ctx = ["Brevia 3 warranty. In the EU the Brevia 3 comes with a two-year warranty.",
           "Repairs take 10 working days. The service centre is open Monday to Friday."]
    sts = ["The Brevia 3 has a two-year warranty in the EU.", "Repairs take 10 working days."]
    matrix, _ = model.support_matrix(sts, ctx)
    each = NliModel.pair_probabilities
    monkeypatch.setattr(model, "pair_probabilities",
                        lambda ps: np.array([each(model, [p])[0] for p in ps]))
    assert np.allclose(model.support_matrix(sts, ctx)[0], matrix, rtol=0.0, atol=1e-6)
