"""``pipeline_health`` rows: a component's own counters and gauges, per minute, in ClickHouse.

Words, as the whole project uses them: *pipeline health* is this table and what writes it (the
pipeline-health dashboard reads it); *health* alone is the ``/healthz`` and ``/readyz`` probes of
``ragpulse.deploy.health`` (``RAGPULSE_HEALTH__*``); *self-telemetry* is the ``stats()`` counters
and gauges that both, and ``/metrics``, report.

Components count from start-up (``spans_received`` only grows). The table wants, per minute, how
much each counter grew within that minute, and the last value of each gauge.
:class:`PipelineHealthSampler` remembers each counter's value at the start of the current minute;
every :meth:`~PipelineHealthSampler.sample` returns the rows for the minute so far. Flushing the
same minute again later writes a newer ``written_at`` and the ReplacingMergeTree keeps the newest,
so a component may sample as often as it likes without double counting.

:class:`PipelineHealthRecorder` is the one writer of these rows in a process, per component: a
thread that samples ``stats()`` every ``interval_s`` and submits the rows to a ``pipeline_health``
batch writer. The scorer's is built by ``ragpulse.scorer.pipeline.build_scorer``, the collector's
by ``ragpulse.deploy.health.start_observability``. Rows are best effort: scores are the data, these
rows describe the pipeline, so a failed write never holds anything else back.
"""

from __future__ import annotations

import logging
import math
import os
import socket
import threading
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from ragpulse.common import self_metrics

from .rows import PipelineHealthRow, safe_text

__all__ = ["PipelineHealthRecorder", "PipelineHealthSampler"]

log = logging.getLogger(__name__)

Value = int | float | Mapping[str, int | float]
Labelled = Mapping[str, Mapping[str, int | float]]


class PipelineHealthSampler:
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

    def sample(self, stats: Mapping[str, Value], labelled: Labelled | None = None) -> list[PipelineHealthRow]:
        """Rows for the current minute: counters' growth since the minute began, gauges' value.

        ``labelled`` adds counters split by a label under a name that ``stats`` may also hold as
        a total (``{"traces_unscorable": {"no_contexts": 3}}`` next to ``traces_unscorable: 3``):
        both rows are written, the total with label ``''``. Raises ``ValueError`` if the clock
        returns a naive datetime.
        """
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
        for name, by_label in (labelled or {}).items():
            for label, x in by_label.items():
                flat[(str(name), str(label))] = float(x)
        rows: list[PipelineHealthRow] = []
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
             now: datetime) -> PipelineHealthRow:
        return PipelineHealthRow(minute, self.component, self.instance, safe_text(name, 128),
                         safe_text(label, 256), kind, value, now)


class PipelineHealthRecorder:
    """Writes a component's declared stats as per-minute ``pipeline_health`` rows, periodically.

    Every ``interval_s`` a background thread reads ``stats()`` (and ``labelled()``, counters
    split by a label), keeps the counters and gauges :data:`ragpulse.common.SELF_METRICS`
    declares for ``component`` (``collector``, ``scorer``) that are numbers, turns them
    into rows (:class:`PipelineHealthSampler`) and submits them to a ``pipeline_health`` batch
    writer without blocking. ``connect`` (a zero-argument callable returning a clickhouse-connect
    client) is called lazily on that thread and again after a failure, so an unreachable
    ClickHouse never stops the component (the collector must keep ingesting without it). A
    sample that cannot be written (no connection yet, writer full or failing) is dropped and
    counted in ``samples_dropped``: the next sample rewrites the same minute, so only resolution
    is lost. The first failure after a success is logged as a warning, repeats at debug level.

    ``stats`` and ``labelled`` are called from the recorder's thread: they must be thread-safe.
    ``start()`` never blocks on ClickHouse and raises ``RuntimeError`` when called twice;
    ``shutdown()`` is idempotent, safe without ``start()``, writes one last sample (after the
    component drained, so the last minute holds the final counts) and flushes within
    ``timeout_s``. Thread-safe.
    """

    def __init__(
        self,
        component: str,
        stats: Callable[[], Mapping[str, Any]],
        connect: Callable[[], Any],
        database: str,
        *,
        labelled: Callable[[], Labelled] | None = None,
        interval_s: float = 15.0,
        instance: str | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        declared = [m for m in self_metrics(component).values() if m.label is None]
        gauges = [m.name for m in declared if m.kind == "gauge"]
        self.component = component
        self.database = database
        self.interval_s = interval_s
        self._stats = stats
        self._labelled = labelled
        self._connect = connect
        self._keys = [m.name for m in declared]
        self._sampler = PipelineHealthSampler(
            component, instance or f"{socket.gethostname()}:{os.getpid()}", gauges=gauges,
            clock=clock)
        self._writer: Any = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._state = "new"
        self._written = 0
        self._dropped = 0
        self._failing = False

    @property
    def instance(self) -> str:
        return self._sampler.instance

    @property
    def samples_written(self) -> int:
        return self._written

    @property
    def samples_dropped(self) -> int:
        return self._dropped

    def start(self) -> PipelineHealthRecorder:
        with self._lock:
            if self._state != "new":
                raise RuntimeError(f"recorder cannot start from state {self._state}")
            self._thread = threading.Thread(
                target=self._run, name="ragpulse-pipeline-health", daemon=True
            )
            self._thread.start()
            self._state = "running"
        return self

    def _ensure_writer(self) -> Any:
        if self._writer is None:
            from .writer import WriterSettings, build_pipeline_health_writer

            writer = build_pipeline_health_writer(
                self._connect(), self.database, WriterSettings(flush_interval_s=1.0)
            )
            writer.start()
            self._writer = writer
        return self._writer

    def record(self) -> None:
        """Sample now and submit the rows. Never raises; blocks only while connecting."""
        try:
            snapshot = self._stats()
            stats = {k: v for k in self._keys if (v := _number(snapshot.get(k))) is not None}
            labelled = self._labelled() if self._labelled is not None else None
            rows = self._sampler.sample(stats, labelled)
            if rows:
                self._ensure_writer().submit(rows).add_done_callback(self._done)
        except Exception as exc:
            self._failed(exc)

    def _failed(self, exc: BaseException) -> None:
        with self._lock:
            self._dropped += 1
            first, self._failing = not self._failing, True
        (log.warning if first else log.debug)("pipeline_health rows not written: %s", exc)

    def _done(self, fut: Any) -> None:
        exc = fut.exception()
        if exc is not None:
            self._failed(exc)
            return
        with self._lock:
            self._written += 1
            self._failing = False

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.record()

    def shutdown(self, timeout_s: float = 5.0) -> None:
        with self._lock:
            if self._state == "stopped":
                return
            was_running = self._state == "running"
            self._state = "stopped"
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
        if was_running:
            self.record()
        if self._writer is not None:
            self._writer.shutdown(timeout_s)


def _number(value: Any) -> float | None:
    """A finite number as a float (``True``/``False`` as 1/0), else ``None``."""
    if isinstance(value, (bool, int, float)) and math.isfinite(value):
        return float(value)
    return None
