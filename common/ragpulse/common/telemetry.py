"""Every counter and gauge ragpulse reports about itself, declared once (:data:`SELF_METRICS`),
as otelcol's ``metadata.yaml`` declares a component's metrics.

A declaration names the component that reports it, its ``stats()`` key, its kind (a counter
only grows; a gauge is a current value), unit, meaning and labels. Everything else derives from
here:

* the components' own tables: ``ragpulse.collector.COUNTERS`` and ``PER_WORKER``, the scorer's
  ``COUNTERS``, ``GAUGES``, ``PARTS`` and ``LABELLED`` (its ``Counters`` refuses any other name)
  and ``ragpulse.deploy.facade.COUNTERS``;
* ``/metrics`` (``ragpulse_<component>_<name>``, ``_total`` on counters) and the OTLP metrics
  (``ragpulse.<component>.<name>``) of ``ragpulse.deploy.telemetry``;
* the ``pipeline_health`` rows the collector and the scorer write, and the dashboards' queries of
  them, which name a counter through :func:`self_metric` (an undeclared name raises);
* docs/telemetry.md's table (:func:`self_metrics_table`).

``tests/test_telemetry_declared.py`` checks that each component reports exactly its declared
names. Adding a counter is one entry here and the code that counts it. Pure data; imports
nothing else from ragpulse.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

__all__ = ["SELF_METRICS", "SelfMetric", "self_metric", "self_metrics", "self_metrics_table"]

Component = Literal["collector", "scorer", "facade"]
Kind = Literal["counter", "gauge"]


@dataclass(frozen=True, slots=True)
class SelfMetric:
    """One counter or gauge: the ``stats()`` key ``name`` of ``component``."""

    component: Component
    name: str
    kind: Kind
    help: str
    unit: str = "1"
    """UCUM, as OTLP wants it: ``1`` a count, ``By`` bytes."""
    label: str | None = None
    """Reported split by this label only: its ``stats()`` value is ``{label value: number}``."""
    split_by: str | None = None
    """A total that is also reported split by this label (the scorer's ``labelled_counters()``;
    ``pipeline_health`` holds both, the total with label ``''``)."""
    merge: Literal["sum", "max"] = "sum"
    """How ``ragpulse collector --workers N`` merges the workers' values into one."""
    part: str = ""
    """The scorer's: the part a step drives that counts it (its own ``stats()``); empty for the
    steps' and the loop's own ``Counters``."""

    def __post_init__(self) -> None:
        if self.component not in get_args(Component) or self.kind not in get_args(Kind):
            raise ValueError(f"{self.component}.{self.name}: unknown component or kind")

    @property
    def prometheus_name(self) -> str:
        """``ragpulse_<component>_<name>``, with ``_total`` for a counter."""
        base = f"ragpulse_{self.component}_{self.name}"
        return base + "_total" if self.kind == "counter" else base

    @property
    def otel_name(self) -> str:
        """``ragpulse.<component>.<name>``."""
        return f"ragpulse.{self.component}.{self.name}"


