"""Every panel and alert query, written once, in the plugin's SQL dialect (macros + variables).

The Grafana JSON, the alert rules, ``ragpulse report`` and ``ragpulse status`` all take their SQL
from here, so the offline report shows exactly what Grafana would, and the tests that run these
queries on chDB prove the dashboards too.

Read paths (docs/dashboards.md explains the choice):

* quality time series, counts, cost: the per-minute rollup ``scores_1m`` (cheap at any range).
  Its means are sampling-weighted (``weighted_value_sum / weight_sum``); the band is a
  conservative 95 % interval of that mean, ``m ± 1.96·sqrt(m(1-m)/n)`` (for values in [0, 1] the
  variance is at most m(1-m)), so a dip on 3 samples draws a wide band and one on 3,000 a thin one.
* distributions, worst traces, error reasons, drift: the replay-exact ``scores_dedup`` view
  (``scores FINAL``), because they need single values or variances the rollup does not keep.
* pipeline health: ``pipeline_health FINAL`` (a re-flushed minute replaces the earlier one).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ragpulse.common import self_metric
from ragpulse.common.schema import ADVICE
from ragpulse.scorer import JUDGE_NAMES, stored_judge_sql

from .settings import SEGMENT_DIMENSIONS, DashboardsSettings

__all__ = [
    "FORMAT_TABLE",
    "FORMAT_TIME_SERIES",
    "HEALTH",
    "WORST_TEXT_COLUMNS",
    "PanelSpec",
    "Section",
    "data_range_sql",
    "drift_sql",
    "judges_sql",
    "panels",
    "quality_description",
    "sections",
    "why_sql",
]

FORMAT_TIME_SERIES = 0
FORMAT_TABLE = 1

PanelKind = Literal["timeseries", "table", "histogram"]


def _declared(*names: str) -> tuple[str, ...]:
    """``names``, each a declared self-metric (``KeyError`` when one is not)."""
    return tuple(self_metric(n).name for n in names)


# pipeline_health names this package reads (written by the collector and the scorer), each
# declared in ragpulse.common.SELF_METRICS: a renamed or removed one fails at import.
HEALTH = {
    "spans": _declared("spans_received", "spans_accepted", "spans_refused", "spans_rejected",
                       "spans_consumed"),
    "traces": _declared("traces_assembled", "traces_evicted", "traces_timed_out", "traces_scored",
                        "traces_sampled_out", "traces_not_rag", "traces_expired_incomplete"),
    "lag": _declared("consumer_lag", "commit_lag"),
    "unscorable": _declared("traces_unscorable"),
    "dead_letter": _declared("records_dead_lettered"),
    "errors": _declared("dead_letter_errors", "write_errors", "commit_errors", "evaluate_errors",
                        "rows_expired"),
}


UNSCORABLE_DESCRIPTION = (
    "Traces written as null rows, by reason. "
    + " ".join(f"{reason}: {advice}." for reason, advice in ADVICE.items())
)


@dataclass(frozen=True)
class PanelSpec:
    """One panel: what it shows, its SQL (plugin macros + template variables) and format."""

    key: str
    title: str
    kind: PanelKind
    sql: str
    format: int
    unit: str = "short"
    description: str = ""
    width: int = 12
    height: int = 8
    min: float | None = None
    max: float | None = None
    band: bool = False
    """Quality panels: ``ci_low``/``ci_high`` are the band (dashed lines in Grafana, shaded in
    the report), ``samples`` bars (right axis in Grafana, a strip under the chart in the report)."""
    trace_link: bool = False
    text_columns: tuple[str, ...] = ()
    """Table columns of stored trace text, shown whole rather than cut (they are bounded when
    stored), and inspectable in Grafana."""
    thresholds: tuple[float, ...] = ()
    """Alert levels drawn as lines (the faithfulness rule's minimum, the drift rule's z)."""
    series_names: tuple[str, ...] = ()
    """The series the panel is meant to show (pipeline counters by name): the report's legend
    names those that have no data in range instead of silently dropping them."""
    totals: bool = False
    """Counts per interval: the report's legend gives each series' total over the range."""
    zero_note: str = ""
    """What the report says instead of a chart when every series is 0 throughout; ``{judges}``
    names the series' labels (the LLM-call charts of a range scored by local judges only)."""

    @property
    def bucketed(self) -> bool:
        """Whether the query groups rows by ``$__timeInterval``: each value stands for a whole
        interval (the report draws it in the interval's middle)."""
        return "$__timeInterval(" in self.sql


