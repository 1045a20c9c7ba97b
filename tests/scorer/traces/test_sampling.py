"""Deterministic sampling: stable across instances and versions, rates hold, rules force traces in."""

from __future__ import annotations

import math
import random

import pytest
from pydantic import ValidationError

from ragpulse.scorer.traces import (
    AttributeRule,
    Sampler,
    SamplingSettings,
    extract,
    hash_fraction,
)

from .conventions import WRITERS
from .sdk import Recorder, one_trace, to_record


def _ids(n: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    return [format(rng.getrandbits(128), "032x") for _ in range(n)]


def test_hash_is_pinned_across_versions() -> None:
    """Replicas and replays must agree: changing the hash silently re-samples history.
    The literal is blake2b(trace id hex, key=salt, 8 bytes) / 2**64, computed once."""
    assert hash_fraction("0af7651916cd43dd8448eb211c80319c", "ragpulse") == 0.3634489738235929
    assert hash_fraction("0AF7651916CD43DD8448EB211C80319C", "ragpulse") == 0.3634489738235929
    assert hash_fraction("0af7651916cd43dd8448eb211c80319c", "other") != 0.3634489738235929


def test_decisions_are_deterministic_across_instances() -> None:
    ids = _ids(2000)
    a = Sampler(SamplingSettings(default_rate=0.3))
    b = Sampler(SamplingSettings(default_rate=0.3))
    assert [a.decide_for(t, "svc").keep for t in ids] == [b.decide_for(t, "svc").keep for t in ids]


def test_salt_draws_an_independent_sample() -> None:
    ids = _ids(4000)
    a = Sampler(SamplingSettings(default_rate=0.5, salt="one"))
    b = Sampler(SamplingSettings(default_rate=0.5, salt="two"))
    agree = sum(a.decide_for(t, "s").keep == b.decide_for(t, "s").keep for t in ids) / len(ids)
    # independent draws agree with probability r^2 + (1-r)^2 = 0.5; 5 sigma band
    assert abs(agree - 0.5) < 5 * math.sqrt(0.25 / len(ids))


def test_kept_sets_are_nested_as_the_rate_grows() -> None:
    ids = _ids(3000)
    low = {t for t in ids if Sampler(SamplingSettings(default_rate=0.1)).decide_for(t, "s").keep}
    high = {t for t in ids if Sampler(SamplingSettings(default_rate=0.4)).decide_for(t, "s").keep}
    assert low < high


@pytest.mark.parametrize("rate", [0.01, 0.1, 0.5, 0.9])
def test_rate_law_of_large_numbers(rate: float) -> None:
    n = 20_000
    sampler = Sampler(SamplingSettings(default_rate=rate))
    kept = sum(sampler.decide_for(t, "svc").keep for t in _ids(n, seed=11))
    sigma = math.sqrt(rate * (1 - rate) / n)
    assert abs(kept / n - rate) < 5 * sigma, (kept / n, rate, sigma)
    assert (
        sampler.stats()["traces_sampled"] == kept
        and sampler.stats()["traces_unsampled"] == n - kept
    )


def test_rate_zero_and_one() -> None:
    ids = _ids(500)
    assert not any(Sampler(SamplingSettings(default_rate=0.0)).decide_for(t, "s").keep for t in ids)
    assert all(Sampler(SamplingSettings(default_rate=1.0)).decide_for(t, "s").keep for t in ids)


def test_service_rates_exact_then_glob_then_default() -> None:
    sampler = Sampler(
        SamplingSettings(
            default_rate=0.2, service_rates={"checkout-*": 0.5, "checkout-eu": 0.9, "x?": 0.0}
        )
    )
    assert sampler.rate_for("checkout-eu") == 0.9
    assert sampler.rate_for("checkout-us") == 0.5
    assert sampler.rate_for("xy") == 0.0
    assert sampler.rate_for("search") == 0.2
    assert sampler.rate_for(None) == 0.2
    d = sampler.decide_for(_ids(1)[0], "checkout-us")
    assert d.rate == 0.5 and d.rule is None


def test_always_score_error_and_negative_feedback_with_rate_one() -> None:
    sampler = Sampler(SamplingSettings(default_rate=0.0))
    tid = _ids(1)[0]
    assert sampler.decide_for(tid, "s").keep is False
    err = sampler.decide_for(tid, "s", error=True)
    neg = sampler.decide_for(tid, "s", negative_feedback=True)
    assert (err.keep, err.rate, err.rule) == (True, 1.0, "error")
    assert (neg.keep, neg.rate, neg.rule) == (True, 1.0, "negative_feedback")
    assert sampler.stats()["traces_forced"] == {"error": 1, "negative_feedback": 1}
    off = Sampler(
        SamplingSettings(default_rate=0.0, always_on_error=False, always_on_negative_feedback=False)
    )
    assert not off.decide_for(tid, "s", error=True, negative_feedback=True).keep


def test_attribute_rules_on_real_spans() -> None:
    rec = Recorder(service="vip-svc")
    WRITERS["openinference"](rec)
    spans = one_trace(to_record(rec.finished()))
    ex = extract(spans)

    def decide(*rules: AttributeRule):  # type: ignore[no-untyped-def]
        return Sampler(SamplingSettings(default_rate=0.0, always_rules=rules)).decide(ex, spans)

    assert (
        decide(AttributeRule(attribute="llm.model_name", equals="gpt-4o-mini")).rule
        == "llm.model_name"
    )
    assert (
        decide(AttributeRule(name="boil", attribute="input.value", matches=r"boil\w+")).rule
        == "boil"
    )
    assert decide(AttributeRule(attribute="llm.token_count.prompt", equals=120)).keep
    assert decide(
        AttributeRule(attribute="service.name", equals="vip-svc")
    ).keep  # resource attribute
    assert decide(AttributeRule(attribute="openinference.span.kind")).keep  # exists
    assert not decide(AttributeRule(attribute="llm.model_name", equals="other")).keep
    assert not decide(
        AttributeRule(attribute="llm.token_count.prompt", equals="120")
    ).keep  # types differ
    assert not decide(AttributeRule(attribute="missing.attr")).keep


def test_decide_uses_extraction_metadata() -> None:
    rec = Recorder(service="checkout")
    with rec.span("q", {"openinference.span.kind": "CHAIN", "ragpulse.feedback.score": 0.0}):
        pass
    spans = one_trace(to_record(rec.finished()))
    d = Sampler(SamplingSettings(default_rate=0.0)).decide(extract(spans), spans)
    assert (d.keep, d.rate, d.rule) == (True, 1.0, "negative_feedback")


@pytest.mark.parametrize(
    "kwargs",
    [
        {"default_rate": 1.5},
        {"default_rate": -0.1},
        {"service_rates": {"a": 2.0}},
        {"always_rules": [{"attribute": "a", "matches": "("}]},
        {"always_rules": [{"attribute": "a", "equals": "x", "matches": "x"}]},
        {"always_rules": [{"attribute": ""}]},
        {"unknown": 1},
    ],
)
def test_settings_validation(kwargs: dict) -> None:
    with pytest.raises(ValidationError):
        SamplingSettings(**kwargs)


def test_settings_are_frozen_and_load_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    from pydantic_settings import BaseSettings, SettingsConfigDict

    class Outer(BaseSettings):
        model_config = SettingsConfigDict(env_prefix="RAGPULSE_", env_nested_delimiter="__")
        sampling: SamplingSettings = SamplingSettings()

    monkeypatch.setenv("RAGPULSE_SAMPLING__DEFAULT_RATE", "0.25")
    monkeypatch.setenv("RAGPULSE_SAMPLING__SERVICE_RATES", '{"checkout-*": 0.5}')
    s = Outer().sampling
    assert s.default_rate == 0.25 and s.service_rates == {"checkout-*": 0.5}
    with pytest.raises(ValidationError):
        s.default_rate = 0.5  # type: ignore[misc]
