"""Run panel queries without Grafana and shape their results like Grafana's data frames.

A time-series result (format 0) is long: column 1 the time, then string label columns, then
numeric value columns. Like Grafana's long-to-wide conversion, each (value column, label values)
pair becomes one series, named ``"<value column> <label values>"``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from .macros import ALL, QueryContext, expand
from .queries import FORMAT_TIME_SERIES, PanelSpec, judges_sql
from .settings import SEGMENT_DIMENSIONS, DashboardsSettings

__all__ = ["Frame", "Series", "auto_interval", "context", "judge_levels", "run_panel"]


@dataclass
class Series:
    """One line of a time-series panel: its value column, label values and points."""

    value: str
    labels: tuple[str, ...]
    points: list[tuple[datetime, float]] = field(default_factory=list)

    @property
    def name(self) -> str:
        """The value column and labels, space-separated (the legend text)."""
        return " ".join((self.value, *self.labels)) if self.labels else self.value


@dataclass
class Frame:
    """A panel's result: ``series`` for time series, ``columns``/``rows`` for tables."""

    panel: PanelSpec
    sql: str
    columns: list[str]
    types: list[str]
    rows: list[tuple[Any, ...]]
    series: list[Series] = field(default_factory=list)
    error: str | None = None


def _is_time(t: str) -> bool:
    return t.startswith(("DateTime", "Date"))


def _is_num(t: str) -> bool:
    t = t.removeprefix("Nullable(").removesuffix(")")
    return t.startswith(("Float", "Int", "UInt", "Decimal"))


def _utc(t: datetime) -> datetime:
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)


def to_series(columns: Sequence[str], types: Sequence[str],
              rows: Sequence[Sequence[Any]]) -> list[Series]:
    """Long to wide, as Grafana does for multi-line time series. Raises ``ValueError`` when the
    first column is not a time or no column is numeric (Grafana would refuse the panel too)."""
    if not columns or not _is_time(types[0]):
        raise ValueError(f"time series needs a time first column, got {list(zip(columns, types))}")
    label_idx = [i for i in range(1, len(columns)) if "String" in types[i]]
    value_idx = [i for i in range(1, len(columns)) if _is_num(types[i])]
    if not value_idx:
        raise ValueError(f"time series needs a numeric column, got {list(zip(columns, types))}")
    out: dict[tuple[str, tuple[str, ...]], Series] = {}
    for row in rows:
        t = _utc(row[0])
        labels = tuple(str(row[i]) for i in label_idx)
        for i in value_idx:
            v = row[i]
            if v is None or (isinstance(v, float) and not math.isfinite(v)):
                continue
            key = (columns[i], labels)
            if key not in out:
                out[key] = Series(columns[i], labels)
            out[key].points.append((t, float(v)))
    for s in out.values():
        s.points.sort(key=lambda p: p[0])
    return list(out.values())


def auto_interval(time_from: datetime, time_to: datetime, points: int = 120) -> float:
    """Grafana-like ``$__interval``: range / points, rounded up to a whole minute (the rollup's
    resolution), at least 60 s."""
    span = (time_to - time_from).total_seconds()
    return float(max(60, math.ceil(span / points / 60) * 60))


def context(time_from: datetime, time_to: datetime, interval_s: float | None = None,
            selection: Mapping[str, Sequence[str]] | None = None) -> QueryContext:
    """A query context with every drill-down variable on "All" unless ``selection`` names values."""
    sel = dict(selection or {})
    variables: dict[str, Sequence[str] | None] = {d: sel.get(d) or ALL
                                                  for d in (*SEGMENT_DIMENSIONS, "metric")}
    return QueryContext(time_from, time_to,
                        interval_s or auto_interval(time_from, time_to), variables)


def run_panel(client: Any, panel: PanelSpec, ctx: QueryContext) -> Frame:
    """Expand and run one panel query. Blocks on the query; never raises for a failing query
    (the frame carries ``error``, as a Grafana panel shows its error)."""
    sql = expand(panel.sql, ctx)
    try:
        res = client.query(sql)
    except Exception as exc:
        return Frame(panel, sql, [], [], [], error=f"{type(exc).__name__}: {exc}")
    cols = list(res.column_names)
    types = [t.name for t in res.column_types]
    rows = [tuple(r) for r in res.result_rows]
    frame = Frame(panel, sql, cols, types, rows)
    if panel.format == FORMAT_TIME_SERIES and rows:
        try:
            frame.series = to_series(cols, types, rows)
        except ValueError as exc:
            frame.error = str(exc)
    return frame


def judge_levels(client: Any, settings: DashboardsSettings, ctx: Any) -> dict[str, float]:
    """The faithfulness alert level of each judge that scored faithfulness in the range and
    selection of ``ctx`` (the panels' own): its own (``faithfulness_min_by_judge``) or the
    general one. Empty when the query fails or no judge did. Blocks on one query over the
    per-minute rollup, with the panels' time macros (epoch seconds: no time zone involved)."""
    a = settings.alerts
    try:
        rows = client.query(expand(judges_sql(settings), ctx)).result_rows
    except Exception:
        return {}
    return {str(j): a.faithfulness_min_by_judge.get(str(j), a.faithfulness_min)
            for (j,) in rows}


def since(spec: str) -> timedelta:
    """``24h``, ``90m``, ``7d``, ``3600s`` → timedelta, at least a minute (the rollup's
    resolution: a shorter range holds a minute's row only when a minute starts in it). Raises
    ``ValueError``."""
    spec = spec.strip().lower()
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
    if len(spec) < 2 or spec[-1] not in units or not spec[:-1].isdigit() or int(spec[:-1]) <= 0:
        raise ValueError(f"{spec!r} is not a duration like 30m, 24h, 7d")
    seconds = int(spec[:-1]) * units[spec[-1]]
    if seconds < 60:
        raise ValueError(f"{spec!r} is shorter than 1m: scores are counted per minute, so "
                         "the shortest range is 1m")
    return timedelta(seconds=seconds)