@dataclass(frozen=True)
class Section:
    """A titled row of panels (the dashboard's rows, the report's headings)."""

    title: str
    panels: tuple[PanelSpec, ...] = field(default_factory=tuple)


def _q(s: str) -> str:
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _in(values: tuple[str, ...]) -> str:
    return "(" + ", ".join(_q(v) for v in values) + ")"


def filters(dims: tuple[str, ...] = SEGMENT_DIMENSIONS) -> str:
    """The drill-down filter: one ``$__conditionalAll`` per template variable."""
    return "\n  AND ".join(f"$__conditionalAll({d} IN (${{{d}:singlequote}}), ${d})" for d in dims)


def data_range_sql(settings: DashboardsSettings) -> str:
    """First and last minute in ``$__timeFilter`` that has scores or pipeline counters, and how
    many rollup rows there are (0: no data; ``min``/``max`` of nothing are the epoch). The report
    zooms its time axis to this range."""
    db = settings.database
    return f"""SELECT min(t) AS first, max(t) AS last, count() AS n
FROM (
  SELECT minute AS t FROM `{db}`.`scores_1m` WHERE $__timeFilter(minute)
  UNION ALL
  SELECT minute AS t FROM `{db}`.`pipeline_health` WHERE $__timeFilter(minute)
)"""


def judges_sql(settings: DashboardsSettings) -> str:
    """The judges that scored the faithfulness metric in ``$__timeFilter`` and the selection,
    one row each (the report draws each one's alert level)."""
    metric = _q(settings.alerts.faithfulness_metric)
    return f"""SELECT {stored_judge_sql()} AS judge FROM `{settings.database}`.`scores_1m`
WHERE $__timeFilter(minute) AND metric = {metric} AND {filters()}
GROUP BY judge HAVING sum(n_ok) > 0 ORDER BY judge"""


def _and(items: list[str]) -> str:
    return ", ".join(items[:-1]) + " and " + items[-1] if len(items) > 1 else "".join(items)


def quality_description(settings: DashboardsSettings, metric: str,
                        levels: Mapping[str, float] | None = None) -> str:
    """The caption of a quality panel. On the faithfulness panel one sentence names the alert
    level the red line draws and why: ``levels`` (judge -> level) are those of the judges that
    scored the range, as the report draws them; without them (Grafana's panel) the line is the
    general level, ``alerts.faithfulness_min``, of the judges without one of their own."""
    a = settings.alerts
    text = (f"Sampling-weighted mean {metric} per service and interval, with a conservative 95% "
            "band around it and the number of scored samples as bars: a dip on 3 samples is not "
            "a dip on 3,000.")
    if metric != a.faithfulness_metric:
        return text
    rule = (f"fires when a service's {a.faithfulness_window_s // 60}-min mean is below "
            f"{{its}} with at least {a.faithfulness_min_samples} samples")
    if not levels:
        own = sorted(a.faithfulness_min_by_judge.items())
        others = ("; the " + _and([j for j, _ in own]) + f" judge{'s' if len(own) > 1 else ''} "
                  "have levels of their own (" + ", ".join(f"{j} {v:g}" for j, v in own)
                  + "), not drawn") if own else ""
        general = [j for j in JUDGE_NAMES if j not in a.faithfulness_min_by_judge]
        which = (f" (the {_and(general)} judge{'s' if len(general) > 1 else ''})"
                 if general else "")
        return (f"{text} The red line is {a.faithfulness_min:g}, the alert level of the judges "
                f"without a level of their own{which}: their rule "
                f"{rule.format(its='it')}{others}.")
    by_level: dict[float, list[str]] = {}
    for judge, level in sorted(levels.items()):
        by_level.setdefault(level, []).append(judge)
    if len(by_level) == 1:
        ((level, judges),) = by_level.items()
        who = f"the {_and(judges)} judge{'s' if len(judges) > 1 else ''}"
        return (f"{text} The red line is {level:g}, the alert level of {who}, which scored this "
                f"range: {'its' if len(judges) == 1 else 'each judge' + chr(39) + 's'} rule "
                f"{rule.format(its='it')}.")
    drawn = _and([f"{v:g} ({', '.join(js)})" for v, js in sorted(by_level.items())])
    return (f"{text} The red lines are {drawn}, the alert levels of the judges that scored this "
            f"range: each judge's rule {rule.format(its='its level')}.")


