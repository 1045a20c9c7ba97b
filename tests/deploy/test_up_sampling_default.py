"""``ragpulse up``'s default sampling rate comes from each judge's measured speed
(``ragpulse.deploy.sampling``); a rate given by flag or environment wins."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from ragpulse.deploy.embedded import Embedded, EmbeddedSettings
from ragpulse.deploy.sampling import (
    JUDGE_HEADROOM,
    JUDGE_SAMPLES_PER_S,
    REFERENCE_TRACES_PER_S,
    default_sampling_rate,
)


def _rate(tmp_path: Path, **kw) -> float:
    e = Embedded(EmbeddedSettings(data_dir=tmp_path, **kw))
    e.broker = SimpleNamespace(bootstrap="127.0.0.1:39092")
    return e.scorer_settings().sampling.default_rate


def test_the_rule() -> None:
    assert default_sampling_rate("llm") == 1.0 and default_sampling_rate("nli") == 1.0
    for judge, speed in JUDGE_SAMPLES_PER_S.items():
        assert speed > 0, judge  # a measured figure, not a placeholder
        expect = min(1.0, JUDGE_HEADROOM * speed / REFERENCE_TRACES_PER_S)
        got = default_sampling_rate(judge)
        assert expect - 0.05 < got <= expect + 1e-9 or got == 1.0 == min(1.0, expect), (judge, got)
        # a slower judge or busier traffic never gets a higher share
        assert default_sampling_rate(judge, 10 * REFERENCE_TRACES_PER_S) <= got
    assert default_sampling_rate("local-model", 1000.0) == 0.05  # never 0: something is judged


def test_up_applies_the_judge_default(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("RAGPULSE_SAMPLING__DEFAULT_RATE", raising=False)
    for judge in ("local", "local-model", "llm"):
        assert _rate(tmp_path, judge=judge) == default_sampling_rate(judge), judge
    # the demo's traffic rate is known: the default is sized for it
    assert _rate(tmp_path, judge="local-model", demo=True, demo_rate=1.0) == \
        default_sampling_rate("local-model", 1.0) == 1.0
    assert _rate(tmp_path, judge="local-model", demo=True, demo_rate=20.0) == \
        default_sampling_rate("local-model", 20.0) < default_sampling_rate("local-model")


def test_flag_and_environment_win(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("RAGPULSE_SAMPLING__DEFAULT_RATE", raising=False)
    assert _rate(tmp_path, judge="local-model", sampling_rate=0.3) == 0.3
    monkeypatch.setenv("RAGPULSE_SAMPLING__DEFAULT_RATE", "0.25")
    assert _rate(tmp_path, judge="local-model") == 0.25
