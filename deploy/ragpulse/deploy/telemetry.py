"""Self-telemetry of the collector and the scorer: every exported metric declared once.

The components count in plain ``stats()`` dicts (names and meanings declared in
:mod:`ragpulse.collector.telemetry` and :mod:`ragpulse.scorer.pipeline.telemetry`). This module
maps those keys to exported metrics, once, in :data:`METRICS`:

* Prometheus text exposition (``/metrics``, served by :mod:`ragpulse.deploy.health`):
  ``ragpulse_<component>_<key>`` with ``_total`` on counters, as the Prometheus naming rules ask
  (https://prometheus.io/docs/practices/naming/).
* OpenTelemetry metrics over OTLP/HTTP (optional, ``RAGPULSE_TELEMETRY__OTLP_ENDPOINT``):
  ``ragpulse.<component>.<key>`` as observable counters / gauges read from the same ``stats()``
  at each export, so both paths always agree.
* ClickHouse copies (:class:`HealthRecorder`): per-minute ``pipeline_health`` rows of the same
  declared keys, which the pipeline-health dashboard reads. The scorer writes them to its own
  store by default; the collector when ``RAGPULSE_TELEMETRY__CLICKHOUSE`` names one.

Keys a component reports that are not declared here are not exported; :func:`undeclared` lists
them so a test catches drift between a component and this table.
"""

from __future__ import annotations

import logging
import math
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = [
    "METRICS",
    "HealthRecorder",
    "MetricSpec",
    "OtlpMetricsExporter",
    "StatsSource",
    "TelemetrySettings",
    "render_prometheus",
    "undeclared",
]

log = logging.getLogger(__name__)

Component = Literal["collector", "scorer"]
Kind = Literal["counter", "gauge"]


@dataclass(frozen=True)
class MetricSpec:
    """One exported metric: the ``stats()`` key it reads, its kind, unit and meaning."""

    component: Component
    key: str
    kind: Kind
    help: str
    unit: str = "1"

    @property
    def prometheus_name(self) -> str:
        base = f"ragpulse_{self.component}_{self.key}"
        return base + "_total" if self.kind == "counter" else base

    @property
    def otel_name(self) -> str:
        return f"ragpulse.{self.component}.{self.key}"


def _unit(key: str) -> str:
    return "By" if key.startswith("bytes_") or key.endswith("_bytes") else "1"


def _collector_specs() -> list[MetricSpec]:
    from ragpulse.collector.telemetry import COUNTERS

    out = []
    for key, meaning in COUNTERS.items():
        gauge = meaning.startswith("Gauge:")
        text = meaning.removeprefix("Gauge:").strip()
        out.append(MetricSpec("collector", key, "gauge" if gauge else "counter", text, _unit(key)))
    return out


# Keys the scorer's stats() adds beyond pipeline/telemetry.py: the assembler's counters, the
# decoder's failure count and the ClickHouse writer's counters (prefixed ``writer_``). Their
# owners count them without a declaration module, so their meanings are declared here.
_SCORER_EXTRA: dict[str, tuple[Kind, str]] = {
    "spans_assembled": ("counter", "spans added to the assembler's trace buffers"),
    "spans_late": ("counter", "spans of already emitted traces (ignored or re-scored)"),
    "traces_assembled": (
        "counter",
        "traces emitted complete (root span seen plus the grace period)",
    ),
    "traces_timed_out": ("counter", "traces emitted without a root span after assembly.max_wait_s"),
    "traces_evicted": ("counter", "traces evicted from the full assembly buffer"),
    "traces_rescored": ("counter", "emitted traces reopened by late spans (late_spans=rescore)"),
    "traces_drained": ("counter", "traces emitted early because the scorer was shutting down"),
    "records_undecodable": ("counter", "records the decoder could not read (dead-lettered)"),
    "writer_rows_submitted": ("counter", "score rows accepted by the ClickHouse writer"),
    "writer_rows_refused": ("counter", "score rows refused by the full writer (backpressure)"),
    "writer_rows_written": ("counter", "score rows ClickHouse acknowledged (writer's count)"),
    "writer_rows_failed": ("counter", "score rows whose insert failed for good or at shutdown"),
    "writer_batches_written": ("counter", "insert calls ClickHouse acknowledged"),
    "writer_insert_retries": ("counter", "insert attempts retried after a retryable error"),
    "writer_insert_errors": ("counter", "failed insert attempts of any kind"),
    "writer_pending_rows": ("gauge", "rows held by the writer, not yet acknowledged"),
}


