"""``ragpulse report``: the dashboard's panels, rendered from ClickHouse into one self-contained
HTML file with inline SVG charts (no scripts, no CDN, no network: it opens from a mail
attachment or an air-gapped laptop).

The panels run the very SQL of the Grafana dashboard (:mod:`.queries`, expanded by
:mod:`.macros`), and the alert summary runs the alert rules (:mod:`.alerts`), so the report and
Grafana cannot disagree.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from ragpulse.scorer.store import without_controls, without_format

from .alerts import RuleResult, evaluate_all, instance_text
from .frames import Frame, Series, auto_interval, context, judge_levels, run_panel
from .macros import expand
from .queries import PanelSpec, data_range_sql, quality_description, sections
from .settings import DashboardsSettings
from .why import result_from_frame, why_html

__all__ = ["build_report", "render_html"]

ALERT_COLOR = "#d44a3a"
ZERO_COLOR = "#b8c0c8"
SAMPLES_COLOR = "#8e9aa6"
PALETTE = ("#3274d9", "#e0752d", "#56a64b", "#a352cc", "#d44a3a", "#1f9e89", "#8f3bb8",
           "#c9a400", "#5c6e91", "#e05f9e")
NARROW_W, WIDE_W, H = 640, 1240, 230
LONE_HALF_W = 3.0
"""Half the width in px of a lone point's band: an error bar as wide as the point's dot."""
PAD_L, PAD_R, PAD_T, PAD_B = 52, 14, 10, 26


def esc(value: Any) -> str:
    """``str(value)`` escaped for HTML text and quoted attribute values, without format and
    separator characters (a bidi override in a service name reorders the text a browser shows;
    rows stored before labels were cleaned may hold them)."""
    return html.escape(without_format(str(value)), quote=True)


@dataclass(frozen=True)
class Scale:
    """A linear map from data values ``[lo, hi]`` to pixels ``[out_lo, out_hi]`` (the pixel
    range may run backwards, as a y axis does); a zero-width data range maps to the middle."""

    lo: float
    hi: float
    out_lo: float
    out_hi: float

    def __call__(self, value: float) -> float:
        """The pixel position of ``value``."""
        if self.hi == self.lo:
            return (self.out_lo + self.out_hi) / 2
        return self.out_lo + (value - self.lo) / (self.hi - self.lo) * (self.out_hi - self.out_lo)


def _nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.ceil(lo / step) * step
    out, v = [], start
    while v <= hi + step * 1e-9:
        out.append(round(v, 10))
        v += step
    return out


def _fmt(v: float, unit: str) -> str:
    if unit == "percentunit":
        return f"{v * 100:.0f}%"
    if unit == "ms":
        return f"{v / 1000:.3g} s" if abs(v) >= 1000 else f"{v:.3g} ms"
    if unit == "ms_as_s":  # milliseconds on an axis that reaches a second: all ticks in seconds
        return f"{v / 1000:.3g} s"
    a = abs(v)
    if a >= 1e6:
        return f"{v / 1e6:.1f}M"
    if a >= 1e3:
        return f"{v / 1e3:.1f}k"
    if a >= 10 or v == int(v):
        return f"{v:.0f}"
    return f"{v:.2f}"


# Tick steps for the time axis, in seconds: whole minutes, hours and days, so labels never repeat.
_TIME_STEPS = (60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400,
               2 * 86400, 7 * 86400, 14 * 86400, 28 * 86400)


def _time_ticks(t0: float, t1: float, most: int = 7) -> list[float]:
    """Epoch seconds of the time-axis ticks: the smallest whole step giving at most ``most``."""
    span = max(t1 - t0, 1.0)
    step = next((st for st in _TIME_STEPS if span / st <= most), _TIME_STEPS[-1])
    first = math.ceil(t0 / step) * step
    return [float(first + i * step) for i in range(int((t1 - first) // step) + 1)]


def _time_labels(ticks: Sequence[float], span_s: float) -> list[str]:
    """Tick labels that never repeat: times of day, with the date on the first tick and at
    midnight once the axis is longer than 12 hours; dates only beyond a week."""
    out = []
    for i, tt in enumerate(ticks):
        t = datetime.fromtimestamp(tt, UTC)
        if span_s > 7 * 86400:
            out.append(t.strftime("%m-%d"))
        elif span_s > 12 * 3600 and (i == 0 or (t.hour, t.minute) == (0, 0)):
            out.append(t.strftime("%m-%d" if (t.hour, t.minute) == (0, 0) else "%m-%d %H:%M"))
        else:
            out.append(t.strftime("%H:%M"))
    return out


def _path(points: Sequence[tuple[float, float]]) -> str:
    return " ".join(("M" if i == 0 else "L") + f"{x:.1f},{y:.1f}" for i, (x, y) in enumerate(points))


def _segments(pts: list[tuple[datetime, float]], gap_s: float) -> list[list[tuple[datetime, float]]]:
    """Split where consecutive points are further apart than ``gap_s`` (no line across gaps)."""
    out: list[list[tuple[datetime, float]]] = []
    for p in pts:
        if out and (p[0] - out[-1][-1][0]).total_seconds() <= gap_s:
            out[-1].append(p)
        else:
            out.append([p])
    return out


def _all_zero(series: Series) -> bool:
    return all(v == 0 for _, v in series.points)


def svg_timeseries(frame: Frame, t0: datetime, t1: datetime, interval_s: float,
                   thresholds: Sequence[float] = ()) -> str:
    """A line chart of a time-series frame over ``[t0, t1]``; with ``panel.band`` the ``ci_*``
    series become a shaded band per label set and ``samples`` a bar strip under the chart.
    ``thresholds`` are drawn as dashed red lines (alert levels). A value of a panel that
    groups by interval (``panel.bucketed``) is drawn in the middle of its interval, and its
    sample bar spans the interval, so an axis that runs from the first interval's start to the
    last one's end is covered by the data.

    The legend names exactly what is drawn: a coloured key per series (except series of
    counts that are 0 throughout: one grey key for all of them, drawn as one grey line), the
    alert level, the band and the sample bars, and the panel's expected series that returned
    no rows at all; on panels of counts (``panel.totals``) each key carries its total."""
    p = frame.panel
    shift = interval_s / 2 if p.bucketed else 0.0
    cw = WIDE_W if p.width >= 24 else NARROW_W  # chart width in px
    lines = [s for s in frame.series if not (p.band and s.value in ("ci_low", "ci_high", "samples"))]
    bands = {s.labels: s for s in frame.series if p.band and s.value == "ci_low"}
    highs = {s.labels: s for s in frame.series if p.band and s.value == "ci_high"}
    samples = [s for s in frame.series if p.band and s.value == "samples"]
    # Counts that stayed 0 are one grey line and one legend key; a quality mean of 0 is a
    # finding, not an idle counter, so band panels keep their colours.
    zero = [] if p.band else [s for s in lines if _all_zero(s)]
    live = [s for s in lines if s not in zero]
    lo, hi = _value_range(frame, thresholds)
    strip = 46 if samples else 0
    height = H + strip
    x = Scale(t0.timestamp(), t1.timestamp(), PAD_L, cw - PAD_R)
    y = Scale(lo, hi, H - PAD_B, PAD_T)
    span = (t1 - t0).total_seconds()
    out = [(f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{cw}" height="{height}" '
            f'viewBox="0 0 {cw} {height}" preserveAspectRatio="xMinYMin meet" role="img" '
            f'aria-label="{esc(p.title)}">'),
           f'<rect x="0" y="0" width="{cw}" height="{height}" fill="#ffffff"/>']
    out += _grid(x, y, lo, hi, p.unit, cw, span)
    colors: dict[tuple[str, ...], str] = {}

    single = len({s.value for s in lines}) == 1  # one value column: name series by labels

    def key(labels: tuple[str, ...], value: str) -> tuple[str, ...]:
        return labels if (p.band or (single and labels)) else (value, *labels)

    def color(labels: tuple[str, ...], value: str) -> str:
        k = key(labels, value)
        if k not in colors:
            colors[k] = PALETTE[len(colors) % len(PALETTE)]
        return colors[k]

    gap = _gap(frame, interval_s)
    for labels, low in bands.items():
        for outline in (_band_outlines(low, highs[labels], x, y, gap, shift, LONE_HALF_W)
                        if labels in highs else ()):
            out.append(f'<path class="band" d="{outline} Z" fill="{color(labels, "mean")}" '
                       'fill-opacity="0.18" stroke="none"/>')
    for s in zero + live:  # the grey zero lines first, so coloured ones are drawn over them
        c = ZERO_COLOR if s in zero else color(s.labels, s.value)
        for seg in _segments(s.points, gap):
            pts = [(x(t.timestamp() + shift), y(min(max(v, lo), hi))) for t, v in seg]
            if len(pts) == 1:
                out.append(f'<circle class="series" cx="{pts[0][0]:.1f}" cy="{pts[0][1]:.1f}" r="3" '
                           f'fill="{c}"/>')
            else:
                out.append(f'<path class="series" d="{_path(pts)}" fill="none" stroke="{c}" '
                           'stroke-width="1.8" stroke-linejoin="round"/>')
    for tv in thresholds:
        yy = y(tv)
        out.append(f'<line class="threshold" x1="{PAD_L}" y1="{yy:.1f}" x2="{cw - PAD_R}" '
                   f'y2="{yy:.1f}" stroke="{ALERT_COLOR}" stroke-dasharray="5,4" stroke-width="1.2"/>')
    out.append(f'<rect class="frame" x="{PAD_L}" y="{PAD_T}" width="{cw - PAD_L - PAD_R}" '
               f'height="{H - PAD_B - PAD_T}" fill="none" stroke="#c7ccd1"/>')
    if samples:
        out += _sample_bars(samples, x, strip, interval_s)
    out.append("</svg>")
    totals = ({key(s.labels, s.value): sum(v for _, v in s.points) for s in live}
              if p.totals else {})
    return "".join(out) + _legend(p, colors, lines, zero, single, bool(bands), bool(samples),
                                  thresholds, totals)


def _gap(frame: Frame, interval_s: float) -> float:
    """Seconds between points beyond which a line breaks: 2.5 steps of the series' own
    resolution (drift is hourly even when the interval is a minute)."""
    steps = sorted((b[0] - a[0]).total_seconds() for s in frame.series
                   for a, b in zip(s.points, s.points[1:]))
    return 2.5 * max(interval_s, steps[len(steps) // 2] if steps else 0.0)


def _value_range(frame: Frame, thresholds: Sequence[float]) -> tuple[float, float]:
    """The y axis: the panel's ``min``/``max`` where set, else the data and alert levels
    (with 0), plus headroom above."""
    p = frame.panel
    vals = [v for s in frame.series if s.value != "samples" for _, v in s.points] + list(thresholds)
    lo = p.min if p.min is not None else min(vals + [0.0])
    hi = p.max if p.max is not None else max(vals + [0.0])
    if hi - lo < 1e-9:
        hi = lo + 1  # all zero (or one flat value): an axis of 0..1, not five ticks of "0.00"
    elif p.max is None:
        hi += (hi - lo) * 0.08  # headroom: a flat line at the maximum is not glued to the frame
    return lo, hi


def _band_outlines(low: Series, high: Series, x: Scale, y: Scale, gap: float, shift: float,
                   half: float) -> list[str]:
    """SVG path outlines of the 95 % band between the ``ci_low`` and ``ci_high`` series, one
    per run of points without a gap; points are drawn ``shift`` seconds after their time, and a
    lone point's band is ``2 * half`` px wide (a line of one point has no width)."""
    out = []
    hmap = dict(high.points)
    pts = [(t, lv, hmap[t]) for t, lv in low.points if t in hmap]
    for seg in _segments([(t, 0.0) for t, _, _ in pts], gap):
        ts = {t for t, _ in seg}
        sp = [(x(t.timestamp() + shift), lv, h) for t, lv, h in pts if t in ts]
        if len(sp) == 1:
            ((xx, lv, h),) = sp
            sp = [(xx - half, lv, h), (xx + half, lv, h)]
        poly = [(xx, y(h)) for xx, _, h in sp] + [(xx, y(lv)) for xx, lv, _ in reversed(sp)]
        out.append(_path(poly))
    return out


