"""Which segment drove a change: ``ragpulse status --why METRIC``, the report's "What changed"
section and the dashboard panel of the same name, all from one query (:func:`.queries.why_sql`).

The change of a metric's mean between a baseline window and a recent one ("now") is split, one
dimension at a time (service, environment, model, prompt version, retriever version), into each
segment's *rate* (the segment itself got worse or better) and *mix* (it got more or less of the
traffic, and scores below or above the average). Per dimension the parts add up to the change.

The ranking rule, stated once here and in the panel's caption: a segment is ranked when it has
at least ``why.min_samples`` scores (default 20) in each window it has traffic in; ranked
segments are ordered by the end of the 95 % interval of their contribution that is nearest to no
change, taken in the direction of the overall change (what the segment surely accounts for); the
others follow, marked. A segment's contribution is weighted by its share of the traffic, so 3
traces can only ever move the mean by their 3-in-600 share, and they are not ranked either.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from .frames import Frame, context
from .macros import expand
from .queries import why_sql
from .settings import DashboardsSettings

__all__ = ["SegmentChange", "WhyResult", "caption", "explain_change", "halves", "render_why",
           "result_from_frame", "result_from_rows", "why_html", "why_windows"]

_METRIC = re.compile(r"^[A-Za-z0-9_:.-]{1,128}$")


@dataclass(frozen=True)
class SegmentChange:
    """One row of the decomposition: a segment (``dimension`` = ``segment``) or the overall
    change (``dimension == "all"``). Means and traffic shares are sampling-weighted; ``low`` ..
    ``high`` is the interval of ``contribution``, ``rate_low`` .. ``rate_high`` that of
    ``rate``; ``share`` = ``rate_share`` + ``mix_share`` is the contribution over the change."""

    rank: int
    dimension: str
    segment: str
    share: float
    rate_share: float
    mix_share: float
    contribution: float
    low: float
    high: float
    rate: float
    rate_low: float
    rate_high: float
    mix: float
    n_baseline: int
    n_now: int
    mean_baseline: float | None
    mean_now: float | None
    traffic_baseline: float
    traffic_now: float
    ranked: bool

    @property
    def rate_certain(self) -> bool:
        """Whether the rate's interval excludes no change (the segment itself changed)."""
        return self.rate_high < 0 or self.rate_low > 0

    @property
    def what(self) -> str:
        """What happened to the segment, in words: its rate when that is certain and at least
        as large as the mix, else its change of traffic."""
        if self.n_baseline == 0:
            return "new traffic"
        if self.n_now == 0:
            return "no traffic now"
        if self.rate_certain and abs(self.rate) >= abs(self.mix):
            return "got worse" if self.rate < 0 else "got better"
        if self.traffic_now != self.traffic_baseline:
            return "more traffic" if self.traffic_now > self.traffic_baseline else "less traffic"
        return "no certain change"


@dataclass
class WhyResult:
    """The decomposition of ``metric``'s change from ``baseline`` to ``now`` (each ``(from,
    to)``): the overall change, the segments in ranked order, or the query's error."""

    metric: str
    baseline: tuple[datetime, datetime]
    now: tuple[datetime, datetime]
    overall: SegmentChange | None = None
    segments: list[SegmentChange] = field(default_factory=list)
    error: str | None = None
    confidence: float = 0.95
    min_samples: int = 20

    @property
    def significant(self) -> bool:
        """Whether the overall change's interval excludes no change."""
        o = self.overall
        return o is not None and (o.high < 0 or o.low > 0)

    @property
    def first(self) -> SegmentChange | None:
        """The segment that drove the change most surely (the top ranked one), if any."""
        return next((s for s in self.segments if s.ranked), None)

    def summary(self) -> str:
        """One or two sentences: the change with its interval and windows, and who drove it."""
        m, o, fmt = self.metric, self.overall, "%H:%M"
        if self.error:
            return f"the query for {m} failed: {self.error}"
        span = (f"{self.baseline[0]:{fmt}}–{self.baseline[1]:{fmt}} against "
                f"{self.now[0]:{fmt}}–{self.now[1]:{fmt}} UTC")
        if o is None or o.n_baseline == 0 or o.n_now == 0:
            n0 = o.n_baseline if o else 0
            n1 = o.n_now if o else 0
            return (f"No change of {m} to explain: the baseline has {n0} scores and now has "
                    f"{n1} ({span}); both windows need scores.")
        verb = "fell" if o.contribution < 0 else "rose"
        text = (f"{m} {verb} by {abs(o.contribution):.3f} ({self.confidence:.0%} interval "
                f"{o.low:+.3f} to {o.high:+.3f}), from {o.mean_baseline:.3f} (n={o.n_baseline}) "
                f"to {o.mean_now:.3f} (n={o.n_now}), {span}.")
        if not self.significant:
            text += " The interval includes no change."
        top = self.first
        if top is None:
            return text + f" No segment has {self.min_samples} scores in each window to rank."
        if not self.sure(top):
            return text + (" No segment's contribution is surely in the direction of the "
                           "change: the segments below are what moved, not a cause.")
        return (text + f" First: {top.dimension} = {top.segment or '(empty)'}, "
                f"{_pct(top.share)} of the change ({top.what}: rate {_pct(top.rate_share)}, "
                f"mix {_pct(top.mix_share)}; its contribution {top.contribution:+.3f}, "
                f"interval {top.low:+.3f} to {top.high:+.3f}).")

    def sure(self, segment: SegmentChange) -> bool:
        """Whether ``segment``'s contribution interval lies wholly on the side of the overall
        change (the ranking's bound is above zero)."""
        o = self.overall
        if o is None:
            return False
        return segment.high < 0 if o.contribution < 0 else segment.low > 0