def _scorer_specs() -> list[MetricSpec]:
    from ragpulse.scorer.pipeline.telemetry import COUNTERS, GAUGES

    out = [MetricSpec("scorer", k, "counter", v) for k, v in COUNTERS.items()]
    out += [MetricSpec("scorer", k, "gauge", v) for k, v in GAUGES.items()]
    out += [MetricSpec("scorer", k, kind, text) for k, (kind, text) in _SCORER_EXTRA.items()]
    return out


def _index(specs: Iterable[MetricSpec]) -> dict[str, dict[str, MetricSpec]]:
    out: dict[str, dict[str, MetricSpec]] = {}
    for s in specs:
        by_key = out.setdefault(s.component, {})
        if s.key in by_key:
            raise ValueError(f"metric {s.component}.{s.key} declared twice")
        by_key[s.key] = s
    return out


METRICS: dict[str, dict[str, MetricSpec]] = _index([*_collector_specs(), *_scorer_specs()])
"""``{component: {stats key: MetricSpec}}``: the one table of exported self-telemetry."""


def undeclared(component: str, stats: Mapping[str, Any]) -> list[str]:
    """Numeric ``stats`` keys of ``component`` that :data:`METRICS` does not export."""
    known = METRICS.get(component, {})
    return sorted(k for k, v in stats.items() if _number(v) is not None and k not in known)


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float) and math.isfinite(value):
        return float(value)
    return None


@dataclass(frozen=True)
class StatsSource:
    """A component's ``stats()`` callable; must be thread-safe and cheap (it is called per scrape)."""

    component: Component
    stats: Callable[[], Mapping[str, Any]]


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _fmt_value(v: float) -> str:
    return str(int(v)) if v.is_integer() and abs(v) < 2**53 else repr(v)


def render_prometheus(sources: Iterable[StatsSource], *, build_version: str | None = None) -> str:
    """Prometheus text exposition format 0.0.4 of every declared metric the sources report.

    Each source's ``stats()`` is read once. A source that raises is skipped and reported as
    ``ragpulse_telemetry_source_up{component=...} 0`` instead of failing the whole scrape.
    Never raises for odd stats values (non-numbers are skipped). Thread-safe.
    """
    lines: list[str] = []
    up: list[tuple[str, int]] = []
    for src in sources:
        try:
            snapshot = dict(src.stats())
        except Exception:  # a broken component must not take the scrape (and its liveness) down
            log.exception("stats() of %s failed", src.component)
            up.append((src.component, 0))
            continue
        up.append((src.component, 1))
        for key, spec in METRICS.get(src.component, {}).items():
            value = _number(snapshot.get(key))
            if value is None:
                continue
            name = spec.prometheus_name
            lines.append(f"# HELP {name} {_escape_help(spec.help)}")
            lines.append(f"# TYPE {name} {spec.kind}")
            lines.append(f"{name} {_fmt_value(value)}")
    lines.append("# HELP ragpulse_telemetry_source_up 1 when the component's stats() answered.")
    lines.append("# TYPE ragpulse_telemetry_source_up gauge")
    for component, ok in up:
        lines.append(f'ragpulse_telemetry_source_up{{component="{component}"}} {ok}')
    if build_version is not None:
        lines.append("# HELP ragpulse_build_info The ragpulse version serving these metrics.")
        lines.append("# TYPE ragpulse_build_info gauge")
        lines.append(f'ragpulse_build_info{{version="{_label(build_version)}"}} 1')
    return "\n".join(lines) + "\n"


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


# --------------------------------------------------------------------------------------------
# OTLP