def _grid(x: Scale, y: Scale, lo: float, hi: float, unit: str, cw: int, span: float) -> list[str]:
    """Horizontal grid lines with value ticks over ``[lo, hi]``, vertical ones with time ticks."""
    out = []
    if unit == "ms" and hi >= 1000:
        unit = "ms_as_s"
    for tv in _nice_ticks(lo, hi):
        yy = y(tv)
        out.append(f'<line x1="{PAD_L}" y1="{yy:.1f}" x2="{cw - PAD_R}" y2="{yy:.1f}" stroke="#e4e7eb"/>')
        out.append(f'<text x="{PAD_L - 6}" y="{yy + 4:.1f}" text-anchor="end" class="tick">'
                   f'{esc(_fmt(tv, unit))}</text>')
    ticks = _time_ticks(x.lo, x.hi)
    for tt, label in zip(ticks, _time_labels(ticks, span)):
        xx = x(tt)
        out.append(f'<line x1="{xx:.1f}" y1="{PAD_T}" x2="{xx:.1f}" y2="{H - PAD_B}" stroke="#f0f2f4"/>')
        out.append(f'<text x="{xx:.1f}" y="{H - 8}" text-anchor="middle" class="tick">{esc(label)}</text>')
    return out


def _half_bar(x: Scale, interval_s: float) -> float:
    """Half the width in px of an interval's bar: 80 % of the interval, at least 1 px wide."""
    return max(0.5, (x(x.lo + interval_s) - x(x.lo)) * 0.4)


