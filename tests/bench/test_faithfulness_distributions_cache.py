"""The score cache of bench/faithfulness_distributions.py is keyed by what decides the scores:
for ``model`` its weights and its default nli settings (a premise change rescores); ``--judge``
takes the registry's names and its old ones."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_model_fingerprint_follows_its_premise_defaults(monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    from bench import faithfulness_distributions as fd
    from ragpulse.scorer.judges import factory

    before = fd.judge_version("model")
    assert before == fd.judge_version("model")  # deterministic
    real = factory._local_model_settings

    def chunks(nli):
        return real(nli).model_copy(update={"premise": "chunks"})

    monkeypatch.setattr(factory, "_local_model_settings", chunks)
    assert fd.judge_version("model") != before
    # resources do not decide scores: the fingerprint ignores them
    monkeypatch.setattr(factory, "_local_model_settings",
                        lambda nli: real(nli).model_copy(update={"workers": 5, "threads": 3}))
    assert fd.judge_version("model") == before


def test_judge_option_takes_new_and_old_names(caplog: pytest.LogCaptureFixture,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """``--judge local local-model`` (the command of the tables written before the rename) runs
    ``fast`` and ``model``, with the registry's warning; a judge this bench does not measure is
    refused before anything is scored, and the cache files carry the new names."""
    import argparse

    from bench import faithfulness_distributions as fd
    from bench.judges import add_judge_option

    ap = argparse.ArgumentParser()
    add_judge_option(ap, *fd.JUDGES, nargs="+", default=list(fd.JUDGES))
    with caplog.at_level("WARNING"):
        assert ap.parse_args(["--judge", "local", "local-model"]).judge == ["fast", "model"]
    assert "is now called 'fast'" in caplog.text and "is now called 'model'" in caplog.text
    assert ap.parse_args([]).judge == ["fast", "model"]
    for bad in ("nli", "llm", "nosuch"):
        with pytest.raises(SystemExit):
            fd.main(["--judge", bad, "--cache", "/nonexistent"])
        assert "--judge" in capsys.readouterr().err