def _quality(s: DashboardsSettings, metric: str) -> PanelSpec:
    db = s.database
    sql = f"""SELECT $__timeInterval(minute) AS time, service,
  sum(weighted_value_sum) / sum(weight_sum) AS mean,
  greatest(0, mean - 1.96 * sqrt(greatest(0, mean * (1 - mean)) / sum(n_ok))) AS ci_low,
  least(1, mean + 1.96 * sqrt(greatest(0, mean * (1 - mean)) / sum(n_ok))) AS ci_high,
  sum(n_ok) AS samples
FROM `{db}`.`scores_1m`
WHERE $__timeFilter(minute) AND metric = {_q(metric)}
  AND {filters()}
GROUP BY time, service
HAVING sum(weight_sum) > 0
ORDER BY time, service"""
    return PanelSpec(
        key=f"quality_{metric}", title=f"{metric}: mean by service", kind="timeseries", sql=sql,
        format=FORMAT_TIME_SERIES, unit="percentunit", min=0, max=1, band=True,
        thresholds=((s.alerts.faithfulness_min,) if metric == s.alerts.faithfulness_metric
                    else ()),
        description=quality_description(s, metric))


def _histogram(s: DashboardsSettings, metric: str) -> PanelSpec:
    sql = f"""SELECT assumeNotNull(value) AS value
FROM `{s.database}`.`scores_dedup`
WHERE $__timeFilter(ts) AND metric = {_q(metric)} AND status = 'ok'
  AND {filters()}
ORDER BY ts DESC
LIMIT {s.histogram_row_limit}"""
    return PanelSpec(
        key=f"histogram_{metric}", title=f"{metric}: distribution", kind="histogram", sql=sql,
        format=FORMAT_TABLE, unit="none", min=0, max=1, width=8,
        description=f"Distribution of single {metric} scores (the latest "
                    f"{s.histogram_row_limit} in range).")


def drift_sql(settings: DashboardsSettings, *, latest_only: bool, metrics: tuple[str, ...] | None = None,
              with_filters: bool = True) -> str:
    """The drift statistic: per hour ``t``, metric and segment, a Welch z of the recent window's
    mean against the same hours of the previous days (see :class:`DriftSettings`).

    ``latest_only=False``: a time series (``time``, ``segment``, ``z``) for the panel.
    ``latest_only=True``: one row per metric and segment for the hour of ``$__toTime``, with the
    alert value: ``z`` when the decrease is at least ``min_effect`` and both windows have
    ``min_samples``, else 0 (the alert fires when it is below ``z_critical``).
    """
    d = settings.drift
    w, days = d.window_hours, d.baseline_days
    seg = ", ".join(d.segment_by)
    seg_label = " || ' / ' || ".join(d.segment_by)
    metric_filter = f" AND metric IN {_in(metrics)}" if metrics else ""
    dims = filters() if with_filters else "1=1"
    t_from = "toStartOfHour($__toTime)" if latest_only else "toStartOfHour($__fromTime)"
    t_to = "toStartOfHour($__toTime)"
    inner = f"""SELECT t, metric, {seg},
    sumIf(n, role = 0) AS r_n, sumIf(s, role = 0) / r_n AS r_mean,
    greatest(0, (sumIf(ss, role = 0) - r_n * r_mean * r_mean) / (r_n - 1)) AS r_var,
    sumIf(n, role = 1) AS b_n, sumIf(s, role = 1) / b_n AS b_mean,
    greatest(0, (sumIf(ss, role = 1) - b_n * b_mean * b_mean) / (b_n - 1)) AS b_var,
    (r_mean - b_mean) / sqrt(r_var / r_n + b_var / b_n + 1e-12) AS z,
    r_mean - b_mean AS delta
  FROM (
    SELECT metric, {seg}, n, s, ss,
      arrayJoin(arrayConcat(
        arrayMap(i -> (toUInt8(0), hour + toIntervalHour(i)), range({w})),
        arrayMap(k -> (toUInt8(1), hour + toIntervalHour(k % {w}) + toIntervalDay(1 + intDiv(k, {w}))),
                 range({days * w})))) AS rt,
      rt.1 AS role, rt.2 AS t
    FROM (
      SELECT toStartOfHour(ts) AS hour, metric, {seg},
        count() AS n, sum(assumeNotNull(value)) AS s, sum(assumeNotNull(value) * assumeNotNull(value)) AS ss
      FROM `{settings.database}`.`scores_dedup`
      WHERE ts >= {t_from} - toIntervalDay({days}) - toIntervalHour({w})
        AND ts < {t_to} + toIntervalHour(1)
        AND status = 'ok'{metric_filter}
        AND {dims}
      GROUP BY hour, metric, {seg}
    )
  )
  WHERE t >= {t_from} AND t <= {t_to}
  GROUP BY t, metric, {seg}
  HAVING r_n >= {d.min_samples} AND b_n >= {d.min_samples}"""
    if latest_only:
        return f"""SELECT metric, {seg},
  if(delta <= -{d.min_effect}, z, 0) AS value
FROM (
  {inner}
)
ORDER BY metric, {seg}"""
    return f"""SELECT t AS time, metric || ' / ' || {seg_label} AS segment, z
FROM (
  {inner}
)
ORDER BY time, segment"""