class TelemetrySettings(BaseModel):
    """OTLP export of self-telemetry (``RAGPULSE_TELEMETRY__*``). Off unless an endpoint is set.

    Needs the ``otlp`` extra (``pip install 'ragpulse[otlp]'``: the OTLP/HTTP metric exporter);
    a configured endpoint without it fails at start-up with that instruction.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    otlp_endpoint: str | None = Field(
        None,
        description="OTLP/HTTP metrics URL, e.g. http://otelcol:4318/v1/metrics; unset: no export",
    )
    otlp_headers: dict[str, str] = Field(
        default_factory=dict, description="extra request headers (e.g. an API key); JSON in the env"
    )
    export_interval_s: float = Field(15.0, ge=1.0, le=3600.0, description="seconds between exports")
    export_timeout_s: float = Field(10.0, gt=0.0, le=300.0, description="timeout of one export")
    service_namespace: str = Field("ragpulse", min_length=1)
    clickhouse: str | None = Field(
        None,
        description="ClickHouse DSN for per-minute pipeline_health rows (the scorer defaults "
        "to its own store; the collector writes none unless set)",
    )
    database: str = Field(
        "rag",
        pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,62}$",
        description="database of pipeline_health when `clickhouse` is set",
    )
    health_interval_s: float = Field(
        15.0,
        ge=1.0,
        le=60.0,
        description="seconds between pipeline_health flushes (the current "
        "minute is rewritten; ReplacingMergeTree keeps the newest)",
    )
    instance: str | None = Field(
        None, description="instance name in rows and resources; default host:pid"
    )

    @field_validator("otlp_endpoint")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith(("http://", "https://")):
            raise ValueError(f"{v!r}: expected an http(s):// OTLP/HTTP metrics URL")
        return v

    @property
    def enabled(self) -> bool:
        return self.otlp_endpoint is not None


class OtlpMetricsExporter:
    """Pushes the declared metrics of ``sources`` over OTLP/HTTP every ``export_interval_s``.

    Uses the OpenTelemetry SDK: a ``MeterProvider`` with a ``PeriodicExportingMetricReader`` and
    one observable counter or gauge per :class:`MetricSpec`, whose callbacks read ``stats()``
    (one snapshot per collection cycle, shared by all callbacks of that cycle). The provider is
    private to this object, never installed as the global one, so the app's own telemetry is
    untouched. ``start()`` raises ``RuntimeError`` when the exporter package is missing;
    ``shutdown()`` is idempotent, safe without ``start()``, and flushes one last export
    (blocking up to about ``export_timeout_s``). Export failures are logged by the SDK and
    retried at the next interval (the SDK's exporter retries retryable HTTP codes itself).
    """

    def __init__(
        self,
        settings: TelemetrySettings,
        sources: Iterable[StatsSource],
        *,
        instance: str | None = None,
    ) -> None:
        if settings.otlp_endpoint is None:
            raise ValueError("TelemetrySettings.otlp_endpoint is not set")
        self.settings = settings
        self.sources = list(sources)
        self.instance = instance or f"{socket.gethostname()}:{os.getpid()}"
        self._provider: Any = None
        self._lock = threading.Lock()
        self._state = "new"
        self._cache: dict[str, tuple[float, Mapping[str, Any]]] = {}

    def start(self) -> OtlpMetricsExporter:
        try:
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        except ImportError as exc:
            raise RuntimeError(
                "RAGPULSE_TELEMETRY__OTLP_ENDPOINT is set but the OTLP/HTTP exporter is not "
                "installed: pip install 'ragpulse[otlp]'"
            ) from exc
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
        from opentelemetry.sdk.resources import Resource

        with self._lock:
            if self._state != "new":
                raise RuntimeError(f"exporter cannot start from state {self._state}")
            s = self.settings
            exporter = OTLPMetricExporter(
                endpoint=s.otlp_endpoint, headers=dict(s.otlp_headers), timeout=s.export_timeout_s
            )
            reader = PeriodicExportingMetricReader(
                exporter,
                export_interval_millis=s.export_interval_s * 1000,
                export_timeout_millis=s.export_timeout_s * 1000,
            )
            components = sorted({src.component for src in self.sources})
            resource = Resource.create(
                {
                    "service.name": "ragpulse-" + "-".join(components),
                    "service.namespace": s.service_namespace,
                    "service.instance.id": self.instance,
                }
            )
            self._provider = MeterProvider(resource=resource, metric_readers=[reader])
            meter = self._provider.get_meter("ragpulse.deploy.telemetry")
            for src in self.sources:
                for spec in METRICS.get(src.component, {}).values():
                    make = (
                        meter.create_observable_counter
                        if spec.kind == "counter"
                        else meter.create_observable_gauge
                    )
                    make(
                        spec.otel_name,
                        callbacks=[self._callback(src, spec)],
                        unit=spec.unit,
                        description=spec.help,
                    )
            self._state = "running"
        return self

    def _snapshot(self, src: StatsSource) -> Mapping[str, Any]:
        # All callbacks of one collection run within milliseconds: reuse one snapshot so the
        # exported values are consistent with each other and stats() runs once per cycle.
        now = time.monotonic()
        cached = self._cache.get(src.component)
        if cached is not None and now - cached[0] < 0.5:
            return cached[1]
        snap = dict(src.stats())
        self._cache[src.component] = (now, snap)
        return snap

    def _callback(self, src: StatsSource, spec: MetricSpec) -> Callable[[Any], list[Any]]:
        from opentelemetry.metrics import Observation

        def observe(_options: Any) -> list[Any]:
            try:
                value = _number(self._snapshot(src).get(spec.key))
            except Exception:
                log.exception("stats() of %s failed", src.component)
                return []
            return [] if value is None else [Observation(value)]

        return observe

    def force_flush(self, timeout_s: float = 10.0) -> bool:
        """Export now; blocks up to ``timeout_s``. ``False`` when not running or it failed."""
        provider = self._provider
        if provider is None or self._state != "running":
            return False
        return bool(provider.force_flush(timeout_millis=int(timeout_s * 1000)))

    def shutdown(self) -> None:
        with self._lock:
            if self._state in ("stopped",):
                return
            provider, self._provider = self._provider, None
            self._state = "stopped"
        if provider is not None:
            provider.shutdown()


class HealthRecorder:
    """Writes a component's declared stats as per-minute ``pipeline_health`` rows, periodically.

    Every ``interval_s`` a background thread samples ``stats()`` through the store's
    ``HealthSampler`` (counters become their growth within the minute, gauges their last value)
    and submits the rows to a ``pipeline_health`` batch writer without blocking. ``connect`` (a
    zero-argument callable returning a clickhouse-connect client) is called lazily on that
    thread and again after a failure, so an unreachable ClickHouse never stops the component
    (the collector must keep ingesting without it). A sample that cannot be written (no
    connection yet, writer full or failing) is dropped and counted in ``samples_dropped``: the
    next sample rewrites the same minute, so only resolution is lost. The first failure after a
    success is logged as a warning, repeats at debug level.

    ``start()`` never blocks on ClickHouse; ``shutdown()`` is idempotent, safe without
    ``start()``, writes one last sample and flushes within ``timeout_s``. Thread-safe.
    """

    def __init__(
        self,
        source: StatsSource,
        connect: Callable[[], Any],
        database: str,
        *,
        interval_s: float = 15.0,
        instance: str | None = None,
    ) -> None:
        from ragpulse.scorer.store import HealthSampler

        specs = METRICS.get(source.component, {})
        self.source = source
        self.database = database
        self.interval_s = interval_s
        self._connect = connect
        self._keys = tuple(specs)
        self._sampler = HealthSampler(
            source.component,
            instance or f"{socket.gethostname()}:{os.getpid()}",
            gauges=[k for k, sp in specs.items() if sp.kind == "gauge"],
        )
        self._writer: Any = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._state = "new"
        self._written = 0
        self._dropped = 0
        self._failing = False

    @property
    def samples_written(self) -> int:
        return self._written

    @property
    def samples_dropped(self) -> int:
        return self._dropped

    def start(self) -> HealthRecorder:
        with self._lock:
            if self._state != "new":
                raise RuntimeError(f"recorder cannot start from state {self._state}")
            self._thread = threading.Thread(
                target=self._run, name="ragpulse-health-rows", daemon=True
            )
            self._thread.start()
            self._state = "running"
        return self

    def _ensure_writer(self) -> Any:
        if self._writer is None:
            from ragpulse.scorer.store.writer import WriterSettings, build_health_writer

            writer = build_health_writer(
                self._connect(), self.database, WriterSettings(flush_interval_s=1.0)
            )
            writer.start()
            self._writer = writer
        return self._writer

    def record(self) -> None:
        """Sample now and submit the rows. Never raises; blocks only while connecting."""
        try:
            snapshot = self.source.stats()
            stats = {k: v for k in self._keys if (v := _number(snapshot.get(k))) is not None}
            rows = self._sampler.sample(stats)
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