SELF_METRICS: tuple[SelfMetric, ...] = (
    # the collector (ragpulse.collector); receive: transport
    SelfMetric("collector", "http_requests", "counter", "OTLP/HTTP requests handled (any outcome)."),
    SelfMetric("collector", "http_connections_refused", "counter", "HTTP connections answered 503 at once: max_concurrent_requests reached with none idle or slow to evict, or shutting down."),
    SelfMetric("collector", "http_connections_evicted", "counter", "HTTP connections closed to admit a new one at max_concurrent_requests: the one idle or sending its request head for the longest."),
    SelfMetric("collector", "http_requests_timed_out", "counter", "HTTP connections closed because a read deadline passed (idle, header or body timeout)."),
    SelfMetric("collector", "http_refused_busy", "counter", "HTTP requests answered 429 before reading: request bodies in progress at max_inflight_bytes."),
    SelfMetric("collector", "http_inflight_bytes", "gauge", "Request body bytes held by HTTP requests in progress (bounded by max_inflight_bytes).", unit="By"),
    SelfMetric("collector", "http_too_large", "counter", "HTTP requests answered 413: body or decompressed body over its limit."),
    SelfMetric("collector", "http_unsupported", "counter", "HTTP requests answered 415: content type or encoding not supported."),
    SelfMetric("collector", "http_unauthenticated", "counter", "HTTP requests answered 401: missing or wrong bearer token (otlp.auth_token)."),
    SelfMetric("collector", "http_refused_origin", "counter", "HTTP requests and CORS preflights answered 403 before the body was read: a Host not naming this machine on a loopback listener (DNS rebinding), an Origin neither of this machine nor in otlp.cors_allowed_origins, a browser's Sec-Fetch-Site: cross-site without an allowed Origin, or a preflight asking for another method or header."),
    SelfMetric("collector", "http_connections_retired", "counter", "HTTP connections answered with 'Connection: close' because they passed otlp.max_connection_age_s or otlp.max_connection_requests (the client reconnects, to the worker holding the fewest)."),
    SelfMetric("collector", "http_tls_failed", "counter", "HTTP connections closed because the TLS handshake failed (otlp.tls_cert_file set)."),
    SelfMetric("collector", "grpc_requests", "counter", "OTLP/gRPC Export calls handled (any outcome)."),
    SelfMetric("collector", "grpc_refused_busy", "counter", "gRPC calls answered RESOURCE_EXHAUSTED with RetryInfo before their message was read: Export calls in progress at min(max_concurrent_requests, 2 * grpc_workers)."),
    SelfMetric("collector", "grpc_unauthenticated", "counter", "gRPC calls answered UNAUTHENTICATED: missing or wrong bearer token (otlp.auth_token)."),
    # receive: decode, split, filter
    SelfMetric("collector", "requests_received", "counter", "Requests whose body was read, over both transports."),
    SelfMetric("collector", "requests_malformed", "counter", "Requests answered 400 / INVALID_ARGUMENT (undecodable protobuf, JSON or gzip)."),
    SelfMetric("collector", "requests_too_many_items", "counter", "Requests answered 413 / RESOURCE_EXHAUSTED (not retryable) before decoding: more items (spans, attributes, events, links, list values) than otlp.max_items, or a JSON body with more objects and arrays than a quarter of it."),
    SelfMetric("collector", "requests_refused", "counter", "Requests refused as a whole with 429/503 (queue full, Kafka unavailable, shutting down)."),
    SelfMetric("collector", "bytes_received", "counter", "Request body bytes as received (compressed size for gzip).", unit="By"),
    SelfMetric("collector", "spans_received", "counter", "Spans in decodable requests."),
    SelfMetric("collector", "spans_accepted", "counter", "Spans queued for Kafka (the client got 200 for them)."),
    SelfMetric("collector", "spans_rejected", "counter", "Spans refused individually and reported as partial success naming the field: a bad trace_id, span_id or parent_span_id, a start or end time before 2000 or over a day ahead; or a trace over the record limit."),
    SelfMetric("collector", "spans_rejected_retention", "counter", "Of spans_rejected: spans that started longer ago than otlp.max_span_age_days (the scores table's TTL would delete their rows on insert)."),
    SelfMetric("collector", "spans_refused", "counter", "Spans of requests refused as a whole (the client retries them)."),
    SelfMetric("collector", "spans_dropped_non_rag", "counter", "Spans of traces without a RAG span (filter mode 'rag'): dropped on purpose."),
    SelfMetric("collector", "traces_dropped_non_rag", "counter", "Per-request trace groups dropped by the RAG filter."),
    SelfMetric("collector", "traces_exported", "counter", "Traces (of one request each) handed to the producer: a record each with producer.records=per_trace, several per record with per_partition (records_sent counts the records)."),
    SelfMetric("collector", "recent_rag_traces", "gauge", "RAG trace ids remembered for late spans (the last filter.remember_traces always; at most about twice as many held)."),
    # export
    SelfMetric("collector", "producers_rebuilt", "counter", "Kafka producers replaced after an unrecoverable state (fatal idempotence error, long outage)."),
    SelfMetric("collector", "records_sent", "counter", "Records handed to the Kafka producer."),
    SelfMetric("collector", "records_acked", "counter", "Records acknowledged by Kafka (acks=all by default)."),
    SelfMetric("collector", "records_failed", "counter", "Records the producer gave up on (delivery timeout, broker errors, closed at shutdown)."),
    SelfMetric("collector", "records_rejected", "counter", "Records over producer.max_request_size even with their long values cut, never sent (their spans are in spans_rejected)."),
    SelfMetric("collector", "records_truncated", "counter", "Records over producer.max_request_size sent with their longest attribute values cut (or the last items of their lists dropped) to fit (marked '…[truncated by ragpulse: N bytes]'); the trace is still scored."),
    SelfMetric("collector", "attribute_values_truncated", "counter", "Attribute values cut in records_truncated."),
    SelfMetric("collector", "list_items_dropped", "counter", "List items dropped from the end to fit records_truncated when cutting long values was not enough: attributes with a list index in the key (contexts, messages), span events, array items; the spans' dropped_attributes_count/dropped_events_count grow."),
    SelfMetric("collector", "spans_acked", "counter", "Spans in acknowledged records: what was delivered."),
    SelfMetric("collector", "spans_failed", "counter", "Spans in failed records: accepted but lost."),
    SelfMetric("collector", "spans_refused_queue_full", "counter", "Spans refused with 429 / RESOURCE_EXHAUSTED because the queue was full."),
    SelfMetric("collector", "spans_refused_unavailable", "counter", "Spans refused with 503 / UNAVAILABLE (Kafka failing, metadata timeout, shutdown)."),
    SelfMetric("collector", "bytes_acked", "counter", "Record value bytes acknowledged by Kafka (before compression).", unit="By"),
    SelfMetric("collector", "queue_spans", "gauge", "Spans accepted and not yet acknowledged or failed."),
    SelfMetric("collector", "queue_bytes", "gauge", "Record bytes accepted and not yet acknowledged or failed.", unit="By"),
    SelfMetric("collector", "kafka_unavailable", "gauge", "1 while recent delivery failures make the collector answer 503.", merge="max"),
    SelfMetric("collector", "split_in_python", "gauge", "1 when the per-span split runs in Python: the C module ragpulse.collector._native was not built at install (no C compiler there) or RAGPULSE_PURE_PYTHON is set; about 1 CPU-µs more per span, the same records.", merge="max"),
    # per worker process of `ragpulse collector --workers N` (above 1): {worker index: value}
    SelfMetric("collector", "worker_http_requests", "counter", "OTLP/HTTP requests handled by each process of `ragpulse collector --workers N`, by its index (label worker; 0: the first process); with http_requests, which sums them.", label="worker"),
    SelfMetric("collector", "worker_grpc_requests", "counter", "OTLP/gRPC Export calls handled by each process of `ragpulse collector --workers N`, by its index (label worker).", label="worker"),
    SelfMetric("collector", "worker_http_connections", "gauge", "OTLP/HTTP connections each process of `ragpulse collector --workers N` holds now, by its index (label worker).", label="worker"),
    # the scorer (ragpulse.scorer.pipeline): the steps' and the loop's Counters; consumer thread
    SelfMetric("scorer", "records_consumed", "counter", "Kafka records read from the spans topic"),
    SelfMetric("scorer", "records_dead_lettered", "counter", "undecodable records acknowledged by the dead-letter topic", split_by="reason"),
    SelfMetric("scorer", "dead_letter_errors", "counter", "failed sends to the dead-letter topic (retried)"),
    SelfMetric("scorer", "spans_consumed", "counter", "spans decoded from consumed records"),
    SelfMetric("scorer", "traces_sampled", "counter", "assembled traces kept by the sampler"),
    SelfMetric("scorer", "traces_sampled_out", "counter", "assembled traces the sampler skipped (their records are done)"),
    SelfMetric("scorer", "traces_unscorable", "counter", "kept traces without question/answer/contexts: written as null rows", split_by="reason"),
    SelfMetric("scorer", "traces_expired_incomplete", "counter", "traces evicted from the assembler without a root span and with nothing to score: no rows"),
    SelfMetric("scorer", "traces_not_rag", "counter", "traces with no question, no answer and no LLM call (index building): no rows"),
    SelfMetric("scorer", "traces_dropped", "counter", "traces dropped on purpose (evicted with on_evict=drop, invalid metadata)"),
    SelfMetric("scorer", "traces_revoked", "counter", "buffered traces forgotten because their partition was revoked"),
    SelfMetric("scorer", "traces_done", "counter", "traces whose rows ClickHouse acknowledged (or that were dropped on purpose)"),
    SelfMetric("scorer", "commits", "counter", "successful offset commits"),
    SelfMetric("scorer", "commit_errors", "counter", "failed offset commits (retried at the next interval)"),
    SelfMetric("scorer", "partitions_paused", "counter", "times the consumer paused its partitions (backpressure)"),
    # event-loop thread
    SelfMetric("scorer", "traces_scored", "counter", "traces evaluated by the judge"),
    SelfMetric("scorer", "evaluate_errors", "counter", "evaluations that raised (programming errors); written as error rows"),
    # write thread
    SelfMetric("scorer", "rows_written", "counter", "score rows acknowledged and kept by ClickHouse"),
    SelfMetric("scorer", "rows_expired", "counter", "score rows acknowledged but deleted at once by the scores TTL (ts outside it): not in rows_written"),
    SelfMetric("scorer", "batches_written", "counter", "insert batches acknowledged by ClickHouse"),
    SelfMetric("scorer", "write_errors", "counter", "failed insert attempts (the batch is retried; offsets wait)"),
    # gauges the loop and the steps compute
    SelfMetric("scorer", "traces_buffered", "gauge", "traces waiting in the assembler"),
    SelfMetric("scorer", "spans_buffered", "gauge", "spans waiting in the assembler"),
    SelfMetric("scorer", "traces_in_flight", "gauge", "traces handed to evaluate/write and not yet acknowledged"),
    SelfMetric("scorer", "traces_backlog", "gauge", "assembled traces waiting for an in-flight slot"),
    SelfMetric("scorer", "records_pending", "gauge", "consumed records not yet committable"),
    SelfMetric("scorer", "partitions_assigned", "gauge", "partitions this member owns"),
    SelfMetric("scorer", "paused", "gauge", "1 while the consumer is paused for backpressure"),
    SelfMetric("scorer", "consumer_lag", "gauge", "sum over owned partitions of high watermark minus consumed position"),
    SelfMetric("scorer", "commit_lag", "gauge", "sum over owned partitions of high watermark minus committed offset"),
    # the scorer: counted by the trace assembler
    SelfMetric("scorer", "spans_assembled", "counter", "spans added to the assembler's trace buffers", part="trace assembler"),
    SelfMetric("scorer", "spans_late", "counter", "spans of already emitted traces (ignored or re-scored)", part="trace assembler"),
    SelfMetric("scorer", "traces_assembled", "counter", "traces the assembler handed on, for any cause: complete (root span seen plus the grace period), timed out, evicted, drained, re-scored; every one ends in one outcome (scored, unscorable, sampled out, ...), so it is never below traces_scored", part="trace assembler"),
    SelfMetric("scorer", "traces_timed_out", "counter", "of traces_assembled: emitted without a root span after assembly.max_wait_s", part="trace assembler"),
    SelfMetric("scorer", "traces_evicted", "counter", "of traces_assembled: evicted from the full assembly buffer or over a service's max_incomplete_per_service", part="trace assembler"),
    SelfMetric("scorer", "traces_rescored", "counter", "of traces_assembled: emitted traces reopened by late spans (late_spans=rescore)", part="trace assembler"),
    SelfMetric("scorer", "traces_drained", "counter", "of traces_assembled: emitted early because the scorer was shutting down", part="trace assembler"),
    # the scorer: counted by the segment reader
    SelfMetric("scorer", "segment_values_capped", "counter", "segment attribute values stored as 'other': their key had write.max_segment_values distinct values already", part="segment reader"),
    # the scorer: counted by the span decoder
    SelfMetric("scorer", "records_undecodable", "counter", "records the decoder could not read (dead-lettered)", part="span decoder"),
    # the scorer: counted by the ClickHouse writer
    SelfMetric("scorer", "writer_rows_submitted", "counter", "score rows accepted by the ClickHouse writer", part="ClickHouse writer"),
    SelfMetric("scorer", "writer_rows_refused", "counter", "score rows refused by the full writer (backpressure)", part="ClickHouse writer"),
    SelfMetric("scorer", "writer_rows_written", "counter", "score rows ClickHouse acknowledged and kept (writer's count)", part="ClickHouse writer"),
    SelfMetric("scorer", "writer_rows_expired", "counter", "score rows the scores TTL deleted on insert (writer's count)", part="ClickHouse writer"),
    SelfMetric("scorer", "writer_rows_failed", "counter", "score rows whose insert failed for good or at shutdown", part="ClickHouse writer"),
    SelfMetric("scorer", "writer_batches_written", "counter", "insert calls ClickHouse acknowledged", part="ClickHouse writer"),
    SelfMetric("scorer", "writer_insert_retries", "counter", "insert attempts retried after a retryable error", part="ClickHouse writer"),
    SelfMetric("scorer", "writer_insert_errors", "counter", "failed insert attempts of any kind", part="ClickHouse writer"),
    SelfMetric("scorer", "writer_pending_rows", "gauge", "rows held by the writer, not yet acknowledged", part="ClickHouse writer"),
    # the ClickHouse-HTTP facade (ragpulse.deploy.facade)
    SelfMetric("facade", "requests", "counter", "HTTP requests handled (any outcome, /ping included)."),
    SelfMetric("facade", "queries", "counter", "Statements run to completion."),
    SelfMetric("facade", "errors", "counter", "Requests answered with a ClickHouse-style error (any status)."),
    SelfMetric("facade", "refused_busy", "counter", "Requests answered 503: all max_concurrent_queries slots busy."),
    SelfMetric("facade", "refused_client_share", "counter", "Requests answered 429: the client address held its max_queries_per_client slots."),
    SelfMetric("facade", "refused_auth", "counter", "Requests answered 401: missing or wrong login."),
    SelfMetric("facade", "refused_login_throttled", "counter", "Requests answered 429 without checking the login: too many failed logins from the address (login_free_failures), locked out for a growing time."),
    SelfMetric("facade", "refused_login_ceiling", "counter", "Requests answered 429 without checking the login: the failed-login ceiling of the login claimed (login_user_ceiling_*) or of the facade (login_ceiling_*) is spent; addresses that logged in within login_known_address_s are exempt."),
    SelfMetric("facade", "refused_readonly", "counter", "Statements or settings refused with 164 READONLY (writes, DDL, settings off the allow-list)."),
    SelfMetric("facade", "refused_access", "counter", "Statements refused with 497 ACCESS_DENIED (tables, databases, functions off the allow-list)."),
    SelfMetric("facade", "refused_origin", "counter", "Requests answered 403 without a login configured: a Host that does not name this machine (DNS rebinding), another site's Origin, or a browser's Sec-Fetch-Site: cross-site."),
    SelfMetric("facade", "refused_query_id", "counter", "Requests answered 400: a query_id other than 1-128 letters, digits or _.:- (it is echoed in a header)."),
    SelfMetric("facade", "connections_refused", "counter", "Connections answered 503 at once: max_connections reached with none idle or slow to evict."),
    SelfMetric("facade", "connections_evicted", "counter", "Idle or slow connections closed to admit a new one at max_connections."),
    SelfMetric("facade", "requests_timed_out", "counter", "Connections closed because a read deadline passed (header or idle timeout)."),
    SelfMetric("facade", "replies_cut_slow", "counter", "Replies cut off (connection reset) because the client took them slower than write_min_bytes_per_s after write_timeout_s; the query slot and the reply's memory are freed."),
)