def _pct(x: float) -> str:
    return f"{round(x * 100) + 0:.0f}%"  # + 0: never "-0%"


_FIELDS = ("rank", "dimension", "segment", "share", "rate_share", "mix_share", "contribution",
           "ci_low", "ci_high", "rate", "rate_low", "rate_high", "mix", "n_baseline", "n_now",
           "mean_baseline", "mean_now", "traffic_baseline", "traffic_now", "ranked")


def result_from_rows(columns: Sequence[str], rows: Sequence[Sequence[Any]], *, metric: str,
                     baseline: tuple[datetime, datetime], now: tuple[datetime, datetime],
                     settings: DashboardsSettings, error: str | None = None) -> WhyResult:
    """The :class:`WhyResult` of the query's rows (as ``client.query`` or a report frame gives
    them). Raises ``ValueError`` when a column of the query is missing."""
    out = WhyResult(metric, baseline, now, error=error, confidence=settings.why.confidence,
                    min_samples=settings.why.min_samples)
    if error or not rows:  # no rows: neither window has a score (and no column names come)
        return out
    missing = [c for c in _FIELDS if c not in columns]
    if missing:
        raise ValueError(f"the decomposition query lacks columns {missing}")
    idx = [list(columns).index(c) for c in _FIELDS]
    for row in rows:
        v = [row[i] for i in idx]
        seg = SegmentChange(
            rank=int(v[0]), dimension=str(v[1]), segment=str(v[2]),
            share=float(v[3]), rate_share=float(v[4]), mix_share=float(v[5]),
            contribution=float(v[6]), low=float(v[7]), high=float(v[8]), rate=float(v[9]),
            rate_low=float(v[10]), rate_high=float(v[11]), mix=float(v[12]),
            n_baseline=int(v[13]), n_now=int(v[14]),
            mean_baseline=None if v[15] is None else float(v[15]),
            mean_now=None if v[16] is None else float(v[16]),
            traffic_baseline=float(v[17]), traffic_now=float(v[18]), ranked=bool(v[19]))
        if seg.dimension == "all":
            out.overall = seg
        else:
            out.segments.append(seg)
    return out


def why_windows(until: datetime, now: timedelta, baseline: timedelta | None = None
                ) -> tuple[tuple[datetime, datetime], tuple[datetime, datetime]]:
    """``(baseline, now)`` windows: now is the ``now`` long window ending at ``until``, the
    baseline the ``baseline`` long one right before it (default: as long as now). Pure."""
    n0 = until - now
    return (n0 - (baseline or now), n0), (n0, until)


def _literal(t: datetime) -> str:
    return f"fromUnixTimestamp64Milli({int(t.timestamp() * 1000)})"


def explain_change(client: Any, settings: DashboardsSettings, metric: str,
                   baseline: tuple[datetime, datetime], now: tuple[datetime, datetime], *,
                   selection: Mapping[str, Sequence[str]] | None = None) -> WhyResult:
    """Run the decomposition of ``metric`` between the two windows (with the dashboard's
    drill-down ``selection``, e.g. ``{"service": ["support-bot"]}``). Blocks on one query;
    a failing query is returned as ``error``, never raised. Raises ``ValueError`` for a metric
    name that is not one, or windows out of order."""
    if not _METRIC.match(metric):
        raise ValueError(f"metric name {metric!r} must match {_METRIC.pattern}")
    if not baseline[0] < baseline[1] <= now[0] < now[1]:
        raise ValueError("the baseline window must end before the recent one starts, each "
                         "with a positive length")
    sql = why_sql(settings, metric, (_literal(baseline[0]), _literal(baseline[1])),
                  (_literal(now[0]), _literal(now[1])))
    sql = expand(sql, context(baseline[0], now[1], selection=selection))
    try:
        res = client.query(sql)
    except Exception as exc:
        return result_from_rows([], [], metric=metric, baseline=baseline, now=now,
                                settings=settings, error=f"{type(exc).__name__}: {exc}")
    return result_from_rows(list(res.column_names), [tuple(r) for r in res.result_rows],
                            metric=metric, baseline=baseline, now=now, settings=settings)


