"""ragpulse.collector: the OTLP receiver that keeps RAG traces and produces them to Kafka.

Data path (stages are verbs, modules the matching nouns)::

    OTLP/HTTP (otlp_http) ─┐
                           ├─ receive: ingest.Ingest ── validate (upb) → split per trace (split)
    OTLP/gRPC (otlp_grpc) ─┘                            → RAG filter + recent-trace LRU
                                  export: exporter.KafkaExporter ── bounded queue (spans, bytes)
                                          → kafka-python, lz4, acks=all, otelcol-compatible keys
                                            and partitions (kafka.partition_for_key)

Entry points: ``config.CollectorSettings`` (``RAGPULSE_*``), ``service.build_collector`` and
``Collector.start()/shutdown()/stats()`` (counter meanings in ``telemetry.COUNTERS``), the
``ragpulse collector`` command (``cli``). ``kafka.KafkaSettings`` and ``kafka.ensure_topic`` are
shared with the scorer. This package imports nothing at import time, so ``ragpulse.collector.kafka``
stays cheap for other components.
"""