def _sample_bars(samples: Sequence[Series], x: Scale, strip: int,
                 interval_s: float) -> list[str]:
    """The strip of scored-sample bars (all ``samples`` series summed) under the chart: one bar
    per interval, across the middle 80 % of it and never outside the plot (the first interval
    may start before the axis), so the labels left of the plot stay clear of them."""
    out = []
    totals: dict[datetime, float] = {}
    for s in samples:
        for t, v in s.points:
            totals[t] = totals.get(t, 0.0) + v
    top = max(totals.values(), default=1.0) or 1.0
    base = H + strip - 4
    half = _half_bar(x, interval_s)
    left, right = min(x.out_lo, x.out_hi), max(x.out_lo, x.out_hi)
    out.append(f'<text x="{PAD_L - 6}" y="{H + 14}" text-anchor="end" class="tick">'
               f'{esc(_fmt(top, "short"))}</text>')
    out.append(f'<text x="{PAD_L - 6}" y="{base}" text-anchor="end" class="tick">n</text>')
    for t, v in sorted(totals.items()):
        mid = x(t.timestamp() + interval_s / 2)
        a, b = max(left, mid - half), min(right, mid + half)
        if b <= a:
            continue
        bh = (strip - 10) * v / top
        out.append(f'<rect class="samples" x="{a:.1f}" y="{base - bh:.1f}" '
                   f'width="{b - a:.1f}" height="{bh:.1f}" fill="{SAMPLES_COLOR}"/>')
    return out


