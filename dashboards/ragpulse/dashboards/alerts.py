"""Alert rules: Grafana unified-alerting rules (provisioning file and API bodies) and a local
evaluator that runs them the way Grafana does, for ``ragpulse status`` and the tests.

Every rule is ``A`` (ClickHouse SQL, table format: string columns are labels, one numeric column
is the value, one row per alert instance) → ``B`` reduce (last, non-numbers dropped) → ``C``
threshold. Minimum sample counts live in the SQL (``HAVING``): a segment with too few samples
returns no row, so it cannot fire and, with ``noDataState: OK``, neither can an empty range.
Alert queries use no template variables (alerting has no dashboard) and no ``$__interval``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from statistics import NormalDist
from typing import Any, Literal

from ragpulse.scorer import stored_judge_sql

from .macros import QueryContext, expand
from .queries import HEALTH, drift_sql
from .settings import DashboardsSettings

__all__ = ["AlertInstance", "RuleSpec", "evaluate", "evaluate_all", "grafana_rule",
           "instance_text", "rule_specs"]

Op = Literal["gt", "lt"]


@dataclass(frozen=True)
class RuleSpec:
    """One alert rule: query A (``sql``) over ``range_s``, compared with ``threshold`` by ``op``."""

    uid: str
    title: str
    sql: str
    range_s: int
    """``relativeTimeRange.from``: how far back query A looks."""
    op: Op
    threshold: float
    summary: str
    severity: str = "warning"
    no_data: str = "OK"
    pending_for: str | None = None
    detail: str = "{value:.3g}"
    """How ``status`` and ``report`` say an instance's value, with its unit: a format string of
    ``value`` and ``duration`` (the value as minutes, said in minutes, hours or days)."""


@dataclass(frozen=True)
class AlertInstance:
    """One row of a rule's query after reduce and threshold."""

    rule: str
    labels: dict[str, str]
    value: float | None
    firing: bool


@dataclass
class RuleResult:
    """One rule evaluated: its instances, or the query's ``error``."""

    rule: RuleSpec
    instances: list[AlertInstance] = field(default_factory=list)
    error: str | None = None

    @property
    def firing(self) -> list[AlertInstance]:
        """The instances over (or under) the threshold."""
        return [i for i in self.instances if i.firing]


def _q(v: str) -> str:
    return "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _faithfulness_low(settings: DashboardsSettings) -> list[RuleSpec]:
    """The absolute faithfulness rules: ``ragpulse-faithfulness-low`` at ``faithfulness_min`` for
    the judges without a level of their own (critical: the LLM judge's scale is absolute), then
    ``ragpulse-faithfulness-low-<judge>`` at each ``faithfulness_min_by_judge`` level (warning: a
    secondary guard for the local judges, whose primary alert is the baseline-relative drop)."""
    a, db = settings.alerts, settings.database
    own = tuple(sorted(a.faithfulness_min_by_judge))
    judge = stored_judge_sql()  # rows stored under a judge's old name count as it
    rules = [(None, a.faithfulness_min, "critical",
              f" AND {judge} NOT IN ({', '.join(map(_q, own))})" if own else "")]
    rules += [(j, a.faithfulness_min_by_judge[j], "warning", f" AND {judge} = {_q(j)}")
              for j in own]
    return [RuleSpec(
        uid="ragpulse-faithfulness-low" + (f"-{judge}" if judge else ""),
        title=f"Faithfulness below {level}" + (f" ({judge} judge)" if judge else ""),
        range_s=a.faithfulness_window_s, op="lt", threshold=level,
        summary=(f"{{{{ $labels.service }}}}: mean {a.faithfulness_metric}"
                 + (f" ({judge} judge)" if judge else "") + " over "
                 f"{a.faithfulness_window_s // 60} min is {{{{ printf `%.3g` $values.B.Value }}}} "
                 f"(< {level}, at least {a.faithfulness_min_samples} samples)"),
        severity=severity,
        detail=f"mean {{value:.3f}} over {a.faithfulness_window_s // 60} min (level {level:g})",
        sql=f"""SELECT service, sum(weighted_value_sum) / sum(weight_sum) AS value
FROM `{db}`.`scores_1m`
WHERE $__timeFilter(minute) AND metric = {_q(a.faithfulness_metric)}{where}
GROUP BY service
HAVING sum(n_ok) >= {a.faithfulness_min_samples} AND sum(weight_sum) > 0
ORDER BY service""") for judge, level, severity, where in rules]


