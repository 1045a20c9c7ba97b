"""ragpulse.collector: the OTLP receiver that keeps RAG traces and produces them to Kafka.

Data path (stages are verbs, modules the matching nouns)::

    OTLP/HTTP (otlp_http) ─┐
                           ├─ receive: ingest.Ingest ── validate (upb) → split per trace (split)
    OTLP/gRPC (otlp_grpc) ─┘                            → RAG filter + recent-trace LRU
                                  export: exporter.KafkaExporter ── bounded queue (spans, bytes)
                                          → librdkafka, lz4, acks=all, otelcol-compatible keys
                                            and partitions (ragpulse.common.kafka)

Entry points: ``config.CollectorSettings`` (``RAGPULSE_*``), ``service.build_collector`` and
``Collector.start()/shutdown()/stats()`` (counters declared in ``ragpulse.common.SELF_METRICS``), the
``ragpulse collector`` command (in ``ragpulse.deploy``). The Kafka settings, topic provisioning
and partitioner are the contract shared with the scorer, in :mod:`ragpulse.common.kafka`. This
package imports nothing at import time.
"""

from ragpulse.common import lazy_exports

__all__ = ["COUNTERS", "PER_WORKER", "Collector", "CollectorSettings", "SharedListener", "available_cores", "build_collector"]

__getattr__ = lazy_exports(__name__, {
    "COUNTERS": ".telemetry",
    "PER_WORKER": ".telemetry",
    "Collector": ".service",
    "CollectorSettings": ".config",
    "SharedListener": ".otlp_http",
    "available_cores": ".config",
    "build_collector": ".service",
})