def _legend(panel: PanelSpec, colors: dict[tuple[str, ...], str], lines: Sequence[Series],
            zero: Sequence[Series], single: bool, banded: bool, sampled: bool,
            thresholds: Sequence[float], totals: Mapping[tuple[str, ...], float]) -> str:
    """The legend: a key per coloured series (with its total over the range, where
    ``totals`` has one), one for all-zero series, the band, the sample bars, each alert level,
    and the panel's expected series that returned no rows."""
    keys = [f'<span class="key"><i style="background:{c}"></i>{esc(" ".join(k) or "value")}'
            + (f'<b class="total"> {esc(_fmt(totals[k], "short"))}</b>' if k in totals else "")
            + "</span>" for k, c in colors.items()]
    if zero:
        values = list(dict.fromkeys(z.value for z in zero))
        labels = list(dict.fromkeys(" ".join(z.labels) for z in zero if z.labels))
        if panel.band or single:
            shown = ", ".join(labels) or "value"
        else:
            shown = ", ".join(values) + (f" × {', '.join(labels)}" if labels else "")
        keys.append(f'<span class="key zero"><i style="background:{ZERO_COLOR}"></i>'
                    f'0 throughout ({len(zero)} series): {esc(shown)}</span>')
    if banded:
        keys.append(f'<span class="key"><i style="background:{PALETTE[0]};opacity:.3"></i>'
                    "95% band (shaded, per service)</span>")
    if sampled:
        keys.append(f'<span class="key"><i style="background:{SAMPLES_COLOR}"></i>'
                    "scored samples (bars under the chart)</span>")
    for tv in thresholds:
        keys.append(f'<span class="key"><i class="dash" style="border-color:{ALERT_COLOR}"></i>'
                    f"alert level {esc(_fmt(tv, 'none'))}</span>")
    drawn = {s.value for s in lines}
    missing = [n for n in panel.series_names if n not in drawn and not any(n in s.labels for s in lines)]
    if missing:
        keys.append(f'<span class="key missing">no data: {esc(", ".join(missing))}</span>')
    return f'<div class="legend">{"".join(keys)}</div>'