def rule_specs(settings: DashboardsSettings) -> list[RuleSpec]:
    """The rules, from the settings. Pure. The faithfulness drop against the baseline comes
    first: it is the primary faithfulness alert (critical); the absolute levels follow.

    Long because: it is the table of the rules, each with its SQL, in one place to read.
    """
    a, db = settings.alerts, settings.database
    fm = _q(a.faithfulness_metric)
    w, day = a.drop_window_s, 86400
    z = round(NormalDist().inv_cdf(0.5 + a.drop_confidence / 2), 4)
    bound = f" at its {a.drop_confidence:.0%} bound" if z > 0 else ""
    return [
        RuleSpec(
            uid="ragpulse-faithfulness-drop",
            title=f"Faithfulness {int(a.drop_fraction * 100)}% below its baseline",
            range_s=a.baseline_days * day + w, op="lt", threshold=-a.drop_fraction,
            severity="critical",
            detail=(f"{{value:+.1%}}{bound} against the same hours of the previous "
                    f"{a.baseline_days} days"),
            summary=(f"{{{{ $labels.service }}}}: {a.faithfulness_metric} ({{{{ $labels.judge }}}} judge) over the last "
                     f"{w // 60} min changed by {{{{ humanizePercentage $values.B.Value }}}}{bound} against the same "
                     f"hours of the previous {a.baseline_days} days"),
            # Per service and judge: each judge is compared with its own baseline (their scales
            # differ), so switching judges never reads as a drop; a new judge fires only once it
            # has baseline_min_samples of its own. The value is the change at the end of its
            # interval nearest to no change (drop_confidence), so noise does not fire it.
            sql=f"""SELECT service, judge,
  least(0, r_mean - b_mean + {z!r} * sqrt(greatest(0, r_mean * (1 - r_mean)) / r_n
    + greatest(0, b_mean * (1 - b_mean)) / b_n)) / b_mean AS value
FROM (
  SELECT service, judge,
    sumIf(weighted_value_sum, recent) / sumIf(weight_sum, recent) AS r_mean,
    sumIf(n_ok, recent) AS r_n,
    sumIf(weighted_value_sum, base) / sumIf(weight_sum, base) AS b_mean,
    sumIf(n_ok, base) AS b_n
  FROM (
    SELECT service, {stored_judge_sql()} AS judge, weighted_value_sum, weight_sum, n_ok,
      toInt64(toUnixTimestamp($__toTime)) - toInt64(toUnixTimestamp(minute)) AS age,
      age > 0 AND age <= {w} AS recent,
      intDiv(age, {day}) BETWEEN 1 AND {a.baseline_days}
        AND age % {day} > 0 AND age % {day} <= {w} AS base
    FROM `{db}`.`scores_1m`
    WHERE $__timeFilter(minute) AND metric = {fm}
  )
  GROUP BY service, judge
)
WHERE r_n >= {a.drop_min_samples} AND b_n >= {a.baseline_min_samples} AND b_mean > 0
ORDER BY service, judge"""),
        *_faithfulness_low(settings),
        RuleSpec(
            uid="ragpulse-null-rate",
            title=f"Null/error score share above {a.null_rate_max}",
            range_s=a.null_rate_window_s, op="gt", threshold=a.null_rate_max,
            detail=f"{{value:.0%}} of the scores without a value over {a.null_rate_window_s // 60} min",
            summary=("{{ $labels.service }} / {{ $labels.metric }}: {{ humanizePercentage $values.B.Value }} of the "
                     "scores have no value (null or judge error)"),
            sql=f"""SELECT service, metric, (sum(n_null) + sum(n_error)) / sum(rows) AS value
FROM `{db}`.`scores_1m`
WHERE $__timeFilter(minute)
GROUP BY service, metric
HAVING sum(rows) >= {a.null_rate_min_rows}
ORDER BY service, metric"""),
        RuleSpec(
            uid="ragpulse-pipeline-stalled",
            title=f"No scores for {a.stalled_after_min} minutes",
            range_s=day, op="gt", threshold=float(a.stalled_after_min), severity="critical",
            no_data="Alerting", detail="no score for {duration}",
            summary="the last score was written {{ printf `%.3g` $values.B.Value }} minutes ago",
            # An empty day gives max(minute) = epoch, i.e. a huge value: stalled.
            sql=f"""SELECT (toInt64(toUnixTimestamp($__toTime)) - toInt64(toUnixTimestamp(max(minute))) - 60) / 60
  AS value
FROM `{db}`.`scores_1m`
WHERE $__timeFilter(minute)"""),
        RuleSpec(
            uid="ragpulse-lag-growing",
            title="Consumer lag growing",
            range_s=a.lag_window_s, op="gt", threshold=a.lag_growth_per_min,
            detail="consumer lag rising by {value:.3g} records/min",
            summary="consumer lag is {{ printf `%.3g` $values.B.Value }} records/min and rising",
            sql=f"""SELECT if(count() >= 3 AND argMax(lag, minute) >= {a.lag_min},
  60 * simpleLinearRegression(toFloat64(toUnixTimestamp(minute)), lag).1, 0) AS value
FROM (
  SELECT minute, sum(value) AS lag
  FROM `{db}`.`pipeline_health` FINAL
  WHERE $__timeFilter(minute) AND kind = 'gauge' AND name = {_q(HEALTH['lag'][0])} AND label = ''
  GROUP BY minute
)"""),
        RuleSpec(
            uid="ragpulse-judge-budget",
            title="Judge token budget exhausted",
            range_s=a.budget_window_s, op="gt", threshold=0.0,
            detail=f"scores skipped for the token budget in {a.budget_window_s // 60} min: {{value:.0f}}",
            summary="{{ $labels.service }}: {{ printf `%.3g` $values.B.Value }} scores skipped for budget_exhausted",
            sql=f"""SELECT service, toFloat64(count()) AS value
FROM `{db}`.`scores_dedup`
WHERE $__timeFilter(ts) AND reason = 'budget_exhausted'
GROUP BY service
ORDER BY service"""),
        RuleSpec(
            uid="ragpulse-drift",
            title="Quality drift (slow slide vs trailing baseline)",
            range_s=(settings.drift.baseline_days + 1) * day + settings.drift.window_hours * 3600,
            op="lt", threshold=round(settings.drift.z_critical, 4),
            detail=f"z = {{value:.2f}} (fires below {settings.drift.z_critical:.2f})",
            summary=("{{ $labels.metric }} / {{ $labels." + settings.drift.segment_by[0] + " }}: "
                     f"the last {settings.drift.window_hours} h are significantly below the same hours "
                     f"of the previous {settings.drift.baseline_days} days (z {{{{ printf `%.3g` $values.B.Value }}}})"),
            sql=drift_sql(settings, latest_only=True, metrics=settings.drift.metrics, with_filters=False)),
    ]


