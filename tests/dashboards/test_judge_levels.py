"""Per-judge absolute faithfulness levels: one rule per judge with its own level (a warning, the
secondary guard), the generic rule for the others, and the baseline-relative drop first and
critical (the primary faithfulness alert)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from ragpulse.dashboards.alerts import evaluate, rule_specs
from ragpulse.dashboards.levels import FAITHFULNESS_LEVELS
from ragpulse.dashboards.settings import AlertSettings, DashboardsSettings

from .data import NOW


def _rules(settings: DashboardsSettings) -> dict[str, Any]:
    return {r.uid: r for r in rule_specs(settings)}


def test_default_rules_order_and_severity() -> None:
    s = DashboardsSettings()
    uids = [r.uid for r in rule_specs(s)]
    faith = [u for u in uids if u.startswith("ragpulse-faithfulness")]
    assert faith == ["ragpulse-faithfulness-drop", "ragpulse-faithfulness-low",
                     *(f"ragpulse-faithfulness-low-{j}" for j in sorted(FAITHFULNESS_LEVELS))]
    rules = _rules(s)
    assert rules["ragpulse-faithfulness-drop"].severity == "critical"
    assert rules["ragpulse-faithfulness-low"].severity == "critical"
    assert rules["ragpulse-faithfulness-low"].threshold == s.alerts.faithfulness_min
    # rows stored under an old name (local) count as the judge's new one (fast); a user's own
    # nli model is not among the judges with a level: it never inherits the bundled model's
    judge = "multiIf(judge = 'local', 'fast', judge)"
    assert f"{judge} NOT IN ('fast', 'model')" in rules["ragpulse-faithfulness-low"].sql
    assert "nli" not in FAITHFULNESS_LEVELS and "llm" not in FAITHFULNESS_LEVELS
    for name, level in FAITHFULNESS_LEVELS.items():
        r = rules[f"ragpulse-faithfulness-low-{name}"]
        assert (r.severity, r.threshold) == ("warning", level)
        assert f"{judge} = '{name}'" in r.sql and f"({name} judge)" in r.title
    # without per-judge levels, one rule covers every judge, as before
    one = _rules(DashboardsSettings(alerts=AlertSettings(faithfulness_min_by_judge={})))
    assert [u for u in one if u.startswith("ragpulse-faithfulness-low")] == ["ragpulse-faithfulness-low"]
    assert "judge" not in one["ragpulse-faithfulness-low"].sql


def test_each_judge_is_held_to_its_own_level(chdb_client: Any, settings) -> None:
    """The generated rows are the fast judge's, stored under its old name (local): the generic
    rule never sees them, the fast rule does, at its level (the drop service sits at 0.55 in the
    last hours); a level given under the old name applies to the judge."""
    def run(s: DashboardsSettings, uid: str) -> dict[str, float | None]:
        res = evaluate(chdb_client, _rules(s)[uid], NOW)
        assert res.error is None, res.error
        return {i.labels["service"]: i.value for i in res.instances if i.firing} | {
            "_seen": len(res.instances)}

    default = settings.model_copy(update={"alerts": AlertSettings(null_rate_min_rows=10)})
    assert run(default, "ragpulse-faithfulness-low") == {"_seen": 0}
    low_local = run(default, "ragpulse-faithfulness-low-fast")
    assert low_local["_seen"] >= 4 and set(low_local) == {"_seen"}  # 0.55 > the local level
    strict = settings.model_copy(update={"alerts": AlertSettings(
        null_rate_min_rows=10, faithfulness_min_by_judge={"local": 0.6})})
    fired = run(strict, "ragpulse-faithfulness-low-fast")
    assert set(fired) == {"_seen", "drop"} and fired["drop"] < 0.6
    assert "ragpulse-faithfulness-low-nli" not in _rules(strict)
    assert "ragpulse-faithfulness-low-local" not in _rules(strict)
    assert run(strict, "ragpulse-faithfulness-low") == {"_seen": 0}


def test_level_validation() -> None:
    with pytest.raises(ValidationError, match="unknown judge"):
        AlertSettings(faithfulness_min_by_judge={"bogus": 0.4})
    # old names are the judges they stand for
    assert AlertSettings(faithfulness_min_by_judge={"local-model": 0.4}
                         ).faithfulness_min_by_judge == {"model": 0.4}
    with pytest.raises(ValidationError, match="must be in"):
        AlertSettings(faithfulness_min_by_judge={"local": 1.2})
    assert AlertSettings().faithfulness_min_by_judge == FAITHFULNESS_LEVELS
    assert all(0 < v < 1 for v in FAITHFULNESS_LEVELS.values())


def test_switching_judges_is_not_a_drop(chdb_client: Any) -> None:
    """The drop rule compares each judge with its own baseline: a week of the LLM judge at 0.85
    followed by an hour of the local judge at 0.45 (another scale, not a regression) fires
    nothing, while the same hour from the LLM judge itself does fire."""
    import random
    import uuid
    from datetime import timedelta

    from ragpulse.scorer import Score
    from ragpulse.scorer.store import ScoredTraceMeta, init_schema, rows_from_scores

    from .data import fixed_date_schema, write_score_rows

    rng = random.Random(3)
    database = f"switch_{uuid.uuid4().hex[:8]}"
    init_schema(chdb_client, fixed_date_schema(database))
    rows: list = []
    n = 0
    for h in range(1, 8 * 24):  # hours before NOW
        for k in range(20):
            n += 1
            t = NOW - timedelta(hours=h - 1, seconds=(k + rng.random()) * 3600 / 20)
            recent = h == 1
            service_judges = [("a", "switched", "local" if recent else "llm", 0.45 if recent else 0.85),
                              ("b", "regressed", "llm", 0.45 if recent else 0.85)]
            for id_prefix, service, judge, mean in service_judges:
                value = min(1.0, max(0.0, rng.gauss(mean, 0.05)))
                meta = ScoredTraceMeta(trace_id=f"{id_prefix}{n:031x}", ts=t, service=service,
                                       sampling_rate=1.0)
                rows += rows_from_scores([Score(metric="faithfulness", value=value, judge=judge)],
                                         meta, scored_at=t + timedelta(seconds=1))
    write_score_rows(chdb_client, database, rows)
    try:
        settings = DashboardsSettings(database=database)
        drop = _rules(settings)["ragpulse-faithfulness-drop"]
        result = evaluate(chdb_client, drop, NOW)
        assert result.error is None, result.error
        assert {(i.labels["service"], i.labels["judge"]) for i in result.firing} == {("regressed", "llm")}
        # the local judge has no baseline yet, so it has no series at all (no NoData either)
        assert not [i for i in result.instances if i.labels["judge"] == "local"]
    finally:
        chdb_client.command(f"DROP DATABASE IF EXISTS `{database}` SYNC")