WHY_HALVES = ("$__fromTime",
              "toDateTime(intDiv(toUnixTimestamp($__fromTime) + toUnixTimestamp($__toTime), 2))",
              "$__toTime")
"""The panel's windows: the baseline is the first half of the time range, now the second."""


def why_sql(settings: DashboardsSettings, metric: str, baseline: tuple[str, str],
            now: tuple[str, str], *, with_filters: bool = True) -> str:
    """The drop decomposition: which segment drove the change of ``metric``'s mean from the
    ``baseline`` window ``[from, to)`` to the ``now`` window ``[from, to]`` (SQL time
    expressions: macros for the panel, literal times for ``ragpulse status --why``).

    One dimension at a time (``all`` first, then each of :data:`SEGMENT_DIMENSIONS`, then each
    key of ``segments`` present in the two windows: ``language`` and the span attributes the
    scorer stores, ``write.segment_attributes``; a row without the key is in its segment
    ``''``, as a row without a prompt version is), the
    change of the sampling-weighted mean ``M = sum_i p_i m_i`` (``p_i`` the segment's share of
    the traffic, ``m_i`` its mean) is split per segment, exactly, into

    * ``rate = (p0 + p1) / 2 * (m1 - m0)``: the segment got worse (or better);
    * ``mix = (p1 - p0) * ((m0 + m1) / 2 - (M0 + M1) / 2)``: the segment got more (or less)
      traffic, and it scores below (or above) the average;

    so the rates and mixes of one dimension add up to ``M1 - M0``. A segment absent from one
    window has no rate (its mean there is taken as the other window's): all of it is mix. The
    contribution ``rate + mix`` has the standard error ``sqrt(p1² se1² + p0² se0²)`` (each
    window's mean's, from the scores' weighted variance); ``rate`` has ``(p0 + p1) / 2 *
    sqrt(se0² + se1²)``. The row ``all`` is the overall change (rate = the change, mix 0); a
    dimension with one value in both windows (one environment) explains nothing and is left out,
    and so is every segment while either window has no scores at all (``all`` says how many).

    The ranking rule: a segment is ``ranked`` when it has at least ``why.min_samples`` scores
    in each window it has traffic in; ranked segments come first, ordered by ``bound``, the end
    of the contribution's interval nearest to no change, taken in the direction of the overall
    change (the part of the change the segment accounts for surely); then the others, by the
    same bound. ``share`` is the contribution over the overall change; ``rate_share`` and
    ``mix_share`` its two parts.

    Long because: one SQL text, read top to bottom, is what Grafana, the report and ``status``
    share; its four nested levels (rows, segments, shares, contributions) belong together."""
    w = settings.why
    (b0, b1), (n0, n1) = baseline, now
    dims = ",\n      ".join(f"('{d}', toString({d}))" for d in SEGMENT_DIMENSIONS)
    cond = filters() if with_filters else "1=1"
    where = (f"""metric = {_q(metric)} AND status = 'ok' AND value IS NOT NULL
          AND ts >= {b0} AND ts <= {n1}
          AND (ts < {b1} OR ts >= {n0})
          AND {cond}""")
    return f"""SELECT
  toUInt32(row_number() OVER (ORDER BY dimension != 'all', ranked DESC, bound DESC, dimension, segment) - 1) AS rank,
  dimension, segment,
  round(if(change = 0, 0, contribution / change), 4) AS share,
  round(if(change = 0, 0, rate / change), 4) AS rate_share,
  round(if(change = 0, 0, mix / change), 4) AS mix_share,
  round(contribution, 5) AS contribution,
  round(contribution - {w.z:.6f} * se, 5) AS ci_low,
  round(contribution + {w.z:.6f} * se, 5) AS ci_high,
  round(rate, 5) AS rate,
  round(rate - {w.z:.6f} * rate_se, 5) AS rate_low,
  round(rate + {w.z:.6f} * rate_se, 5) AS rate_high,
  round(mix, 5) AS mix,
  n0 AS n_baseline, n1 AS n_now,
  if(n0 > 0, round(m0, 4), NULL) AS mean_baseline,
  if(n1 > 0, round(m1, 4), NULL) AS mean_now,
  round(p0, 4) AS traffic_baseline, round(p1, 4) AS traffic_now,
  ranked
FROM (
  SELECT dimension, segment, n0, n1, p0, p1, m0, m1,
    mean1 - mean0 AS change,
    (p0 + p1) / 2 * (m1 - m0) AS rate,
    (p1 - p0) * ((m0 + m1) / 2 - (mean0 + mean1) / 2) AS mix,
    rate + mix AS contribution,
    sqrt(p1 * p1 * e1 + p0 * p0 * e0) AS se,
    (p0 + p1) / 2 * sqrt(e0 + e1) AS rate_se,
    if(change < 0, -1, 1) * contribution - {w.z:.6f} * se AS bound,
    toUInt8((n0 = 0 OR n0 >= {w.min_samples}) AND (n1 = 0 OR n1 >= {w.min_samples})) AS ranked
  FROM (
    SELECT dimension, segment, n0, n1,
      count() OVER (PARTITION BY dimension) AS segments,
      sum(w0) OVER (PARTITION BY dimension) AS tw0,
      sum(w1) OVER (PARTITION BY dimension) AS tw1,
      if(tw0 > 0, w0 / tw0, 0) AS p0,
      if(tw1 > 0, w1 / tw1, 0) AS p1,
      if(w0 > 0, s0 / w0, if(w1 > 0, s1 / w1, 0)) AS m0,
      if(w1 > 0, s1 / w1, m0) AS m1,
      if(n0 > 1, greatest(0, q0 / w0 - m0 * m0) / (n0 - 1), 0) AS e0,
      if(n1 > 1, greatest(0, q1 / w1 - m1 * m1) / (n1 - 1), 0) AS e1,
      if(tw0 > 0, sum(s0) OVER (PARTITION BY dimension) / tw0, 0) AS mean0,
      if(tw1 > 0, sum(s1) OVER (PARTITION BY dimension) / tw1, 0) AS mean1
    FROM (
      SELECT dv.1 AS dimension, dv.2 AS segment,
        countIf(NOT recent) AS n0, countIf(recent) AS n1,
        sumIf(w, NOT recent) AS w0, sumIf(w, recent) AS w1,
        sumIf(w * v, NOT recent) AS s0, sumIf(w * v, recent) AS s1,
        sumIf(w * v * v, NOT recent) AS q0, sumIf(w * v * v, recent) AS q1
      FROM (
        SELECT ts >= {n0} AS recent, 1 / sampling_rate AS w, assumeNotNull(value) AS v,
          arrayJoin(arrayConcat([('all', ''),
      {dims}],
            arrayMap(k -> (toString(k), segments[k]), (
              SELECT arraySort(groupUniqArrayArray(mapKeys(segments)))
              FROM `{settings.database}`.`scores_dedup`
              WHERE {where})))) AS dv
        FROM `{settings.database}`.`scores_dedup`
        WHERE {where}
      )
      GROUP BY dimension, segment
    )
  )
  WHERE dimension = 'all' OR (segments > 1 AND tw0 > 0 AND tw1 > 0)
)
ORDER BY rank
LIMIT {w.limit + 1}"""