def halves(t0: datetime, t1: datetime) -> tuple[tuple[datetime, datetime], tuple[datetime, datetime]]:
    """The panel's windows over ``[t0, t1]``: the first and the second half, split at the whole
    second the SQL splits at (``intDiv`` of the epoch seconds)."""
    mid = datetime.fromtimestamp((int(t0.timestamp()) + int(t1.timestamp())) // 2, UTC)
    return (t0, mid), (mid, t1)


def result_from_frame(frame: Frame, settings: DashboardsSettings, t0: datetime,
                      t1: datetime) -> WhyResult:
    """The :class:`WhyResult` of the panel's frame run over ``[t0, t1]`` (halves)."""
    metric = frame.panel.key.removeprefix("why_")
    baseline, now = halves(t0, t1)
    return result_from_rows(frame.columns, frame.rows, metric=metric, baseline=baseline,
                            now=now, settings=settings, error=frame.error)


def _means(s: SegmentChange) -> str:
    a = "–" if s.mean_baseline is None else f"{s.mean_baseline:.3f}"
    b = "–" if s.mean_now is None else f"{s.mean_now:.3f}"
    return f"{a} → {b}"


def _rows(result: WhyResult) -> list[tuple[str, ...]]:
    """The table's cells, ranked order: #, segment, share, rate, mix, contribution ± the half
    width of its interval, means, scores, traffic shares, what happened."""
    out = []
    for s in result.segments:
        out.append((
            str(s.rank) if s.ranked else "–",
            f"{s.dimension} = {s.segment or '(empty)'}",
            _pct(s.share), _pct(s.rate_share), _pct(s.mix_share),
            f"{s.contribution:+.3f} ± {(s.high - s.low) / 2:.3f}",
            _means(s), f"{s.n_baseline} → {s.n_now}",
            f"{_pct(s.traffic_baseline)} → {_pct(s.traffic_now)}",
            s.what if s.ranked else f"{s.what} (too few)",
        ))
    return out


HEADERS = ("#", "segment", "share", "rate", "mix", "contribution", "mean",
           "scores", "traffic", "what")
"""The table's columns. ``#`` is the rank, ``–`` for a segment under the minimum count."""


def caption(result: WhyResult) -> str:
    """What the table's columns mean and the ranking rule, in two sentences."""
    return (
        "share: the part of the change; rate: the segment got worse or better; mix: it got more "
        "or less traffic and scores below or above the average; contribution: to the change, ± "
        f"its {result.confidence:.0%} interval; mean, scores, traffic: baseline → now. Ranked "
        f"(#) with at least {result.min_samples} scores in each window it appears in (– and "
        f"\"too few\": fewer), by the end of the {result.confidence:.0%} interval of its "
        "contribution nearest to no change; one dimension at a time, so a segment's rate "
        "includes shifts inside it.")


def render_why(console: Any, result: WhyResult, title: str) -> None:
    """Print the decomposition with rich: the summary, then the ranked table (colours only on
    a terminal; data cells are text, never markup)."""
    from rich.markup import escape as markup_escape
    from rich.table import Table

    from ragpulse.scorer.store import without_controls

    def escape(text: str) -> str:
        return markup_escape(without_controls(text))

    console.print(escape(title), highlight=False)
    console.print(escape(result.summary()), highlight=False)
    if result.error or not result.segments:
        return
    t = Table(header_style="bold", caption=caption(result), caption_justify="left")
    for h in HEADERS:
        t.add_column(h, justify="right" if h in ("share", "rate", "mix", "#") else "left",
                     no_wrap=h != "what")
    for cells in _rows(result):
        t.add_row(*(escape(c) for c in cells))
    console.print(t)


def why_html(result: WhyResult) -> str:
    """The report's body of the section: the summary and the ranked table, escaped."""
    from .report import esc

    head = "".join(f"<th>{esc(h)}</th>" for h in HEADERS)
    body = []
    for s, cells in zip(result.segments, _rows(result), strict=True):
        cls = ' class="first"' if s is result.first and result.sure(s) else (
            ' class="unranked"' if not s.ranked else "")
        body.append(f"<tr{cls}>" + "".join(f"<td>{esc(c)}</td>" for c in cells) + "</tr>")
    table = (f'<table class="data why"><thead><tr>{head}</tr></thead>'
             f'<tbody>{"".join(body)}</tbody></table>'
             f'<p class="desc">{esc(caption(result))}</p>') if body else ""
    cls = "error" if result.error else "why-summary"
    return f'<p class="{cls}">{esc(result.summary())}</p>{table}'
