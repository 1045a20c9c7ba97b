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
    assert default_sampling_rate("model", 1000.0) == 0.05  # never 0: something is judged
    assert default_sampling_rate("local-model", 1000.0) == 0.05  # an old name is its judge


def test_up_applies_the_judge_default(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("RAGPULSE_SAMPLING__DEFAULT_RATE", raising=False)
    for judge in ("fast", "model", "llm", "local", "local-model"):
        assert _rate(tmp_path, judge=judge) == default_sampling_rate(judge), judge
    # the demo's traffic rate is known: the default is sized for it
    assert _rate(tmp_path, demo=True, demo_rate=1.0) == default_sampling_rate("model", 1.0) == 1.0
    assert _rate(tmp_path, judge="model", demo=True, demo_rate=20.0) == \
        default_sampling_rate("model", 20.0) < default_sampling_rate("model")


def test_flag_and_environment_win(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("RAGPULSE_SAMPLING__DEFAULT_RATE", raising=False)
    assert _rate(tmp_path, judge="model", sampling_rate=0.3) == 0.3
    monkeypatch.setenv("RAGPULSE_SAMPLING__DEFAULT_RATE", "0.25")
    assert _rate(tmp_path, judge="model") == 0.25


def test_the_banner_says_the_sampling_rate_and_where_it_comes_from(monkeypatch, tmp_path) -> None:
    """`up --demo --demo-rate 20` sampled out 40 % of the traces without saying so."""
    from types import SimpleNamespace

    from ragpulse.deploy.embedded import Embedded, EmbeddedSettings

    monkeypatch.delenv("RAGPULSE_SAMPLING__DEFAULT_RATE", raising=False)

    def line(**kw) -> str:
        e = Embedded(EmbeddedSettings(data_dir=tmp_path, **kw))
        e.broker = SimpleNamespace(bootstrap="127.0.0.1:39092")
        return e.sampling_line()

    assert line() == ("100% of traces judged, by trace id (the default for the model judge at "
                      "2 traces/s; --sampling-rate sets another)")
    fast = line(demo=True, demo_rate=20.0, judge="model")
    share = round(100 * default_sampling_rate("model", 20.0))
    assert 0 < share < 100  # the judge cannot keep up with 20 traces/s: a share of them
    assert fast.startswith(f"{share}% of traces judged") and "at 20 traces/s (--demo-rate)" in fast
    assert line(sampling_rate=0.15) == "15% of traces judged, by trace id (--sampling-rate)"
    monkeypatch.setenv("RAGPULSE_SAMPLING__DEFAULT_RATE", "0.5")
    assert line() == "50% of traces judged, by trace id (RAGPULSE_SAMPLING__DEFAULT_RATE)"
    monkeypatch.setenv("RAGPULSE_SAMPLING__SERVICE_RATES", '{"checkout-*": 0.1}')
    assert line().endswith("; per service: checkout-* 10% (RAGPULSE_SAMPLING__SERVICE_RATES)")