def sections(settings: DashboardsSettings) -> tuple[Section, ...]:
    """The dashboard, section by section (each becomes a Grafana row and a report section)."""
    return (_quality_section(settings), _why_section(settings), _drift_section(settings),
            _distributions_section(settings), _judge_section(settings), _pipeline_section(settings))


def _why_section(s: DashboardsSettings) -> Section:
    metric = s.alerts.faithfulness_metric
    w = s.why
    return Section(f"What changed {metric}", (
        PanelSpec(
            key=f"why_{metric}", title=f"{metric}: which segment drove the change",
            kind="table", format=FORMAT_TABLE, width=24, height=10,
            description=(
                f"The second half of the time range against the first: the change of the mean "
                f"{metric} (in Grafana the row 'all', in the report the sentence above the "
                "table), split per segment of each dimension into rate (the "
                "segment got worse or better) and mix (it got more or less traffic, and scores "
                "below or above the average). Share: the segment's part of the change (rate and "
                f"mix shares its two parts), with the {w.confidence:.0%} interval of its "
                f"contribution. Ranked: segments with at least {w.min_samples} scores in each "
                "window they appear in, by the end of that interval nearest to no change (a "
                "segment of 3 traces never tops the list); then the others, unranked. "
                f"`ragpulse status --why {metric}` shows the same with windows of your choice."),
            sql=why_sql(s, metric, (WHY_HALVES[0], WHY_HALVES[1]),
                        (WHY_HALVES[1], WHY_HALVES[2]))),
    ))