def _index() -> dict[str, dict[str, SelfMetric]]:
    out: dict[str, dict[str, SelfMetric]] = {c: {} for c in get_args(Component)}
    for m in SELF_METRICS:
        if m.name in out[m.component]:
            raise ValueError(f"{m.component}.{m.name} declared twice")
        out[m.component][m.name] = m
    return out


_BY_COMPONENT = _index()


def self_metrics(component: Component) -> dict[str, SelfMetric]:
    """``{name: declaration}`` of ``component``, in declaration order (a copy)."""
    return dict(_BY_COMPONENT[component])


def self_metric(name: str) -> SelfMetric:
    """The one declaration named ``name``; ``KeyError`` naming the problem when no component
    declares it or several do (then ask :func:`self_metrics` of the component)."""
    found = [by[name] for by in _BY_COMPONENT.values() if name in by]
    if len(found) != 1:
        where = ", ".join(m.component for m in found) or "no component"
        raise KeyError(f"self-telemetry name {name!r} is declared by {where} "
                       "(ragpulse.common.SELF_METRICS)")
    return found[0]


def self_metrics_table() -> str:
    """The declarations as one markdown table (docs/telemetry.md holds this text)."""
    lines = ["| component | name | kind | unit | labels | meaning |", "|---|---|---|---|---|---|"]
    for m in SELF_METRICS:
        labels = m.label or (f"total, and by {m.split_by}" if m.split_by else "")
        meaning = m.help.replace("|", "\\|") + (f" (counted by the {m.part})" if m.part else "")
        lines.append(f"| {m.component} | `{m.name}` | {m.kind} | {m.unit} | {labels} | {meaning} |")
    return "\n".join(lines)
