"""Settings of the dashboards, alert rules and drift statistic. Frozen pydantic models: every
threshold and window is a validated value with a default, never a constant buried in SQL.

One :class:`DashboardsSettings` drives everything this package produces (the Grafana JSON, the
provisioning YAML, the API push, ``ragpulse report`` and ``ragpulse status``), so what a person
sees in the offline report is what Grafana would show and what the alert rules evaluate.
"""

from __future__ import annotations

import re
from statistics import NormalDist
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ragpulse.common.schema import DatabaseName
from ragpulse.scorer import DEFAULT_METRICS, resolve_judge

from .levels import FAITHFULNESS_LEVELS, JUDGE_NAMES

__all__ = [
    "SEGMENT_DIMENSIONS",
    "AlertSettings",
    "DashboardsSettings",
    "DriftSettings",
    "WhySettings",
]

SEGMENT_DIMENSIONS = ("service", "environment", "model", "prompt_version", "retriever_version")
"""The drill-down dimensions: template variables on the dashboard, segments of the drift test.
They are columns of both ``scores`` and ``scores_1m``."""

Dimension = Literal["service", "environment", "model", "prompt_version", "retriever_version"]

_UID = re.compile(r"^[A-Za-z0-9_-]{1,40}$")
_METRIC = re.compile(r"^[A-Za-z0-9_:.-]{1,128}$")


def _uid(v: str, what: str) -> str:
    # Grafana uids: at most 40 characters of [a-zA-Z0-9-_]; rejected by the API otherwise.
    if not _UID.match(v):
        raise ValueError(f"{what} {v!r} must be 1-40 characters of [A-Za-z0-9_-] (a Grafana uid)")
    return v