def _quality_section(s: DashboardsSettings) -> Section:
    db, f = s.database, filters()
    return Section("Quality overview", tuple(_quality(s, m) for m in s.metrics) + (
        PanelSpec(
            key="null_rate", title="Null / error / skipped share by metric", kind="timeseries",
            format=FORMAT_TIME_SERIES, unit="percentunit", min=0, max=1,
            description="Share of score rows without a value: null (undefined for the sample), "
                        "error (the judge failed), skipped (budget, size).",
            sql=f"""SELECT $__timeInterval(minute) AS time, metric,
  sum(n_null) / sum(rows) AS null_share,
  sum(n_error) / sum(rows) AS error_share,
  sum(n_skipped) / sum(rows) AS skipped_share
FROM `{db}`.`scores_1m`
WHERE $__timeFilter(minute)
  AND {f}
GROUP BY time, metric
HAVING sum(rows) > 0
ORDER BY time, metric"""),
    ))


def _drift_section(s: DashboardsSettings) -> Section:
    return Section("Drift", (
        PanelSpec(
            key="drift", title="Drift z (recent window vs same hours of previous days)",
            kind="timeseries", format=FORMAT_TIME_SERIES, unit="none",
            thresholds=(round(s.drift.z_critical, 2),), width=24,
            description=(f"Welch z of the last {s.drift.window_hours} h mean against the same hours "
                         f"of the previous {s.drift.baseline_days} days, per metric and "
                         f"{', '.join(s.drift.segment_by)}. Below {s.drift.z_critical:.2f} "
                         f"(p < {s.drift.alpha}) with a decrease of at least "
                         f"{s.drift.min_effect} the drift alert fires."),
            sql=drift_sql(s, latest_only=False)),
    ))


