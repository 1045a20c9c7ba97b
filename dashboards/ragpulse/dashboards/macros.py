"""Expand the grafana-clickhouse-datasource macros and Grafana template variables, as Grafana and
the plugin do, so panel and alert SQL can run without Grafana (``ragpulse report``/``status``,
the tests against chDB).

Order, as in Grafana: the plugin front end replaces ``$__conditionalAll(cond, $var)`` first (with
``1=1`` when the variable is "All"), Grafana then interpolates template variables, and the
plugin back end expands the time macros (README "Macros"; ``pkg/macros`` of the plugin):

=========================  =================================================================
``$__timeFilter(c)``       ``c >= toDateTime(FROM) AND c <= toDateTime(TO)`` (epoch seconds)
``$__timeFilter_ms(c)``    ``c >= fromUnixTimestamp64Milli(FROMms) AND c <= …(TOms)``
``$__dateFilter(c)``       ``c >= toDate('YYYY-MM-DD') AND c <= toDate('YYYY-MM-DD')``
``$__fromTime``            ``toDateTime(FROM)``; ``$__toTime`` likewise
``$__fromTime_ms``         ``fromUnixTimestamp64Milli(FROMms)``; ``$__toTime_ms`` likewise
``$__interval_s``          the interval in whole seconds (at least 1)
``$__timeInterval(c)``     ``toStartOfInterval(toDateTime(c), INTERVAL N second)``
``$__timeInterval_ms(c)``  ``toStartOfInterval(toDateTime64(c, 3), INTERVAL N millisecond)``
=========================  =================================================================

Template variables: ``$name``, ``${name}``, ``${name:format}`` (formats ``singlequote``,
``doublequote``, ``csv``, ``raw``, ``sqlstring``) and ``[[name]]``. An "All" variable may only
appear inside ``$__conditionalAll``: interpolating it anywhere else raises, which keeps every
query from silently expanding to an unbounded ``IN`` list. Pure functions; thread-safe.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

__all__ = ["ALL", "MacroError", "QueryContext", "expand"]

ALL = None
"""The value of a template variable whose selection is "All"."""


class MacroError(ValueError):
    """A macro or variable cannot be expanded (unknown variable, bad arguments, All misuse)."""


@dataclass(frozen=True)
class QueryContext:
    """The time range, interval and variable selection of one query evaluation."""

    time_from: datetime
    time_to: datetime
    interval_s: float = 60.0
    variables: Mapping[str, Sequence[str] | None] = field(default_factory=dict)
    """name -> selected values, or :data:`ALL` (None)."""

    def __post_init__(self) -> None:
        for t in (self.time_from, self.time_to):
            if t.tzinfo is None:
                raise MacroError(f"time {t!r} has no timezone")
        if self.time_to < self.time_from:
            raise MacroError("time_to is before time_from")
        if self.interval_s <= 0:
            raise MacroError("interval_s must be positive")

    @property
    def from_s(self) -> int:
        """``time_from`` as Unix seconds."""
        return int(self.time_from.timestamp())

    @property
    def to_s(self) -> int:
        """``time_to`` as Unix seconds."""
        return int(self.time_to.timestamp())


def _find_call(sql: str, name: str, start: int = 0) -> tuple[int, int, list[str]] | None:
    """Locate ``name(`` … ``)`` with balanced parentheses and quotes: (start, end, args)."""
    i = sql.find(name + "(", start)
    if i < 0:
        return None
    j = i + len(name) + 1
    depth, quote, args, cur = 1, "", [], []
    while j < len(sql):
        ch = sql[j]
        if quote:
            cur.append(ch)
            if ch == "\\" and j + 1 < len(sql):
                cur.append(sql[j + 1])
                j += 1
            elif ch == quote:
                quote = ""
        elif ch in "'\"`":
            quote = ch
            cur.append(ch)
        elif ch == "(":
            depth += 1
            cur.append(ch)
        elif ch == ")":
            depth -= 1
            if depth == 0:
                args.append("".join(cur).strip())
                return i, j + 1, args
            cur.append(ch)
        elif ch == "," and depth == 1:
            args.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
        j += 1
    raise MacroError(f"unbalanced parentheses after {name}( at offset {i}")


def _var_name(ref: str) -> str:
    m = re.fullmatch(r"\$\{?(\w+)(?::\w+)?\}?|\[\[(\w+)\]\]", ref.strip())
    if not m:
        raise MacroError(f"{ref!r} is not a template variable reference")
    return m.group(1) or m.group(2)


def _conditional_all(sql: str, ctx: QueryContext) -> str:
    out, pos = [], 0
    while True:
        call = _find_call(sql, "$__conditionalAll", pos)
        if call is None:
            out.append(sql[pos:])
            return "".join(out)
        i, j, args = call
        if len(args) != 2:
            # The plugin leaves such a macro unexpanded, and ClickHouse then fails on it; a
            # condition with a top-level comma must be wrapped in parentheses.
            raise MacroError(f"$__conditionalAll takes exactly (condition, $variable), got {args}")
        cond, ref = args
        name = _var_name(ref)
        if name not in ctx.variables:
            raise MacroError(f"$__conditionalAll refers to unknown variable {name!r}")
        out.append(sql[pos:i])
        out.append("1=1" if ctx.variables[name] is ALL else cond)
        pos = j


def _quote(v: str, q: str) -> str:
    # As Grafana does it (its format registry): the quote escaped with a backslash, the
    # backslash itself NOT escaped. So a value ending in a backslash would end the literal
    # early; the scorer stores no backslash in a label (``ragpulse.scorer.store.safe_label``).
    return q + v.replace(q, "\\" + q) + q


def _format(values: Sequence[str], fmt: str) -> str:
    if fmt == "":
        # The plugin's own formatter for a multi-value selection: quoted and joined, without
        # escaping (``'${value.join("','")}'``). ragpulse queries always name a format instead.
        return "'" + "','".join(values) + "'"
    if fmt == "singlequote":
        # Grafana's singlequote format: each value quoted, quotes escaped with a backslash.
        return ",".join(_quote(v, "'") for v in values)
    if fmt == "sqlstring":
        # Grafana's sqlstring format: each value quoted, quotes doubled.
        return ",".join("'" + v.replace("'", "''") + "'" for v in values)
    if fmt == "doublequote":
        return ",".join(_quote(v, '"') for v in values)
    if fmt in ("csv", "raw"):
        return ",".join(values)
    raise MacroError(f"unsupported variable format {fmt!r}")


_VAR = re.compile(r"\$\{(\w+)(?::(\w+))?\}|\[\[(\w+)\]\]|\$(?!__)(\w+)")


def _variables(sql: str, ctx: QueryContext) -> str:
    def sub(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(3) or m.group(4)
        fmt = m.group(2) or ""
        if name not in ctx.variables:
            raise MacroError(f"unknown template variable ${name}")
        values = ctx.variables[name]
        if values is ALL:
            raise MacroError(f"variable ${name} is 'All' outside $__conditionalAll")
        if not values:
            raise MacroError(f"variable ${name} has no value selected")
        return _format(values, fmt)

    return _VAR.sub(sub, sql)


def _one_arg(name: str, args: list[str]) -> str:
    if len(args) != 1 or not args[0]:
        raise MacroError(f"{name} takes exactly one column argument")
    return args[0]


def _time_macros(sql: str, ctx: QueryContext) -> str:
    f_s, t_s = ctx.from_s, ctx.to_s
    f_ms, t_ms = int(ctx.time_from.timestamp() * 1000), int(ctx.time_to.timestamp() * 1000)
    step = max(1, int(ctx.interval_s))
    step_ms = max(1, int(ctx.interval_s * 1000))
    d_from = ctx.time_from.astimezone(UTC).strftime("%Y-%m-%d")
    d_to = ctx.time_to.astimezone(UTC).strftime("%Y-%m-%d")
    funcs = {
        "$__timeFilter_ms": lambda c: (f"{c} >= fromUnixTimestamp64Milli({f_ms}) AND "
                                       f"{c} <= fromUnixTimestamp64Milli({t_ms})"),
        "$__timeFilter": lambda c: f"{c} >= toDateTime({f_s}) AND {c} <= toDateTime({t_s})",
        "$__dateFilter": lambda c: f"{c} >= toDate('{d_from}') AND {c} <= toDate('{d_to}')",
        "$__timeInterval_ms": lambda c: (f"toStartOfInterval(toDateTime64({c}, 3), "
                                         f"INTERVAL {step_ms} millisecond)"),
        "$__timeInterval": lambda c: f"toStartOfInterval(toDateTime({c}), INTERVAL {step} second)",
    }
    # Longest names first so $__timeFilter does not match the prefix of $__timeFilter_ms.
    for name in sorted(funcs, key=len, reverse=True):
        while True:
            call = _find_call(sql, name)
            if call is None:
                break
            i, j, args = call
            sql = sql[:i] + funcs[name](_one_arg(name, args)) + sql[j:]
    if "$__dateTimeFilter" in sql:
        raise MacroError("$__dateTimeFilter is not used by ragpulse queries")
    consts = {
        "$__fromTime_ms": f"fromUnixTimestamp64Milli({f_ms})",
        "$__toTime_ms": f"fromUnixTimestamp64Milli({t_ms})",
        "$__fromTime": f"toDateTime({f_s})",
        "$__toTime": f"toDateTime({t_s})",
        "$__interval_s": str(step),
    }
    for name in sorted(consts, key=len, reverse=True):
        sql = re.sub(re.escape(name) + r"(?!\w)", consts[name], sql)
    left = re.search(r"\$__\w+", sql)
    if left:
        raise MacroError(f"unknown macro {left.group(0)}")
    return sql


def expand(sql: str, ctx: QueryContext) -> str:
    """``sql`` with every macro and template variable replaced. Raises :class:`MacroError`."""
    return _time_macros(_variables(_conditional_all(sql, ctx), ctx), ctx)

