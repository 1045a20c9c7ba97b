"""The collector as one component: receivers → ingest → Kafka exporter, with one lifecycle.

Start order is downstream first (exporter, then receivers), stop order upstream first
(receivers stop accepting and finish their requests, then the exporter flushes), as the
OpenTelemetry Collector's service graph does, so nothing accepted is left behind on shutdown.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

from ragpulse.collector import split as split_module
from ragpulse.collector.config import CollectorSettings
from ragpulse.collector.exporter import KafkaExporter, TraceExporter
from ragpulse.collector.ingest import Ingest
from ragpulse.collector.otlp_grpc import GrpcReceiver
from ragpulse.collector.otlp_http import HttpReceiver, SharedListener

__all__ = ["Collector", "build_collector"]

log = logging.getLogger(__name__)


class Collector:
    """OTLP receivers feeding Kafka. Build it with :func:`build_collector`.

    ``start()`` blocks until the exporter is connected and the receivers listen (the first of
    several processes: OTLP/HTTP bound, listening from :meth:`open` on); it raises
    (:class:`~ragpulse.common.kafka.KafkaUnavailable`, ``OSError``/``RuntimeError`` for a
    taken port) and
    leaves nothing running when it fails. ``shutdown()`` is idempotent, safe without ``start()``
    and from any thread; it refuses new requests, drains those in progress and flushes Kafka
    within about ``drain_timeout_s``. ``stats()`` is a thread-safe snapshot of all counters.
    """

    def __init__(self, settings: CollectorSettings, exporter: TraceExporter, *,
                 http_shared: SharedListener | None = None) -> None:
        self.settings = settings
        self._exporter = exporter
        self._ingest = Ingest(settings.filter, exporter, max_items=settings.otlp.max_items,
                              max_span_age_days=settings.otlp.max_span_age_days)
        otlp = settings.otlp
        self._http = (HttpReceiver(otlp, self._ingest, shared=http_shared)
                      if otlp.http_enabled else None)
        self._grpc = GrpcReceiver(otlp, self._ingest) if otlp.grpc_enabled else None
        self._lock = threading.Lock()
        self._state = "new"

    @property
    def http_endpoint(self) -> str | None:
        """``http://host:port/v1/traces`` once started, ``None`` when HTTP is disabled."""
        return self._http.endpoint if self._http is not None and self._state == "running" else None

    @property
    def http_shared(self) -> SharedListener | None:
        """The OTLP/HTTP listening socket worker processes serve too, once started with
        ``workers > 1`` (``build_collector(http_shared=...)`` in each worker); else ``None``."""
        return self._http.shared if self._http is not None and self._state == "running" else None

    @property
    def grpc_endpoint(self) -> str | None:
        """``host:port`` once started, ``None`` when gRPC is disabled."""
        return self._grpc.endpoint if self._grpc is not None and self._state == "running" else None

    def start(self) -> Collector:
        """Start the exporter, then the receivers (see the class docstring); returns ``self``."""
        with self._lock:
            if self._state != "new":
                raise RuntimeError(f"collector cannot start from state {self._state}")
            self._state = "starting"
        try:
            start = getattr(self._exporter, "start", None)
            if start is not None:
                start()
            if self._grpc is not None:
                self._grpc.start()
            if self._http is not None:
                self._http.start()
        except BaseException:
            self._state = "running"  # let shutdown() tear down whatever did start
            self.shutdown(drain_timeout_s=1.0)
            raise
        with self._lock:
            self._state = "running"
        log.info("collector: OTLP/HTTP %s, OTLP/gRPC %s → kafka %s topic %s",
                 self.http_endpoint, self.grpc_endpoint,
                 self.settings.kafka.bootstrap_servers, self.settings.kafka.topic)
        if split_module._native is None and not os.environ.get("RAGPULSE_PURE_PYTHON"):  # as split_in_python
            log.warning("collector: the per-span split runs in Python (the C module "
                        "ragpulse.collector._native was not built at install: no C compiler or "
                        "Python headers there); the same records, about 1 CPU-µs more per span")
        return self

    def open(self) -> None:
        """Open the OTLP/HTTP port of the first of several processes (``workers > 1``), which
        ``start()`` binds without listening so that no connection lands before every worker
        serves (:class:`~ragpulse.collector.otlp_http.SharedListener`); a no-op otherwise.
        Call it once the workers serve. Any thread."""
        if self._http is not None:
            self._http.open()

    @property
    def is_open(self) -> bool:
        """Whether every enabled receiver accepts connections (see :meth:`open`)."""
        return self._state == "running" and (self._http is None or self._http.is_open)

    def shutdown(self, drain_timeout_s: float = 10.0) -> None:
        """Receivers first (refuse, drain), then flush the exporter; see the class docstring."""
        with self._lock:
            if self._state in ("stopping", "stopped"):
                return
            was_started = self._state != "new"
            self._state = "stopping"
        try:
            if was_started:
                # Upstream first: stop accepting, finish requests in progress ...
                if self._http is not None:
                    self._http.shutdown(drain_timeout_s)
                if self._grpc is not None:
                    self._grpc.shutdown(drain_timeout_s)
            # ... then flush what was accepted (or just refuse new work if never started).
            stop = getattr(self._exporter, "shutdown", None)
            if stop is not None:
                stop(drain_timeout_s)
        finally:
            with self._lock:
                self._state = "stopped"

    def stats(self) -> dict[str, Any]:
        """All counters of ingest, receivers and exporter in one snapshot. Thread-safe."""
        out: dict[str, Any] = dict(self._ingest.stats())
        for part in (self._http, self._grpc, self._exporter):
            part_stats = getattr(part, "stats", None)
            if part_stats is not None:
                out.update(part_stats())
        out["split_in_python"] = int(split_module._native is None)
        return out

    def __enter__(self) -> Collector:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()


def build_collector(settings: CollectorSettings | None = None, *, exporter: TraceExporter | None = None,
                    http_shared: SharedListener | None = None) -> Collector:
    """The collector for ``settings`` (default: from ``RAGPULSE_*``), exporting to Kafka unless
    another :class:`~ragpulse.collector.exporter.TraceExporter` is given; a worker process
    serves OTLP/HTTP on ``http_shared``, the first process's listening socket. Does not start
    it."""
    settings = settings or CollectorSettings()
    return Collector(settings, exporter if exporter is not None else KafkaExporter(settings),
                     http_shared=http_shared)