class AlertSettings(BaseModel):
    """Thresholds and windows of the alert rules. Frozen; validated on construction.

    Every quality rule requires a minimum number of scored samples in its window, so three unlucky
    traces at 3 a.m. never page anybody: with fewer samples the rule returns no series for that
    segment (and ``noDataState: OK``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    group: str = "ragpulse"
    """Rule group name (also the evaluation group in Grafana)."""
    interval_s: int = Field(default=60, ge=10, le=86400)
    """How often Grafana evaluates the group."""
    pending_for: str = "5m"
    """``for``: how long a condition must hold before the alert fires (Grafana duration)."""

    faithfulness_metric: str = "faithfulness"
    faithfulness_min: float = Field(default=0.7, gt=0, lt=1)
    """Absolute rule: fire when the weighted mean faithfulness of a service is below this, for
    the judges without a level in ``faithfulness_min_by_judge`` (the LLM judge)."""
    faithfulness_min_by_judge: dict[str, float] = Field(
        default_factory=lambda: dict(FAITHFULNESS_LEVELS))
    """Absolute level per judge (the ``judge`` column of the score rows: ``local``, ``nli``,
    ``llm``), each a rule of its own (``ragpulse-faithfulness-low-<judge>``, a secondary guard
    beside the baseline-relative drop). Defaults from the local judges' measured score
    distributions (``ragpulse.dashboards.levels``); ``{}`` puts every judge under
    ``faithfulness_min``."""
    faithfulness_window_s: int = Field(default=3600, ge=60, le=86400)
    faithfulness_min_samples: int = Field(default=20, ge=1)

    drop_fraction: float = Field(default=0.10, gt=0, lt=1)
    """Relative rule: fire when the recent mean is this fraction below the baseline, the same
    hours of the previous ``baseline_days`` days (so a normal daily cycle is not a drop)."""
    drop_confidence: float = Field(default=0.95, ge=0, lt=1)
    """The drop must hold at this confidence: the rule's value is the end of the change's
    interval nearest to no change (the recent and baseline means each with the bound
    ``sqrt(m (1 - m) / n)`` on its standard error that any score in [0, 1] respects), so an
    hour of a bimodal judge's noise (the model judge scores most answers near 0 or 1) does not
    read as a drop. 0: the plain change of the means."""
    drop_window_s: int = Field(default=3600, ge=300, le=6 * 3600)
    baseline_days: int = Field(default=7, ge=1, le=28)
    drop_min_samples: int = Field(default=20, ge=1)
    """Minimum scored samples in the recent window."""
    baseline_min_samples: int = Field(default=50, ge=1)
    """Minimum scored samples in the baseline (all baseline days together)."""

    null_rate_max: float = Field(default=0.2, gt=0, lt=1)
    """Fire when the share of ``null``/``error`` scores of a (service, metric) exceeds this."""
    null_rate_window_s: int = Field(default=1800, ge=60, le=86400)
    null_rate_min_rows: int = Field(default=20, ge=1)

    stalled_after_min: int = Field(default=15, ge=1, le=1440)
    """Pipeline stalled: no score written for this many minutes (looked for over a day)."""
    lag_window_s: int = Field(default=900, ge=120, le=86400)
    lag_min: float = Field(default=100.0, ge=0)
    """Lag growing: only when the latest consumer lag is at least this many records…"""
    lag_growth_per_min: float = Field(default=10.0, gt=0)
    """…and its least-squares slope over the window exceeds this many records per minute."""

    budget_window_s: int = Field(default=900, ge=60, le=86400)
    """Judge budget exhausted: any score skipped with ``budget_exhausted`` in this window."""

    labels: dict[str, str] = Field(default_factory=lambda: {"team": "rag"})
    """Extra labels on every rule (routing in the notification policy)."""

    @field_validator("group")
    @classmethod
    def _group(cls, v: str) -> str:
        if not v or len(v) > 190 or "/" in v:
            raise ValueError("rule group must be 1-190 characters without '/'")
        return v

    @field_validator("pending_for")
    @classmethod
    def _dur(cls, v: str) -> str:
        if not re.fullmatch(r"\d+[smhd]", v):
            raise ValueError(f"pending_for {v!r} must be a Grafana duration like 5m, 30s, 1h")
        return v

    @field_validator("faithfulness_metric")
    @classmethod
    def _metric(cls, v: str) -> str:
        if not _METRIC.match(v):
            raise ValueError(f"metric name {v!r} must match {_METRIC.pattern}")
        return v

    @field_validator("faithfulness_min_by_judge")
    @classmethod
    def _levels(cls, v: dict[str, float]) -> dict[str, float]:
        v = {resolve_judge(j) if j not in JUDGE_NAMES else j: level for j, level in v.items()}
        for judge, level in v.items():
            if judge not in JUDGE_NAMES:
                raise ValueError(f"faithfulness_min_by_judge: unknown judge {judge!r} "
                                 f"(one of {', '.join(JUDGE_NAMES)})")
            if not 0 < level < 1:
                raise ValueError(f"faithfulness_min_by_judge[{judge!r}] = {level} must be in (0, 1)")
        return v


class DriftSettings(BaseModel):
    """The drift statistic: a two-window Welch z-test per metric and segment.

    For each hour ``t`` the recent window (the ``window_hours`` hours ending at ``t``) is compared
    with the same hours of the previous ``baseline_days`` days. Comparing the same hours makes a
    normal daily cycle invisible; the test's standard error makes a handful of noisy samples
    insignificant; ``min_effect`` keeps a statistically significant but negligible difference
    (which any large sample produces) quiet. A slow slide accumulates against the trailing
    baseline until it is both significant and material, long before a fixed threshold trips.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    metrics: tuple[str, ...] = ("faithfulness",)
    """Metrics the drift alert watches (the panel shows every dashboard metric)."""
    segment_by: tuple[Dimension, ...] = ("service",)
    window_hours: int = Field(default=6, ge=1, le=48)
    baseline_days: int = Field(default=7, ge=1, le=28)
    alpha: float = Field(default=0.001, gt=0, lt=0.5)
    """One-sided p-value below which a decrease is significant."""
    min_effect: float = Field(default=0.03, ge=0, lt=1)
    """Smallest decrease of the mean (absolute, score units) worth an alert."""
    min_samples: int = Field(default=30, ge=2)
    """Minimum scored samples in the recent window (and in the baseline)."""

    @property
    def z_critical(self) -> float:
        """The z below which the one-sided p-value is below ``alpha`` (negative)."""
        return NormalDist().inv_cdf(self.alpha)

    @field_validator("segment_by")
    @classmethod
    def _segments(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        if not v or len(set(v)) != len(v):
            raise ValueError("segment_by needs at least one dimension, each once")
        return v

    @field_validator("metrics")
    @classmethod
    def _metrics(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for m in v:
            if not _METRIC.match(m):
                raise ValueError(f"metric name {m!r} must match {_METRIC.pattern}")
        return v


class WhySettings(BaseModel):
    """The drop decomposition (``ragpulse status --why``, the report's and the dashboard's
    "What changed" panel): which segment drove the change of a metric's mean between a baseline
    window and a recent one (``ragpulse.dashboards.why`` states the rule).

    A segment is ranked only with at least ``min_samples`` scores in each window it has traffic
    in; ranked segments are ordered by the end of the ``confidence`` interval of their
    contribution nearest to no change, so a segment of 3 traces (a wide interval) never tops
    the list by chance. Segments under the minimum are listed after them, marked.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    min_samples: int = Field(default=20, ge=2)
    """Scores a segment needs in each window it appears in to be ranked."""
    confidence: float = Field(default=0.95, gt=0.5, lt=1)
    """Two-sided confidence of the intervals (0.95: 1.96 standard errors)."""
    limit: int = Field(default=20, ge=1, le=1000)
    """Segments listed (after the overall row), across all dimensions."""

    @property
    def z(self) -> float:
        """The number of standard errors of the two-sided ``confidence`` interval."""
        return NormalDist().inv_cdf(0.5 + self.confidence / 2)


class DashboardsSettings(BaseModel):
    """Everything the generator needs. Frozen; validated on construction."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    database: DatabaseName = "rag"
    datasource_uid: str = "ragpulse-clickhouse"
    datasource_name: str = "ragpulse ClickHouse"
    clickhouse_host: str = "127.0.0.1"
    """Datasource provisioning only: where Grafana reaches ClickHouse (or ``ragpulse up``'s facade)."""
    clickhouse_port: int = Field(default=8123, ge=1, le=65535)
    clickhouse_protocol: Literal["http", "native"] = "http"
    folder_uid: str = "ragpulse"
    folder_title: str = "ragpulse"
    metrics: tuple[str, ...] = DEFAULT_METRICS
    """One quality panel and one distribution per metric, in this order."""
    trace_url_template: str | None = None
    """Link from the worst-traces table to the user's tracing UI; ``{trace_id}`` is replaced.
    Unset (the default): no link, because nothing serves a tracing UI in the embedded mode.
    Jaeger: ``http://jaeger:16686/trace/{trace_id}``; Tempo through Grafana Explore:
    ``https://grafana.example/explore?schemaVersion=1&panes=…"query":"{trace_id}"…`` (URL-encoded,
    docs/dashboards.md); Langfuse, Phoenix and others alike."""
    worst_traces_limit: int = Field(default=50, ge=1, le=1000)
    histogram_row_limit: int = Field(default=20000, ge=100, le=1_000_000)
    refresh: str = "1m"
    default_range: str = "now-24h"
    alerts: AlertSettings = AlertSettings()
    drift: DriftSettings = DriftSettings()
    why: WhySettings = WhySettings()

    @field_validator("datasource_uid")
    @classmethod
    def _ds(cls, v: str) -> str:
        return _uid(v, "datasource_uid")

    @field_validator("folder_uid")
    @classmethod
    def _folder(cls, v: str) -> str:
        return _uid(v, "folder_uid")

    @field_validator("metrics")
    @classmethod
    def _metrics(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        if not v or len(set(v)) != len(v):
            raise ValueError("metrics must be non-empty and unique")
        for m in v:
            if not _METRIC.match(m):
                raise ValueError(f"metric name {m!r} must match {_METRIC.pattern}")
        return v

    @field_validator("trace_url_template")
    @classmethod
    def _trace_url(cls, v: str | None) -> str | None:
        if v is None or not v.strip():
            return None
        if "{trace_id}" not in v:
            raise ValueError("trace_url_template must contain {trace_id}")
        if not re.match(r"^https?://", v):
            raise ValueError("trace_url_template must be an http(s) URL")
        return v

    @model_validator(mode="after")
    def _check(self) -> DashboardsSettings:
        if self.alerts.faithfulness_metric not in self.metrics:
            raise ValueError(f"alerts.faithfulness_metric {self.alerts.faithfulness_metric!r} "
                             "is not one of the dashboard metrics")
        return self

    def trace_url(self, trace_id: str) -> str | None:
        """The tracing-UI link for one trace id, ``None`` when no template is set (the report
        uses it; Grafana gets a data link)."""
        if self.trace_url_template is None:
            return None
        return self.trace_url_template.replace("{trace_id}", trace_id)
