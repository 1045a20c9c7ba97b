"""Self-telemetry of the collector, the scorer and the ClickHouse facade, exported.

The components count in plain ``stats()`` dicts; every key is declared once, with its kind,
unit, meaning and labels, in :data:`ragpulse.common.SELF_METRICS` (:data:`METRICS` indexes it
by component). This module exports them:

* Prometheus text exposition (``/metrics``, served by :mod:`ragpulse.deploy.health`):
  ``ragpulse_<component>_<key>`` with ``_total`` on counters, as the Prometheus naming rules ask
  (https://prometheus.io/docs/practices/naming/).
* OpenTelemetry metrics over OTLP/HTTP (optional, ``RAGPULSE_TELEMETRY__OTLP_ENDPOINT``):
  ``ragpulse.<component>.<key>`` as observable counters / gauges read from the same ``stats()``
  at each export, so both paths always agree.
* ClickHouse copies: per-minute ``pipeline_health`` rows of the same declared keys, which the
  pipeline-health dashboard reads, written by one
  :class:`~ragpulse.scorer.store.PipelineHealthRecorder` per component and process
  (:func:`pipeline_health_recorder`). The scorer's is built with the scorer and writes to its
  own store; the collector's is started by ``start_observability`` when
  ``RAGPULSE_TELEMETRY__CLICKHOUSE`` names a store.

Keys a component reports that are not declared are not exported; :func:`undeclared` lists
them so a test catches drift between a component and the declarations.
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
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ragpulse.common import SelfMetric, self_metrics
from ragpulse.scorer.store import DatabaseName

__all__ = [
    "METRICS",
    "MetricSpec",
    "OtlpMetricsExporter",
    "StatsSource",
    "TelemetrySettings",
    "pipeline_health_recorder",
    "render_prometheus",
    "undeclared",
]

log = logging.getLogger(__name__)

Component = Literal["collector", "scorer", "facade"]

MetricSpec = SelfMetric
"""The declaration of one exported metric (its ``stats()`` key is ``name``)."""

METRICS: dict[str, dict[str, SelfMetric]] = {c: self_metrics(c) for c in get_args(Component)}
"""``{component: {stats key: declaration}}``: :data:`ragpulse.common.SELF_METRICS` by component."""


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
            samples = _samples(spec, snapshot.get(key))
            if not samples:
                continue
            name = spec.prometheus_name
            lines.append(f"# HELP {name} {_escape_help(spec.help)}")
            lines.append(f"# TYPE {name} {spec.kind}")
            for labels, value in samples:
                where = "".join(f'{{{k}="{_label(v)}"}}' for k, v in labels.items())
                lines.append(f"{name}{where} {_fmt_value(value)}")
    lines.append("# HELP ragpulse_telemetry_source_up 1 when the component's stats() answered.")
    lines.append("# TYPE ragpulse_telemetry_source_up gauge")
    for component, ok in up:
        lines.append(f'ragpulse_telemetry_source_up{{component="{component}"}} {ok}')
    if build_version is not None:
        lines.append("# HELP ragpulse_build_info The ragpulse version serving these metrics.")
        lines.append("# TYPE ragpulse_build_info gauge")
        lines.append(f'ragpulse_build_info{{version="{_label(build_version)}"}} 1')
    return "\n".join(lines) + "\n"


def _samples(spec: SelfMetric, value: Any) -> list[tuple[dict[str, str], float]]:
    """``(labels, value)`` of each sample of ``spec`` in a ``stats()`` value: one unlabelled,
    or one per entry of a labelled metric's mapping; non-numbers are left out."""
    if spec.label is None:
        number = _number(value)
        return [] if number is None else [({}, number)]
    if not isinstance(value, Mapping):
        return []
    out = []
    for label_value, raw in value.items():
        number = _number(raw)
        if number is not None:
            out.append(({spec.label: str(label_value)}, number))
    return out


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
        description="ClickHouse DSN for the collector's per-minute pipeline_health rows (none "
        "unless set; the scorer writes its rows to its own store, RAGPULSE_CLICKHOUSE)",
    )
    database: DatabaseName = Field("rag", description="database of pipeline_health when `clickhouse` is set")
    pipeline_health_interval_s: float = Field(
        15.0,
        ge=1.0,
        le=60.0,
        description="seconds between the collector's pipeline_health flushes (the current "
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
        """Whether an OTLP metrics endpoint is set."""
        return self.otlp_endpoint is not None


class OtlpMetricsExporter:
    """Pushes the declared metrics of ``sources`` over OTLP/HTTP every ``export_interval_s``.

    Uses the OpenTelemetry SDK: a ``MeterProvider`` with a ``PeriodicExportingMetricReader`` and
    one observable counter or gauge per declaration, whose callbacks read ``stats()``
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
        """Build the SDK's meter provider; its reader thread then pushes every
        ``export_interval_s``. Returns ``self``. Raises ``RuntimeError`` when the OTLP exporter
        package is missing or on a second start."""
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

    def _callback(self, src: StatsSource, spec: SelfMetric) -> Callable[[Any], list[Any]]:
        from opentelemetry.metrics import Observation

        def observe(_options: Any) -> list[Any]:
            try:
                samples = _samples(spec, self._snapshot(src).get(spec.name))
            except Exception:
                log.exception("stats() of %s failed", src.component)
                return []
            return [Observation(value, labels or None) for labels, value in samples]

        return observe

    def force_flush(self, timeout_s: float = 10.0) -> bool:
        """Export now; blocks up to ``timeout_s``. ``False`` when not running or it failed."""
        provider = self._provider
        if provider is None or self._state != "running":
            return False
        return bool(provider.force_flush(timeout_millis=int(timeout_s * 1000)))

    def shutdown(self) -> None:
        """Push a last export and stop the reader thread (blocks up to about
        ``export_timeout_s``). Idempotent."""
        with self._lock:
            if self._state in ("stopped",):
                return
            provider, self._provider = self._provider, None
            self._state = "stopped"
        if provider is not None:
            provider.shutdown()


def pipeline_health_recorder(
    source: StatsSource,
    connect: Callable[[], Any],
    database: str,
    *,
    interval_s: float = 15.0,
    instance: str | None = None,
) -> Any:
    """An unstarted :class:`~ragpulse.scorer.store.PipelineHealthRecorder` of ``source``'s
    declared stats (:data:`METRICS`): ``pipeline_health`` rows every ``interval_s``, to the store
    ``connect()`` opens lazily. See the recorder for its threading and failure contract."""
    from ragpulse.scorer.store import PipelineHealthRecorder

    return PipelineHealthRecorder(source.component, source.stats, connect, database,
                                  interval_s=interval_s, instance=instance)
