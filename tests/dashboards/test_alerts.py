"""Alert rules and the drift statistic on generated data: they fire on a real drop and on a slow
slide, and stay quiet on noise from few samples and on a normal daily cycle."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest

from ragpulse.dashboards.alerts import evaluate, rule_specs
from ragpulse.dashboards.frames import context, run_panel
from ragpulse.dashboards.queries import panels
from ragpulse.dashboards.settings import AlertSettings, DashboardsSettings, DriftSettings
from ragpulse.scorer.store import init_schema

from .data import NOW, fixed_date_schema


def rule(settings: DashboardsSettings, uid: str):
    return next(r for r in rule_specs(settings) if r.uid == uid)


def firing(client: Any, settings: DashboardsSettings, uid: str, at=NOW) -> set[str]:
    res = evaluate(client, rule(settings, uid), at)
    assert res.error is None, res.error
    return {"/".join(i.labels.values()) or "pipeline" for i in res.firing}


def series(client: Any, settings: DashboardsSettings, uid: str, at=NOW) -> dict[str, float | None]:
    res = evaluate(client, rule(settings, uid), at)
    assert res.error is None, res.error
    return {"/".join(i.labels.values()): i.value for i in res.instances}


def _one_level(settings: DashboardsSettings, **alerts: Any) -> DashboardsSettings:
    """The settings with every judge under ``faithfulness_min`` (no per-judge levels)."""
    a = AlertSettings(**{**settings.alerts.model_dump(), "faithfulness_min_by_judge": {}, **alerts})
    return settings.model_copy(update={"alerts": a})


def test_faithfulness_absolute_threshold(chdb_client: Any, settings) -> None:
    # The generated rows come from the judge named "local", on an LLM-like scale (0.85).
    settings = _one_level(settings)
    assert firing(chdb_client, settings, "ragpulse-faithfulness-low") == {"drop"}
    values = series(chdb_client, settings, "ragpulse-faithfulness-low")
    # "few" has two samples at 0.2/0.3 in the window: below the threshold, but under the minimum
    # sample count, so it has no series at all (cannot fire, no NoData either).
    assert "few" not in values
    assert values["cycle"] > 0.7 and values["slide"] > 0.7
    # Before the drop the same rule is quiet.
    assert firing(chdb_client, settings, "ragpulse-faithfulness-low", NOW - timedelta(hours=3)) == set()


def test_faithfulness_relative_drop_vs_same_hours_of_previous_days(chdb_client: Any, settings) -> None:
    # Labelled service/judge: each judge against its own baseline (the rows are the fast judge's,
    # stored as "local", its old name: labelled fast, their baseline the same rows).
    assert firing(chdb_client, settings, "ragpulse-faithfulness-drop") == {"drop/fast"}
    values = series(chdb_client, settings, "ragpulse-faithfulness-drop")
    # the value is the change at its 95 % bound nearest to no change (0.85 -> 0.55: -35 %, at
    # least -17 % at that bound on these counts); drop_confidence 0 gives the plain change
    assert -0.25 < values["drop/fast"] < -0.15
    plain = series(chdb_client, _one_level(settings, drop_confidence=0.0),
                   "ragpulse-faithfulness-drop")
    assert plain["drop/fast"] < -0.3
    assert "few/fast" not in values  # too few samples
    assert {key.split("/")[1] for key in values} == {"fast"}
    # A daily cycle is compared with the same hours: quiet at every hour of the day.
    for h in range(0, 24, 2):
        at = NOW - timedelta(hours=h) - timedelta(minutes=1)
        got = firing(chdb_client, settings, "ragpulse-faithfulness-drop", at)
        assert not {"cycle/fast", "steady/fast", "few/fast"} & got, (h, got)


def test_drift_fires_on_drop_and_slow_slide_and_is_quiet_otherwise(chdb_client: Any, settings) -> None:
    assert firing(chdb_client, settings, "ragpulse-drift") == {"faithfulness/drop",
                                                               "faithfulness/slide"}
    # The slide is caught by nothing else: neither fixed nor relative thresholds fire for it.
    assert "slide" not in firing(chdb_client, settings, "ragpulse-faithfulness-low")
    assert "slide/fast" not in firing(chdb_client, settings, "ragpulse-faithfulness-drop")
    # Over the last day, every 2 hours: steady, the daily cycle and the sparse noisy service never fire.
    for h in range(0, 24, 2):
        got = firing(chdb_client, settings, "ragpulse-drift", NOW - timedelta(hours=h))
        assert not {"faithfulness/steady", "faithfulness/cycle", "faithfulness/few"} & got, (h, got)


def test_drift_needs_the_slide_to_accumulate(chdb_client: Any, settings) -> None:
    """Early in the generated history the slide has not yet moved far from its baseline."""
    early = NOW - timedelta(days=6)
    strict = settings.model_copy(update={"drift": DriftSettings(baseline_days=1)})
    assert "faithfulness/slide" not in firing(chdb_client, strict, "ragpulse-drift", early)


def test_drift_panel_series(chdb_client: Any, settings) -> None:
    panel = next(p for p in panels(settings) if p.key == "drift")
    frame = run_panel(chdb_client, panel, context(NOW - timedelta(hours=24), NOW))
    z = {s.labels[0]: [v for _, v in s.points] for s in frame.series}
    zc = settings.drift.z_critical
    assert z["faithfulness / slide"][-1] < zc and z["faithfulness / drop"][-1] < zc
    assert min(z["faithfulness / steady"]) > zc and min(z["faithfulness / cycle"]) > zc
    assert "faithfulness / few" not in z  # never enough samples in a 6 h window


def test_null_rate(chdb_client: Any, settings) -> None:
    assert firing(chdb_client, settings, "ragpulse-null-rate") == {"steady/answer_relevancy"}
    assert firing(chdb_client, settings, "ragpulse-null-rate", NOW - timedelta(hours=2)) == set()


def test_pipeline_stalled(chdb_client: Any, settings) -> None:
    assert firing(chdb_client, settings, "ragpulse-pipeline-stalled") == set()
    assert firing(chdb_client, settings, "ragpulse-pipeline-stalled",
                  NOW + timedelta(minutes=30)) == {"pipeline"}


def test_pipeline_stalled_on_an_empty_database(chdb_client: Any) -> None:
    name = f"rag_empty_{uuid.uuid4().hex[:8]}"
    init_schema(chdb_client, fixed_date_schema(name))
    try:
        assert firing(chdb_client, DashboardsSettings(database=name),
                      "ragpulse-pipeline-stalled") == {"pipeline"}
        # Quality rules need samples: nothing to say, nothing fires.
        for uid in ("ragpulse-faithfulness-low", "ragpulse-faithfulness-drop", "ragpulse-drift",
                    "ragpulse-null-rate", "ragpulse-judge-budget", "ragpulse-lag-growing"):
            assert firing(chdb_client, DashboardsSettings(database=name), uid) == set(), uid
    finally:
        chdb_client.command(f"DROP DATABASE IF EXISTS `{name}` SYNC")


def test_lag_growing(chdb_client: Any, settings) -> None:
    assert firing(chdb_client, settings, "ragpulse-lag-growing") == {"pipeline"}
    assert firing(chdb_client, settings, "ragpulse-lag-growing", NOW - timedelta(minutes=30)) == set()


def test_judge_budget_exhausted(chdb_client: Any, settings) -> None:
    assert firing(chdb_client, settings, "ragpulse-judge-budget") == {"steady"}
    assert firing(chdb_client, settings, "ragpulse-judge-budget", NOW - timedelta(hours=2)) == set()


def test_thresholds_are_settings(chdb_client: Any, settings) -> None:
    from ragpulse.dashboards.settings import AlertSettings

    lax = settings.model_copy(update={"alerts": AlertSettings(faithfulness_min=0.5,
                                                              faithfulness_min_by_judge={})})
    assert firing(chdb_client, lax, "ragpulse-faithfulness-low") == set()
    strict = settings.model_copy(update={"alerts": AlertSettings(faithfulness_min=0.75,
                                                                 faithfulness_min_by_judge={})})
    assert firing(chdb_client, strict, "ragpulse-faithfulness-low") == {"drop", "slide"}


def test_settings_validation() -> None:
    from pydantic import ValidationError

    from ragpulse.dashboards.settings import AlertSettings

    with pytest.raises(ValidationError):
        AlertSettings(faithfulness_min=1.5)
    with pytest.raises(ValidationError):
        AlertSettings(pending_for="five minutes")
    with pytest.raises(ValidationError):
        DashboardsSettings(trace_url_template="http://jaeger/trace/")
    with pytest.raises(ValidationError):
        DashboardsSettings(folder_uid="has spaces")
    with pytest.raises(ValidationError):
        DriftSettings(segment_by=("service", "service"))
    with pytest.raises(ValidationError):
        DashboardsSettings(metrics=("answer_relevancy",))  # the faithfulness rules need it
    s = DashboardsSettings()
    with pytest.raises(ValidationError):
        s.alerts.faithfulness_min = 0.1  # frozen


def test_drift_segments_by_several_dimensions(chdb_client: Any, settings) -> None:
    s = settings.model_copy(update={"drift": DriftSettings(segment_by=("service", "environment"),
                                                           min_samples=20)})
    res = evaluate(chdb_client, rule(s, "ragpulse-drift"), NOW)
    assert res.error is None, res.error
    labels = {tuple(i.labels.values()) for i in res.instances}
    assert ("faithfulness", "slide", "prod") in labels and ("faithfulness", "drop", "prod") in labels
    assert {tuple(i.labels.values()) for i in res.firing} >= {("faithfulness", "drop", "prod")}
    assert not any(i.labels["service"] in ("steady", "cycle", "few") for i in res.firing)
    panel = next(p for p in panels(s) if p.key == "drift")
    frame = run_panel(chdb_client, panel, context(NOW - timedelta(hours=6), NOW))
    assert frame.error is None and "faithfulness / drop / prod" in {x.labels[0] for x in frame.series}


def test_drift_statistic_itself_discounts_few_noisy_samples(chdb_client: Any, settings) -> None:
    """With the sample gate lowered to 5, the sparse service is evaluated, and its two low
    scores in the last hour still do not make a significant decrease: the standard error does it."""
    s = settings.model_copy(update={"drift": DriftSettings(min_samples=5)})
    values = series(chdb_client, s, "ragpulse-drift")
    assert "faithfulness/few" in values
    assert "faithfulness/few" not in firing(chdb_client, s, "ragpulse-drift")
    assert firing(chdb_client, s, "ragpulse-drift") == {"faithfulness/drop", "faithfulness/slide"}
    # Not the effect-size floor: the raw z itself stays above the critical value.
    panel = next(p for p in panels(s) if p.key == "drift")
    frame = run_panel(chdb_client, panel, context(NOW - timedelta(hours=6), NOW))
    z_few = next(x for x in frame.series if x.labels == ("faithfulness / few",)).points
    assert all(z > s.drift.z_critical for _, z in z_few), z_few
