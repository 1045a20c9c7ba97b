"""Every counter the collector reports in ``Collector.stats()``, declared once with its meaning.

Counters only grow; gauges (marked) are current values. Stage names are verbs: receive (the
OTLP receivers and :mod:`~ragpulse.collector.ingest`), export (:mod:`~ragpulse.collector.exporter`).
A test checks that ``stats()`` reports exactly these names.
"""

from __future__ import annotations

__all__ = ["COUNTERS", "PER_WORKER"]

COUNTERS: dict[str, str] = {
    # receive: transport
    "http_requests": "OTLP/HTTP requests handled (any outcome).",
    "http_connections_refused": "HTTP connections answered 503 at once: max_concurrent_requests reached with none idle or slow to evict, or shutting down.",
    "http_connections_evicted": "HTTP connections closed to admit a new one at max_concurrent_requests: the one idle or sending its request head for the longest.",
    "http_requests_timed_out": "HTTP connections closed because a read deadline passed (idle, header or body timeout).",
    "http_refused_busy": "HTTP requests answered 429 before reading: request bodies in progress at max_inflight_bytes.",
    "http_inflight_bytes": "Gauge: request body bytes held by HTTP requests in progress (bounded by max_inflight_bytes).",
    "http_too_large": "HTTP requests answered 413: body or decompressed body over its limit.",
    "http_unsupported": "HTTP requests answered 415: content type or encoding not supported.",
    "http_unauthenticated": "HTTP requests answered 401: missing or wrong bearer token (otlp.auth_token).",
    "http_refused_origin": "HTTP requests and CORS preflights answered 403 before the body was read: a Host not naming this machine on a loopback listener (DNS rebinding), an Origin neither of this machine nor in otlp.cors_allowed_origins, a browser's Sec-Fetch-Site: cross-site without an allowed Origin, or a preflight asking for another method or header.",
    "http_connections_retired": "HTTP connections answered with 'Connection: close' because they passed otlp.max_connection_age_s or otlp.max_connection_requests (the client reconnects, to the worker holding the fewest).",
    "http_tls_failed": "HTTP connections closed because the TLS handshake failed (otlp.tls_cert_file set).",
    "grpc_requests": "OTLP/gRPC Export calls handled (any outcome).",
    "grpc_refused_busy": "gRPC calls answered RESOURCE_EXHAUSTED with RetryInfo before their message was read: Export calls in progress at min(max_concurrent_requests, 2 * grpc_workers).",
    "grpc_unauthenticated": "gRPC calls answered UNAUTHENTICATED: missing or wrong bearer token (otlp.auth_token).",
    # receive: decode, split, filter
    "requests_received": "Requests whose body was read, over both transports.",
    "requests_malformed": "Requests answered 400 / INVALID_ARGUMENT (undecodable protobuf, JSON or gzip).",
    "requests_too_many_items": "Requests answered 413 / RESOURCE_EXHAUSTED (not retryable) before decoding: more items (spans, attributes, events, links, list values) than otlp.max_items, or a JSON body with more objects and arrays than a quarter of it.",
    "requests_refused": "Requests refused as a whole with 429/503 (queue full, Kafka unavailable, shutting down).",
    "bytes_received": "Request body bytes as received (compressed size for gzip).",
    "spans_received": "Spans in decodable requests.",
    "spans_accepted": "Spans queued for Kafka (the client got 200 for them).",
    "spans_rejected": "Spans refused individually and reported as partial success naming the field: a bad trace_id, span_id or parent_span_id, a start or end time before 2000 or over a day ahead; or a trace over the record limit.",
    "spans_rejected_retention": "Of spans_rejected: spans that started longer ago than otlp.max_span_age_days (the scores table's TTL would delete their rows on insert).",
    "spans_refused": "Spans of requests refused as a whole (the client retries them).",
    "spans_dropped_non_rag": "Spans of traces without a RAG span (filter mode 'rag'): dropped on purpose.",
    "traces_dropped_non_rag": "Per-request trace groups dropped by the RAG filter.",
    "traces_exported": "Traces (of one request each) handed to the producer: a record each with producer.records=per_trace, several per record with per_partition (records_sent counts the records).",
    "recent_rag_traces": "Gauge: RAG trace ids remembered for late spans (bounded by filter.remember_traces).",
    # export
    "producers_rebuilt": "Kafka producers replaced after an unrecoverable state (fatal idempotence error, long outage).",
    "records_sent": "Records handed to the Kafka producer.",
    "records_acked": "Records acknowledged by Kafka (acks=all by default).",
    "records_failed": "Records the producer gave up on (delivery timeout, broker errors, closed at shutdown).",
    "records_rejected": "Records over producer.max_request_size even with their long values cut, never sent (their spans are in spans_rejected).",
    "records_truncated": "Records over producer.max_request_size sent with their longest attribute values cut (or the last items of their lists dropped) to fit (marked '…[truncated by ragpulse: N bytes]'); the trace is still scored.",
    "attribute_values_truncated": "Attribute values cut in records_truncated.",
    "list_items_dropped": "List items dropped from the end to fit records_truncated when cutting long values was not enough: attributes with a list index in the key (contexts, messages), span events, array items; the spans' dropped_attributes_count/dropped_events_count grow.",
    "spans_acked": "Spans in acknowledged records: what was delivered.",
    "spans_failed": "Spans in failed records: accepted but lost.",
    "spans_refused_queue_full": "Spans refused with 429 / RESOURCE_EXHAUSTED because the queue was full.",
    "spans_refused_unavailable": "Spans refused with 503 / UNAVAILABLE (Kafka failing, metadata timeout, shutdown).",
    "bytes_acked": "Record value bytes acknowledged by Kafka (before compression).",
    "queue_spans": "Gauge: spans accepted and not yet acknowledged or failed.",
    "queue_bytes": "Gauge: record bytes accepted and not yet acknowledged or failed.",
    "kafka_unavailable": "Gauge: 1 while recent delivery failures make the collector answer 503.",
}

PER_WORKER: dict[str, str] = {
    "worker_http_requests": "OTLP/HTTP requests handled by each process of `ragpulse collector --workers N`, by its index (label worker; 0: the first process); with http_requests, which sums them.",
    "worker_grpc_requests": "OTLP/gRPC Export calls handled by each process of `ragpulse collector --workers N`, by its index (label worker).",
    "worker_http_connections": "Gauge: OTLP/HTTP connections each process of `ragpulse collector --workers N` holds now, by its index (label worker).",
}
"""Counters ``ragpulse collector`` reports per worker process (a ``{worker index: value}``
mapping in its stats, label ``worker``), beside the sums in :data:`COUNTERS`; only with
``--workers`` above 1."""