def grafana_rule(spec: RuleSpec, settings: DashboardsSettings) -> dict[str, Any]:
    """The rule as ``POST /api/v1/provisioning/alert-rules`` takes it (and, minus ``orgID``/
    ``folderUID``/``ruleGroup``, as a rule of a provisioning file group)."""
    return {
        "uid": spec.uid,
        "title": spec.title,
        "orgID": 1,
        "folderUID": settings.folder_uid,
        "ruleGroup": settings.alerts.group,
        "condition": "C",
        "data": [
            {"refId": "A", "datasourceUid": settings.datasource_uid,
             "relativeTimeRange": {"from": spec.range_s, "to": 0},
             "model": {"refId": "A", "datasource": {"type": "grafana-clickhouse-datasource",
                                                    "uid": settings.datasource_uid},
                       "editorType": "sql", "queryType": "table", "format": 1,
                       "rawSql": spec.sql, "intervalMs": 60000, "maxDataPoints": 43200}},
            {"refId": "B", "datasourceUid": "__expr__", "relativeTimeRange": {"from": 0, "to": 0},
             "model": {"refId": "B", "type": "reduce", "expression": "A", "reducer": "last",
                       "settings": {"mode": "dropNN"},
                       "datasource": {"type": "__expr__", "uid": "__expr__"}}},
            {"refId": "C", "datasourceUid": "__expr__", "relativeTimeRange": {"from": 0, "to": 0},
             "model": {"refId": "C", "type": "threshold", "expression": "B",
                       "conditions": [{"evaluator": {"type": spec.op, "params": [spec.threshold]}}],
                       "datasource": {"type": "__expr__", "uid": "__expr__"}}},
        ],
        "noDataState": spec.no_data,
        "execErrState": "Error",
        "for": spec.pending_for or settings.alerts.pending_for,
        "labels": {**settings.alerts.labels, "severity": spec.severity, "source": "ragpulse"},
        "annotations": {"summary": spec.summary},
        "isPaused": False,
    }