def svg_histogram(frame: Frame, bins: int = 20) -> str:
    """A histogram of the frame's first column (``bins`` bars) as inline SVG, with a legend
    counting the scores."""
    p = frame.panel
    values = [float(r[0]) for r in frame.rows if r and r[0] is not None]
    lo = p.min if p.min is not None else min(values)
    hi = p.max if p.max is not None else max(values)
    if hi <= lo:
        hi = lo + 1
    counts = [0] * bins
    for v in values:
        counts[min(bins - 1, max(0, int((v - lo) / (hi - lo) * bins)))] += 1
    top = max(counts) or 1
    w, h = NARROW_W, H  # the time charts' size: in panels of one width, text of one size
    x = Scale(0, bins, PAD_L, w - PAD_R)
    y = Scale(0, top, h - PAD_B, PAD_T)
    out = [(f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
            f'viewBox="0 0 {w} {h}" role="img" aria-label="{esc(p.title)}">'),
           f'<rect x="0" y="0" width="{w}" height="{h}" fill="#ffffff"/>']
    for tv in _nice_ticks(0, top, 4):
        out.append(f'<line x1="{PAD_L}" y1="{y(tv):.1f}" x2="{w - PAD_R}" y2="{y(tv):.1f}" stroke="#e4e7eb"/>')
        out.append(f'<text x="{PAD_L - 6}" y="{y(tv) + 4:.1f}" text-anchor="end" class="tick">'
                   f'{esc(_fmt(tv, "short"))}</text>')
    for i, c in enumerate(counts):
        bh = (h - PAD_B) - y(c)
        out.append(f'<rect class="bar" x="{x(i) + 1:.1f}" y="{y(c):.1f}" '
                   f'width="{x(i + 1) - x(i) - 2:.1f}" height="{bh:.1f}" fill="#3274d9"/>')
    for i in range(0, bins + 1, max(1, bins // 4)):
        out.append(f'<text x="{x(i):.1f}" y="{h - 8}" text-anchor="middle" class="tick">'
                   f'{esc(_fmt(lo + (hi - lo) * i / bins, "short"))}</text>')
    out.append("</svg>")
    return "".join(out) + f'<div class="legend">{len(values)} scores</div>'


TEXT_CELL_CHARS = 2000
"""The most characters the report shows of a text column (``PanelSpec.text_columns``): the
scorer stores them bounded (400 by default), so only rows written otherwise reach it."""


_CELL_SPACE = re.compile(r"[\t\n\r\f\v]+")


def _cell_text(value: Any, limit: int) -> str:
    """``value`` as one line of cell text: runs of line breaks and tabs become one space, other
    control characters U+FFFD (stored trace text is only made valid UTF-8), format characters
    go (:func:`without_controls`), cut to ``limit`` characters with "…". Not yet escaped."""
    text = without_controls(_CELL_SPACE.sub(" ", str(value)))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def html_table(frame: Frame, settings: DashboardsSettings) -> str:
    """A table frame as an HTML table; ``trace_id`` cells link to the tracing UI when the panel
    asks for it (``settings.trace_url``). Cells are escaped text; NULL is an empty cell; the
    panel's text columns (statements, passages) are shown whole up to
    :data:`TEXT_CELL_CHARS`, other cells up to 120 characters."""
    head = "".join(f"<th>{esc(c)}</th>" for c in frame.columns)
    text_columns = set(frame.panel.text_columns)
    body = []
    for row in frame.rows:
        cells = []
        for c, v in zip(frame.columns, row):
            link = settings.trace_url(str(v)) if c == "trace_id" and frame.panel.trace_link else None
            if link is not None:
                cells.append(f'<td><a href="{esc(link)}">{esc(v)}</a></td>')
            elif isinstance(v, datetime):
                cells.append(f"<td>{esc(v.strftime('%Y-%m-%d %H:%M:%S'))}</td>")
            elif v is None:
                cells.append("<td></td>")
            elif c in text_columns:
                cells.append(f'<td class="text">{esc(_cell_text(v, TEXT_CELL_CHARS))}</td>')
            else:
                cells.append(f"<td>{esc(_cell_text(v, 120))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return (f'<table class="data"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table>')


def _panel_html(frame: Frame, s: DashboardsSettings, t0: datetime, t1: datetime,
                interval_s: float, queried: tuple[datetime, datetime] | None = None) -> str:
    """One panel's section; ``queried`` is the range its query ran over (default ``[t0, t1]``,
    the axis): the "What changed" panel compares its two halves."""
    p = frame.panel
    if frame.error:
        hint = (" (this database's schema is older than this ragpulse's: `ragpulse db init` "
                "migrates it, as the scorer and `ragpulse up` do when they start)"
                if "UNKNOWN_IDENTIFIER" in frame.error or "Missing columns" in frame.error else "")
        body = f'<p class="error">query failed{esc(hint)}: {esc(frame.error)}</p>'
    elif not frame.rows:
        expected = (f" (expected: {', '.join(p.series_names)})" if p.series_names else "")
        body = f'<p class="empty">no data in this range{esc(expected)}</p>'
    elif p.zero_note and frame.series and all(_all_zero(x) for x in frame.series):
        body = f'<p class="empty">{esc(_zero_note(p.zero_note, frame.series))}</p>'
    elif p.key.startswith("why_"):
        body = why_html(result_from_frame(frame, s, *(queried or (t0, t1))))
    elif p.kind == "timeseries":
        body = svg_timeseries(frame, t0, t1, interval_s, p.thresholds)
    elif p.kind == "histogram":
        body = svg_histogram(frame)
    else:
        body = html_table(frame, s)
    wide = " wide" if p.width >= 24 or p.kind == "table" else ""
    return (f'<section class="panel{wide}" data-panel="{esc(p.key)}"><h3>{esc(p.title)}</h3>'
            f'<p class="desc">{esc(p.description)}</p>{body}</section>')


def _zero_note(template: str, series: Sequence[Series]) -> str:
    """``template`` with ``{judges}`` naming the label values of ``series``: "the fast judge",
    "the fast and model judges"."""
    names = list(dict.fromkeys(s.labels[0] for s in series if s.labels))
    said = (", ".join(names[:-1]) + " and " + names[-1]) if len(names) > 1 else "".join(names)
    return template.format(judges=f"the {said} judge{'s' if len(names) > 1 else ''}")


def _alerts_html(results: Sequence[RuleResult]) -> str:
    rows = []
    for r in results:
        if r.error:
            state, detail = "error", r.error
        elif r.firing:
            state = "firing"
            detail = "; ".join(instance_text(r.rule, i) for i in r.firing)
        else:
            state, detail = "ok", f"{len(r.instances)} series evaluated"
        rows.append(f'<tr class="{state}"><td>{esc(state)}</td><td>{esc(r.rule.title)}</td>'
                    f"<td>{esc(detail)}</td></tr>")
    return ('<table class="alerts"><thead><tr><th>state</th><th>rule</th><th>detail</th></tr>'
            f'</thead><tbody>{"".join(rows)}</tbody></table>')


CSS = """
body{font:13px/1.4 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:18px;color:#1f2328;background:#f4f5f7}
h1{font-size:20px;margin:0 0 4px} h2{font-size:16px;margin:22px 0 8px;border-bottom:1px solid #d0d7de;padding-bottom:4px}
h3{font-size:13px;margin:0 0 2px} .desc{color:#57606a;margin:0 0 6px;font-size:11px}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(560px,1fr));gap:12px;max-width:1560px} .panel{background:#fff;border:1px solid #d0d7de;border-radius:6px;padding:10px;box-sizing:border-box;min-width:0}
.panel svg.chart{width:100%;height:auto}
.panel.wide{grid-column:1/-1} .tick{font-size:10px;fill:#57606a} .legend{font-size:11px;color:#57606a;margin-top:4px}
.key{margin-right:10px;white-space:nowrap} .key i{display:inline-block;width:10px;height:10px;margin-right:4px;border-radius:2px}
.key i.dash{width:14px;height:0;border-top:2px dashed;border-radius:0;vertical-align:middle} .key.missing{color:#8c959f;font-style:italic} .key.zero,.key.missing{white-space:normal}
table{border-collapse:collapse;font-size:12px;background:#fff} td,th{border:1px solid #d0d7de;padding:3px 6px;text-align:left;vertical-align:top}
table.data{display:block;overflow-x:auto;max-width:100%} td.text{min-width:220px;max-width:420px;overflow-wrap:anywhere} table.data td:first-child{white-space:nowrap}
tr.firing td:first-child{color:#fff;background:#d44a3a} tr.ok td:first-child{color:#fff;background:#56a64b} tr.error td:first-child{background:#e0b400}
.empty{color:#8c959f;font-style:italic} .error{color:#d44a3a} .meta{color:#57606a}
table.why tr.first td{font-weight:600;background:#fff4e5} table.why tr.unranked td{color:#8c959f} .why-summary{margin:0 0 6px}
"""


def render_html(frames: Sequence[tuple[str, Sequence[Frame]]], alerts: Sequence[RuleResult],
                settings: DashboardsSettings, t0: datetime, t1: datetime, interval_s: float,
                source: str, requested: tuple[datetime, datetime] | None = None,
                data: tuple[datetime, datetime] | None = None) -> str:
    """The HTML page. ``[t0, t1]`` is the charts' time axis; ``requested`` the range asked for
    and ``data`` the part of it that has data, when the axis was zoomed to it (the header
    says so, and names the axis too where it reaches past the data to whole intervals)."""
    fmt = "%Y-%m-%d %H:%M"
    if requested is not None and data is not None and data != requested:
        d0, d1 = data
        short = "%H:%M" if d0.date() == d1.date() == requested[1].date() else fmt
        rng = (f"{requested[0]:{fmt}} – {requested[1]:{fmt}} UTC · <b>data from "
               f"{d0:{short}} to {d1:{short}}</b>")
        if (f"{t0:{short}}", f"{t1:{short}}") != (f"{d0:{short}}", f"{d1:{short}}"):
            rng += f" (in whole intervals: {t0:{short}} – {t1:{short}})"
    else:
        rng = f"{t0:{fmt}} – {t1:{fmt}} UTC"
    parts = [(f"<!doctype html><html lang=en><head><meta charset=utf-8>"
              f"<title>ragpulse report {esc(t1.strftime(fmt))} UTC</title>"
              f"<style>{CSS}</style></head><body>"),
             "<h1>ragpulse: RAG quality report</h1>",
             (f'<p class="meta">{rng} · interval {int(interval_s)} s · '
              f"database <code>{esc(settings.database)}</code> · {esc(source)}</p>"),
             "<h2>Alerts</h2>", _alerts_html(alerts)]
    # the range the panels' queries ran over: the axis, within the range asked for
    queried = (max(t0, requested[0]), min(t1, requested[1])) if requested else (t0, t1)
    for title, fs in frames:
        parts.append(f"<h2>{esc(title)}</h2><div class=grid>")
        parts += [_panel_html(f, settings, t0, t1, interval_s, queried) for f in fs]
        parts.append("</div>")
    parts.append("</body></html>\n")
    return "".join(parts)


def data_range(client: Any, settings: DashboardsSettings, t0: datetime,
               t1: datetime) -> tuple[datetime, datetime] | None:
    """The part of ``[t0, t1]`` that has data: from the first minute with scores or pipeline
    counters to the end of the last one. ``None`` when there is no data or the query fails.
    Blocks on one query."""
    try:
        res = client.query(expand(data_range_sql(settings), context(t0, t1)))
        first, last, n = res.result_rows[0]
    except Exception:
        return None
    if not n:
        return None
    utc = [v.replace(tzinfo=UTC) if v.tzinfo is None else v.astimezone(UTC) for v in (first, last)]
    # a rollup minute covers [m, m + 60 s)
    return max(t0, utc[0]), min(t1, utc[1] + timedelta(seconds=60))


def _axis(data: tuple[datetime, datetime], interval_s: float) -> tuple[datetime, datetime]:
    """The charts' time axis for data in ``data``: from the start of the interval holding the
    data's first minute to the end of the interval holding its last (intervals start at whole
    multiples of ``interval_s`` since the epoch, as ``$__timeInterval`` groups them), so every
    interval drawn is a whole one and the data fills the axis at every length: one minute of
    data is a one-minute axis."""
    step = int(interval_s)
    first = int(data[0].timestamp()) // step * step
    last = -(-int(math.ceil(data[1].timestamp())) // step) * step
    return (datetime.fromtimestamp(first, UTC),
            datetime.fromtimestamp(max(last, first + step), UTC))


def _with_levels(p: PanelSpec, settings: DashboardsSettings, levels: Mapping[str, float]) -> PanelSpec:
    """The faithfulness panel with the alert levels that apply to the judges in the range, and
    a caption that names those (the dashboard's panel draws the general level, 0.7, which no
    rule applies to local-judge scores: their own levels are lower)."""
    metric = settings.alerts.faithfulness_metric
    if not levels or p.key != f"quality_{metric}":
        return p
    return replace(p, thresholds=tuple(sorted(set(levels.values()))),
                   description=quality_description(settings, metric, levels))


def build_report(client: Any, settings: DashboardsSettings, t0: datetime, t1: datetime, *,
                 selection: Mapping[str, Sequence[str]] | None = None,
                 source: str = "") -> str:
    """Run every panel and alert rule for ``[t0, t1]`` and return the HTML. Blocks on the
    queries (one at a time); a failing query is shown in its panel, never raised.

    The panels run over the part of the range that has data (:func:`data_range`), with an
    interval chosen for that span and an axis of whole intervals around it (:func:`_axis`):
    two minutes of demo data fill the chart in one-minute steps instead of a sliver at the
    right edge of 24 hours. The queries never read outside ``[t0, t1]``. Alerts are evaluated
    at ``t1``."""
    data = data_range(client, settings, t0, t1)
    if data:
        interval_s = auto_interval(*data)
        axis = _axis(data, interval_s)
        ctx = context(max(t0, axis[0]), min(t1, axis[1]), interval_s, selection=selection)
    else:
        axis = (t0, t1)
        ctx = context(t0, t1, selection=selection)
    levels = judge_levels(client, settings, ctx)
    frames = [(sec.title, [run_panel(client, _with_levels(p, settings, levels), ctx)
                           for p in sec.panels]) for sec in sections(settings)]
    alerts = evaluate_all(client, settings, t1)
    return render_html(frames, alerts, settings, axis[0], axis[1], ctx.interval_s, source,
                       requested=(t0, t1), data=data)
