"""Turn a component's cumulative ``stats()`` into per-minute ``pipeline_health`` rows.

Components count from start-up (``spans_received`` only grows). The table wants, per minute, how
much each counter grew within that minute, and the last value of each gauge. A
:class:`HealthSampler` remembers each counter's value at the start of the current minute; every
:meth:`~HealthSampler.sample` returns the rows for the minute so far. Flushing the same minute
again later writes a newer ``written_at`` and the ReplacingMergeTree keeps the newest, so a
component may sample as often as it likes (every status line, say) without double counting.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime

from .rows import HealthRow, safe_text

__all__ = ["HealthSampler"]

Value = int | float | Mapping[str, int | float]


class HealthSampler:
    """Per-minute rows from cumulative counters and instantaneous gauges. Thread-safe.

    ``stats`` values are numbers or ``{label: number}`` maps (e.g. unscorable traces by reason);
    names listed in ``gauges`` are gauges, every other name a monotonic counter. A counter that
    goes down (the component restarted) restarts its baseline instead of writing a negative.
    """

    def __init__(self, component: str, instance: str, *, gauges: Iterable[str] = (),
                 clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.component = safe_text(component, 64)
        self.instance = safe_text(instance, 128)
        self.gauges = frozenset(gauges)
        self._clock = clock
        self._lock = threading.Lock()
        self._minute: datetime | None = None
        self._base: dict[tuple[str, str], float] = {}
        self._last: dict[tuple[str, str], float] = {}

    def sample(self, stats: Mapping[str, Value]) -> list[HealthRow]:
        """Rows for the current minute: counters' growth since the minute began, gauges' value."""
        now = self._clock()
        if now.tzinfo is None:
            raise ValueError("the clock must return aware datetimes")
        now = now.astimezone(UTC)
        minute = now.replace(second=0, microsecond=0)
        flat: dict[tuple[str, str], float] = {}
        for name, v in stats.items():
            if isinstance(v, Mapping):
                for label, x in v.items():
                    flat[(str(name), str(label))] = float(x)
            elif isinstance(v, (int, float)) and not isinstance(v, bool):
                flat[(str(name), "")] = float(v)
        rows: list[HealthRow] = []
        with self._lock:
            if minute != self._minute:
                # A new minute: what was counted up to now belongs to earlier minutes.
                self._minute = minute
                self._base = dict(self._last)
            for key, value in flat.items():
                name, label = key
                if name in self.gauges:
                    rows.append(self._row(minute, name, label, "gauge", value, now))
                    continue
                base = self._base.get(key, 0.0)
                if value < base:  # restarted: count from zero again
                    base = self._base[key] = 0.0
                rows.append(self._row(minute, name, label, "counter", value - base, now))
            self._last.update(flat)
        return rows

    def _row(self, minute: datetime, name: str, label: str, kind: str, value: float,
             now: datetime) -> HealthRow:
        return HealthRow(minute, self.component, self.instance, safe_text(name, 128),
                         safe_text(label, 256), kind, value, now)