def _minutes(minutes: float) -> str:
    if minutes < 120:
        return f"{minutes:.0f} min"
    if minutes < 48 * 60:
        return f"{minutes / 60:.3g} h"
    return f"{minutes / 1440:.3g} d"


def instance_text(spec: RuleSpec, instance: AlertInstance) -> str:
    """Where an instance fires and its value with its unit, as ``status`` and ``report`` both
    say it: ``service=drop, judge=fast: -39.1% against the same hours of the previous 7 days``,
    ``whole pipeline: consumer lag rising by 49.7 records/min``. Pure."""
    where = ", ".join(f"{k}={v}" for k, v in instance.labels.items()) or "whole pipeline"
    value = instance.value
    if value is None:
        return f"{where}: no data"
    # More minutes than the rule looks back (the stalled rule on an empty day: minutes since
    # the epoch): all it knows is its whole window.
    duration = (f"more than {_minutes(spec.range_s / 60)}" if value * 60 >= spec.range_s
                else _minutes(value))
    return f"{where}: " + spec.detail.format(value=value, duration=duration)


def evaluate(client: Any, spec: RuleSpec, now: datetime) -> RuleResult:
    """Run one rule as Grafana would at ``now``: query A over ``[now - range, now]``, reduce each
    row to its number (``last``, dropping non-numbers), compare with the threshold.

    Blocks on the query. Never raises for a query failure: the result carries ``error``, as
    Grafana's ``execErrState: Error`` would. Thread-safe if the client is.
    """
    ctx = QueryContext(now - timedelta(seconds=spec.range_s), now, 60.0, {})
    result = RuleResult(spec)
    try:
        res = client.query(expand(spec.sql, ctx))
    except Exception as exc:
        result.error = f"{type(exc).__name__}: {exc}"
        return result
    names = list(res.column_names)
    for row in res.result_rows:
        labels, value = {}, None
        for name, v in zip(names, row):
            if isinstance(v, str):
                labels[name] = v
            elif isinstance(v, (int, float)) and not isinstance(v, bool):
                value = float(v)
        if value is not None and not math.isfinite(value):
            value = None  # dropNN
        firing = value is not None and (value > spec.threshold if spec.op == "gt"
                                        else value < spec.threshold)
        result.instances.append(AlertInstance(spec.uid, labels, value, firing))
    if not res.result_rows and spec.no_data == "Alerting":
        result.instances.append(AlertInstance(spec.uid, {}, None, True))
    return result


def evaluate_all(client: Any, settings: DashboardsSettings, now: datetime,
                 only: Sequence[str] | None = None) -> list[RuleResult]:
    """Every rule (or those whose uid is in ``only``) evaluated at ``now``; blocks on one query
    per rule and never raises for a failed one (see :func:`evaluate`)."""
    return [evaluate(client, r, now) for r in rule_specs(settings) if only is None or r.uid in only]