def _distributions_section(s: DashboardsSettings) -> Section:
    db, f = s.database, filters()
    return Section("Distributions and worst traces", tuple(
        _histogram(s, m) for m in s.metrics) + (
        PanelSpec(
            key="worst_traces", title="Worst recent traces", kind="table", format=FORMAT_TABLE,
            width=24, height=12, trace_link=True, text_columns=WORST_TEXT_COLUMNS,
            description=_worst_description(s),
            sql=f"""SELECT ts AS time, trace_id, service, metric, round(assumeNotNull(value), 3) AS value,
  u.statement AS unsupported_statement,
  if(k > 0, round(toFloat64(u.support), 2), NULL) AS p_supported,
  if(k > 0 AND u.context >= 0, toString(u.context + 1), '') AS passage,
  u.passage AS closest_text,
  prompt_version, model, environment, retriever_version, explanation
FROM `{db}`.`scores_dedup`
LEFT ARRAY JOIN unsupported AS u, arrayEnumerate(unsupported) AS k
WHERE $__timeFilter(ts) AND status = 'ok'
  AND $__conditionalAll(metric IN (${{metric:singlequote}}), $metric)
  AND {f}
ORDER BY metric != {_q(s.alerts.faithfulness_metric)}, value ASC, ts DESC, trace_id, k
LIMIT {s.worst_traces_limit}"""),
    ))


WORST_TEXT_COLUMNS = ("unsupported_statement", "closest_text")
"""The worst-traces table's columns of stored trace text: the report shows them whole (they are
bounded when stored), escaped, and Grafana lets a cell be inspected."""


def _worst_description(s: DashboardsSettings) -> str:
    metric = s.alerts.faithfulness_metric
    link = ("the trace id links to the tracing UI." if s.trace_url_template else
            "set trace_url_template (--trace-url) to link each trace id to your tracing UI.")
    return (f"Lowest scores in range, {metric} first (the metric the alerts watch), then the "
            "other metrics. A faithfulness row per statement the judge found unsupported "
            "(lowest P(supported) first): the statement, the passage that came closest (its "
            "rank, 1 = first retrieved) and the span of it the judge compared the statement "
            "with (the model judge's best premise, the fast judge's best sentence, the context "
            "the LLM judge cited). Empty where excerpts are off, for rows scored before "
            f"ragpulse stored them, and for scores without an unsupported statement; {link}")


def _judge_section(s: DashboardsSettings) -> Section:
    db, f = s.database, filters()

    def judge_series(select: str, having: str = "") -> str:
        """Per-judge series over the minute rollup: ``select`` is the value expression(s)."""
        return f"""SELECT $__timeInterval(minute) AS time, {stored_judge_sql()} AS judge,{select}
FROM `{db}`.`scores_1m`
WHERE $__timeFilter(minute)
  AND {f}
GROUP BY time, judge
{having}ORDER BY time, judge"""

    return Section("Judge cost and throughput", (
        PanelSpec(
            key="judge_calls", title="Judge LLM calls", kind="timeseries",
            format=FORMAT_TIME_SERIES, unit="short", totals=True,
            description="LLM calls per interval (a call shared by several metrics counts once).",
            zero_note="No LLM calls in this range: {judges} scored it on this machine, without "
                      "an LLM.",
            sql=judge_series(" sum(llm_calls) AS llm_calls")),
        PanelSpec(
            key="judge_tokens", title="Judge tokens", kind="timeseries",
            format=FORMAT_TIME_SERIES, unit="short", totals=True,
            zero_note="No LLM tokens in this range: {judges} scored it on this machine, without "
                      "an LLM.",
            sql=judge_series(
                "\n  sum(prompt_tokens) AS prompt_tokens, sum(completion_tokens) AS completion_tokens"
            )),
        PanelSpec(
            key="judge_throughput", title="Scores per second", kind="timeseries",
            format=FORMAT_TIME_SERIES, unit="short",
            sql=judge_series(" sum(rows) / $__interval_s AS scores_per_s")),
        PanelSpec(
            key="judge_latency", title="Judge latency per score", kind="timeseries",
            format=FORMAT_TIME_SERIES, unit="ms",
            sql=judge_series("\n  sum(judge_latency_ms_sum) / sum(rows) AS latency_ms_per_score",
                             having="HAVING sum(rows) > 0\n")),
        PanelSpec(
            key="judge_errors", title="Scores without a value, by reason", kind="timeseries",
            format=FORMAT_TIME_SERIES, unit="short", width=24, totals=True,
            description="Judge errors (timeouts, unparseable output…), budget and size skips.",
            sql=f"""SELECT $__timeInterval(ts) AS time, reason, toFloat64(count()) AS scores
FROM `{db}`.`scores_dedup`
WHERE $__timeFilter(ts) AND status IN ('error', 'skipped')
  AND {f}
GROUP BY time, reason
ORDER BY time, reason"""),
    ))



