"""ragpulse.deploy: running ragpulse, from the embedded single-machine default to production.

The top layer: it may import the collector, the scorer and the dashboards, and none of them
imports it. Modules:

* :mod:`.cli` — the ``ragpulse`` command, the console script's entry point (:func:`.cli.main`).
* :mod:`.commands` — the ``ragpulse`` subcommands (collector, scorer, score, db, dashboards,
  report, status, up); :mod:`.signals` — the stop-on-signal loop they share.
* :mod:`.embedded` — ``ragpulse up``: broker, collector, scorer and chDB in one process tree;
  :mod:`.broker` / :mod:`.durable` / :mod:`.process` — the tansu broker, its S3 storage
  (seaweedfs) and the child-process helper that ties their lives to ``up``'s.
* :mod:`.facade` / :mod:`.sqlguard` — the read-only ClickHouse-HTTP facade in front of a chDB
  directory, and the SQL allow-list it enforces.
* :mod:`.health` / :mod:`.telemetry` / :mod:`.logs` / :mod:`.secrets` — /healthz, /readyz,
  /metrics, self-telemetry, log masking, ``*_FILE`` secrets.
* :mod:`.demo` — ``ragpulse up --demo`` traffic through the OpenTelemetry SDK.
"""

from ragpulse.common import lazy_exports

__all__ = [
    "EmbeddedSettings",
    "FacadeSettings",
    "ObservabilitySettings",
    "StopSignals",
    "TansuBroker",
    "build_facade",
    "run_embedded",
    "start_observability",
]

__getattr__ = lazy_exports(__name__, {
    "EmbeddedSettings": ".embedded",
    "FacadeSettings": ".facade",
    "ObservabilitySettings": ".health",
    "StopSignals": ".signals",
    "TansuBroker": ".broker",
    "build_facade": ".facade",
    "run_embedded": ".embedded",
    "start_observability": ".health",
})
