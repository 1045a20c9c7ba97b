"""Self-telemetry into ClickHouse: the scorer's counters and gauges as ``pipeline_health`` rows.

Each flush writes, per counter, its increase within the current UTC minute (``kind='counter'``)
and, per gauge, its current value (``kind='gauge'``). The table is a ReplacingMergeTree keyed by
(component, name, label, instance, minute) with ``written_at`` as version, so flushing the same
minute several times overwrites its rows and ``FINAL`` shows the minute's latest figure.

Increases are measured from the last flush of the previous minute, so what happened between that
flush and the minute boundary is attributed to the new minute (at most ``interval_s`` of skew).
Health rows are best effort: a failed write is counted and logged, and never holds back offset
commits (scores are the data; these rows describe the pipeline).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from ..store.rows import HealthRow
from .telemetry import COUNTERS, GAUGES

__all__ = ["HealthReporter"]

log = logging.getLogger(__name__)

# Assembler counters are counters too (they live in the assembler, see assembly.py).
_ASSEMBLER_COUNTERS = (
    "spans_late",
    "traces_assembled",
    "traces_timed_out",
    "traces_evicted",
    "traces_rescored",
    "traces_drained",
)


class HealthReporter:
    """Turns ``stats()`` snapshots into ``HealthRow`` values and submits them to a writer.

    Not thread-safe: call :meth:`maybe_flush` from one thread (the scorer's consumer thread).
    Never blocks (``submit`` only queues) and never raises.
    """

    def __init__(
        self,
        writer: Any,
        *,
        component: str = "scorer",
        instance: str,
        interval_s: float = 15.0,
        wall_clock: Callable[[], float] = time.time,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._writer = writer
        self.component = component
        self.instance = instance
        self.interval_s = interval_s
        self._wall = wall_clock
        self._clock = clock
        self._last_flush = clock()
        self._minute: datetime | None = None
        self._base: dict[tuple[str, str], float] = {}
        self._last: dict[tuple[str, str], float] = {}
        self.flushes = 0
        self.errors = 0

    def due(self) -> bool:
        """Whether ``interval_s`` passed since the last flush (cheap: call it every loop)."""
        return self._clock() - self._last_flush >= self.interval_s

    def maybe_flush(
        self,
        stats: Mapping[str, Any],
        labelled: Mapping[str, Mapping[str, int]],
        *,
        force: bool = False,
    ) -> None:
        """Flush when ``interval_s`` passed (or ``force``). ``labelled`` holds counters split by a
        label, e.g. ``{"traces_unscorable": {"no_contexts": 3}}``."""
        now = self._clock()
        if not force and now - self._last_flush < self.interval_s:
            return
        self._last_flush = now
        try:
            self._writer.submit(self.rows(stats, labelled))
            self.flushes += 1
        except Exception as exc:  # best effort, see the module docstring
            self.errors += 1
            log.warning("health: rows not written: %s", exc)

    def rows(
        self, stats: Mapping[str, Any], labelled: Mapping[str, Mapping[str, int]]
    ) -> list[HealthRow]:
        """The rows for the current minute (and advance the per-minute bases)."""
        wall = datetime.fromtimestamp(self._wall(), tz=UTC)
        minute = wall.replace(second=0, microsecond=0)
        current: dict[tuple[str, str], float] = {}
        for name in (*COUNTERS, *_ASSEMBLER_COUNTERS):
            if isinstance(stats.get(name), (int, float)):
                current[(name, "")] = float(stats[name])
        for name, by_label in labelled.items():
            for label, value in by_label.items():
                current[(name, label)] = float(value)
        if minute != self._minute:
            # A new minute starts counting from the previous flush's values.
            self._base = dict(self._last)
            self._minute = minute
        self._last = current
        out = [
            HealthRow(
                minute,
                self.component,
                self.instance,
                name,
                label,
                "counter",
                value - self._base.get((name, label), 0.0),
                wall,
            )
            for (name, label), value in current.items()
        ]
        for name in GAUGES:
            value = stats.get(name)
            if isinstance(value, (int, float)):
                out.append(
                    HealthRow(
                        minute, self.component, self.instance, name, "", "gauge", float(value), wall
                    )
                )
        return out