def _pipeline_health_panel(db: str, key: str, title: str, names: tuple[str, ...], by: str,
                           unit: str = "short", width: int = 12,
                           description: str = "") -> PanelSpec:
    """A pipeline_health panel of declared counters or of declared gauges (their kind is the
    declared one). ``by="name"``: one series per counter/gauge, totals only (``label = ''``);
    ``by="label"``: one series per label (e.g. the unscorable reason), the labelled breakdown
    only. Components write a total and its breakdown side by side, so mixing them would count
    twice."""
    declared = [self_metric(n) for n in names]
    kinds = {m.kind for m in declared}
    if len(kinds) != 1 or (by == "label" and not all(m.split_by for m in declared)):
        raise ValueError(f"panel {key}: {names} mix counters and gauges or are not split by a label")
    (kind,) = kinds
    label_filter = "label = ''" if by == "name" else "label != ''"
    if kind == "gauge":
        # Gauges: the last value per instance and minute, summed over instances.
        sql = f"""SELECT $__timeInterval(minute) AS time, {by} AS series, max(v) AS value
FROM (
  SELECT minute, {by}, sum(value) AS v
  FROM `{db}`.`pipeline_health` FINAL
  WHERE $__timeFilter(minute) AND kind = 'gauge' AND name IN {_in(names)} AND {label_filter}
  GROUP BY minute, {by}
)
GROUP BY time, series
ORDER BY time, series"""
    else:
        sql = f"""SELECT $__timeInterval(minute) AS time, {by} AS series, sum(value) AS value
FROM `{db}`.`pipeline_health` FINAL
WHERE $__timeFilter(minute) AND kind = 'counter' AND name IN {_in(names)} AND {label_filter}
GROUP BY time, series
ORDER BY time, series"""
    return PanelSpec(key=key, title=title, kind="timeseries", format=FORMAT_TIME_SERIES,
                     sql=sql, unit=unit, width=width, description=description,
                     series_names=names if by == "name" else (), totals=kind == "counter")



def _pipeline_section(s: DashboardsSettings) -> Section:
    def health(*args: Any, **kw: Any) -> PanelSpec:
        return _pipeline_health_panel(s.database, *args, **kw)

    return Section("Pipeline health", (
        health("health_spans", "Spans received / accepted / refused (collector), consumed (scorer)",
               HEALTH["spans"], "name"),
        health("health_traces", "Traces assembled / evicted / scored", HEALTH["traces"], "name",
               description="traces_assembled: every trace the assembler handed on (complete, "
                           "timed out, evicted, drained at shutdown, re-scored), as the status "
                           "lines count it; traces_evicted and traces_timed_out are part of it. "
                           "traces_not_rag: traces with no question, no answer and no LLM call "
                           "(index building, embedding batches); counted, no score rows. "
                           "traces_expired_incomplete: traces evicted before their root span "
                           "arrived with nothing to score; counted, no score rows."),
        health("health_lag", "Consumer lag (records)", HEALTH["lag"], "name"),
        health("health_unscorable", "Unscorable traces by reason", HEALTH["unscorable"],
               "label", description=UNSCORABLE_DESCRIPTION),
        health("health_dead_letter", "Dead-lettered records by reason", HEALTH["dead_letter"],
               "label"),
        health("health_dead_letter_errors", "Dead-letter send errors and write errors",
               HEALTH["errors"], "name",
               description="rows_expired: score rows ClickHouse acknowledged but the scores "
                           "TTL deleted on insert (their time is outside it)."),
    ))


def panels(settings: DashboardsSettings) -> list[PanelSpec]:
    """Every panel of every section, in order."""
    return [p for sec in sections(settings) for p in sec.panels]
