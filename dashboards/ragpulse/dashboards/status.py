"""``ragpulse status``: a terminal summary per metric and service (last value, its 95 % band,
samples, a trend sparkline), the traces written as null rows by reason with what to do about
each, and the alert rules' state, all from the dashboard's own queries."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ragpulse.common.schema import ADVICE, NOT_RAG
from ragpulse.scorer.store import without_controls

from .alerts import RuleResult, evaluate_all, instance_text
from .frames import context, judge_levels, run_panel
from .queries import panels, sections
from .settings import DashboardsSettings

__all__ = ["MetricLine", "ReasonLine", "collect_status", "judges_line", "render_status", "sparkline",
           "status_interval", "status_judges", "unscorable_traces"]

BLOCKS = "▁▂▃▄▅▆▇█"


def sparkline(values: Sequence[float | None], lo: float | None = 0.0, hi: float | None = 1.0) -> str:
    """Unicode block sparkline; ``None`` is a gap (space). Fixed [lo, hi] keeps rows comparable."""
    present = [v for v in values if v is not None]
    if not present:
        return ""
    lo = min(present) if lo is None else lo
    hi = max(present) if hi is None else hi
    span = (hi - lo) or 1.0
    return "".join(" " if v is None else
                   BLOCKS[min(len(BLOCKS) - 1, max(0, int((v - lo) / span * (len(BLOCKS) - 1) + 0.5)))]
                   for v in values)


@dataclass(frozen=True)
class MetricLine:
    """One (metric, service) row. ``last``, ``low``/``high`` and ``samples`` cover the last
    interval with scores (``last_at`` .. ``last_at + interval_s``); ``range_mean`` and
    ``range_samples`` the whole ``--since`` range (the interval means weighted by their scored
    samples; exact while the sampling rate is constant)."""

    metric: str
    service: str
    last: float
    low: float
    high: float
    samples: int
    trend: tuple[float | None, ...]
    alerts: tuple[str, ...]
    range_mean: float = 0.0
    range_samples: int = 0
    last_at: datetime | None = None
    interval_s: float = 0.0


def duration(seconds: float) -> str:
    """``3600`` → ``1h``, ``120`` → ``2m``, ``90`` → ``90s``, ``86400`` → ``1d``."""
    s = int(seconds)
    for unit, n in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= n and s % n == 0:
            return f"{s // n}{unit}"
    return f"{s}s"


def status_interval(t0: datetime, t1: datetime, points: int = 24) -> float:
    """The interval ``status`` splits ``[t0, t1]`` into: the range over ``points``, rounded up
    to whole minutes (the rollup's resolution), so the trend has at most ``points`` + 1
    characters (the first interval may start before ``t0``). The column headers name it whether
    or not the range has data. Pure."""
    return 60.0 * max(1, math.ceil((t1 - t0).total_seconds() / points / 60))


def _slots(t0: datetime, t1: datetime, interval_s: float) -> tuple[float, int]:
    """The start (epoch seconds) of the first interval of ``[t0, t1]`` and how many intervals
    the range touches. Intervals start at whole multiples of ``interval_s`` since the epoch, as
    ``$__timeInterval`` groups the rows: one trend character per interval, so two adjacent
    intervals are two adjacent characters."""
    step = int(interval_s)
    first = int(t0.timestamp()) // step * step
    return float(first), max(1, -(-(int(math.ceil(t1.timestamp())) - first) // step))


def collect_status(client: Any, settings: DashboardsSettings, t0: datetime, t1: datetime,
                   points: int = 24) -> tuple[list[MetricLine], list[RuleResult], list[str]]:
    """Metric lines, rule results and query errors for ``[t0, t1]``, in steps of
    :func:`status_interval`. Blocks on the queries."""
    ctx = context(t0, t1, interval_s=status_interval(t0, t1, points))
    first, n_slots = _slots(t0, t1, ctx.interval_s)
    results = evaluate_all(client, settings, t1)
    errors = [f"{r.rule.uid}: {r.error}" for r in results if r.error]
    quality = [p for p in sections(settings)[0].panels if p.band]
    lines: list[MetricLine] = []
    for p in quality:
        metric = p.key.removeprefix("quality_")
        frame = run_panel(client, p, ctx)
        if frame.error:
            errors.append(f"{p.key}: {frame.error}")
            continue
        by = {(x.value, x.labels): x for x in frame.series}
        for (value, labels), mean in sorted(by.items()):
            if value != "mean" or not mean.points:
                continue
            t_last, last = mean.points[-1]
            low = dict(by[("ci_low", labels)].points).get(t_last, last)
            high = dict(by[("ci_high", labels)].points).get(t_last, last)
            counts = dict(by[("samples", labels)].points)
            n = int(counts.get(t_last, 0))
            total = sum(counts.get(t, 0.0) for t, _ in mean.points)
            range_mean = (sum(v * counts.get(t, 0.0) for t, v in mean.points) / total
                          if total else last)
            # One slot per interval across the range, so gaps show as gaps (and only gaps do).
            slots: list[float | None] = [None] * n_slots
            for t, v in mean.points:
                i = int((t.timestamp() - first) // ctx.interval_s)
                slots[min(n_slots - 1, max(0, i))] = v
            service = labels[0] if labels else ""
            firing = tuple(sorted({r.rule.uid.removeprefix("ragpulse-") for r in results
                                   for i in r.firing if _concerns(i.labels, r.rule.uid, metric,
                                                                  service, settings)}))
            lines.append(MetricLine(metric, service, last, low, high, n, tuple(slots), firing,
                                    range_mean, int(total), t_last, ctx.interval_s))
    return lines, results, errors


_NOT_RAG_NOTE = "no question, answer or LLM call (index building): counted, no rows written"


@dataclass(frozen=True)
class ReasonLine:
    """One reason traces were unscorable: how many traces, and the advice for it."""

    reason: str
    traces: int
    advice: str


def unscorable_traces(client: Any, settings: DashboardsSettings, t0: datetime,
                      t1: datetime) -> tuple[list[ReasonLine], list[str]]:
    """Traces written as null rows in ``[t0, t1]`` by reason, most first, each with the remedy
    (the "Unscorable traces by reason" panel summed over the range), then the traces that were
    no RAG query (``not_rag``, no rows; from the traces panel), and query errors. Blocks on the
    queries."""
    by_key = {p.key: p for p in panels(settings)}
    ctx = context(t0, t1)
    totals: dict[str, float] = {}
    not_rag = 0.0
    errors: list[str] = []
    for key in ("health_unscorable", "health_traces"):
        frame = run_panel(client, by_key[key], ctx)
        if frame.error:
            errors.append(f"{key}: {frame.error}")
            continue
        for series in frame.series:
            label = series.labels[0] if series.labels else ""
            n = sum(v for _, v in series.points)
            if key == "health_unscorable":
                totals[label] = totals.get(label, 0.0) + n
            elif label == "traces_not_rag":
                not_rag += n
    lines = sorted((ReasonLine(r, int(n), ADVICE.get(r, "")) for r, n in totals.items() if n > 0),
                   key=lambda x: (-x.traces, x.reason))
    if not_rag > 0:
        lines.append(ReasonLine(NOT_RAG, int(not_rag), _NOT_RAG_NOTE))
    return lines, errors


def _concerns(labels: dict[str, str], uid: str, metric: str, service: str,
              s: DashboardsSettings) -> bool:
    """Whether a firing instance belongs on the (metric, service) line. Pipeline-wide rules
    (no service label) are listed in the rules table only."""
    if labels.get("service") != service:
        return False
    if "metric" in labels:
        return labels["metric"] == metric
    # The faithfulness rules carry no metric label: they watch one metric.
    return metric == s.alerts.faithfulness_metric or not uid.startswith("ragpulse-faithfulness-")


def judges_line(settings: DashboardsSettings, levels: Mapping[str, float]) -> str:
    """Which judges scored the range's faithfulness and the alert level each one's absolute
    rule applies (``levels``: :func:`~ragpulse.dashboards.frames.judge_levels`); empty when
    none did. A judge without a level of its own (a user's ``nli`` model, ``llm``) is under the
    general one, and the line says so."""
    if not levels:
        return ""
    own = settings.alerts.faithfulness_min_by_judge
    parts = [f"{j} (alert level {v:g}{'' if j in own else ', the general level'})"
             for j, v in sorted(levels.items())]
    return (f"{settings.alerts.faithfulness_metric} judged by " + ", ".join(parts)
            + ": a service fires when its mean is below its judge's level; levels per judge: "
            "docs/judges.md")


def status_judges(client: Any, settings: DashboardsSettings, t0: datetime, t1: datetime) -> str:
    """:func:`judges_line` for the judges that scored faithfulness in ``[t0, t1]``. Blocks on
    one query."""
    return judges_line(settings, judge_levels(client, settings, context(t0, t1)))


def render_status(console: Any, lines: Sequence[MetricLine], results: Sequence[RuleResult],
                  errors: Sequence[str], title: str, reasons: Sequence[ReasonLine] = (),
                  since: str = "range", interval_s: float | None = None,
                  judges: str = "") -> None:
    """Print the summary with rich (tables; colours only on a terminal). Every column header
    names the window it covers: ``since`` (the whole range, e.g. ``24h``) or the last interval
    (``interval_s``, :func:`status_interval`; named even when no line has data). ``judges``
    (:func:`judges_line`) is printed under the table."""
    from rich.markup import escape as markup_escape
    from rich.table import Table

    def escape(text: str) -> str:
        # data cells: text, never markup (a service "[/]x" or "[link=...]"), and never a control
        # character a terminal acts on (ESC: a hidden hyperlink, a screen clear, a window title;
        # rows stored before labels were cleaned at ingest may hold them)
        return markup_escape(without_controls(text))

    seconds = interval_s or (lines[0].interval_s if lines else 0.0)
    iv = duration(seconds) if seconds else "interval"
    t = Table(title=title, title_justify="left", header_style="bold",
              caption=(f"mean, n: the whole {since}; last, its band and n: the last {iv} with "
                       f"scores (starting at the time shown); trend: {since} in {iv} steps"),
              caption_justify="left")
    for col, kw in (("metric", {"no_wrap": True}), ("service", {"no_wrap": True}),
                    (f"mean {since}", {"justify": "right"}), (f"n {since}", {"justify": "right"}),
                    (f"last {iv}", {"justify": "right", "no_wrap": True}),
                    ("95% band", {"justify": "right"}), (f"n last {iv}", {"justify": "right"}),
                    ("trend", {"no_wrap": True, "min_width": 24}), ("alerts", {})):
        t.add_column(col, **kw)
    for m in lines:
        colour = "green" if m.last >= 0.7 else "yellow" if m.last >= 0.5 else "red"
        at = f" @{m.last_at:%H:%M}" if m.last_at else ""
        # data cells are escaped: a service name such as "[/]x" or "[link=...]" is text, not markup
        t.add_row(escape(m.metric), escape(m.service), f"{m.range_mean:.3f}", str(m.range_samples),
                  f"[{colour}]{m.last:.3f}[/]{at}", f"{m.low:.2f}–{m.high:.2f}",
                  str(m.samples), sparkline(m.trend),
                  "[bold red]" + escape(", ".join(m.alerts)) + "[/]" if m.alerts else "[green]ok[/]")
    if not lines:
        t.add_row("(no scores in range)", "", "", "", "", "", "", "", "")
    console.print(t)
    if judges:
        console.print(escape(judges), highlight=False)
    if reasons:
        u = Table(title="traces without scores", title_justify="left", header_style="bold")
        u.add_column("reason", no_wrap=True)
        u.add_column("traces", justify="right")
        u.add_column("what to do")
        for r in reasons:
            u.add_row(escape(r.reason), str(r.traces), escape(r.advice))
        console.print(u)
    a = Table(title="alert rules", title_justify="left", header_style="bold")
    a.add_column("state")
    a.add_column("rule")
    a.add_column("firing where: value")
    for r in results:
        if r.error:
            a.add_row("[yellow]error[/]", escape(r.rule.title), escape(r.error[:100]))
        elif r.firing:
            who = "; ".join(instance_text(r.rule, i) for i in r.firing)
            a.add_row("[bold red]FIRING[/]", escape(r.rule.title), escape(who))
        else:
            a.add_row("[green]ok[/]", escape(r.rule.title), "")
    console.print(a)
    for e in errors:
        console.print(f"[yellow]query error[/] {escape(str(e))}", highlight=False)
