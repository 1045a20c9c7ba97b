"""The score cache of bench/faithfulness_distributions.py is keyed by what decides the scores:
for ``local-model`` its weights and its default nli settings (a premise change rescores)."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]



def test_local_model_fingerprint_follows_its_premise_defaults(monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    from bench import faithfulness_distributions as fd
    from ragpulse.scorer.judges import factory

    before = fd.judge_version("local-model")
    assert before == fd.judge_version("local-model")  # deterministic
    real = factory._local_model_settings

    def chunks(nli):
        return real(nli).model_copy(update={"premise": "chunks"})

    monkeypatch.setattr(factory, "_local_model_settings", chunks)
    assert fd.judge_version("local-model") != before
    # resources do not decide scores: the fingerprint ignores them
    monkeypatch.setattr(factory, "_local_model_settings",
                        lambda nli: real(nli).model_copy(update={"workers": 5, "threads": 3}))
    assert fd.judge_version("local-model") == before
