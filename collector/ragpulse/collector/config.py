"""Collector settings: one frozen pydantic-settings model, ``RAGPULSE_*`` environment, ``__`` nesting.

Examples: ``RAGPULSE_KAFKA__BOOTSTRAP_SERVERS=kafka:9092``, ``RAGPULSE_OTLP__HTTP_PORT=4318``,
``RAGPULSE_QUEUE__MAX_SPANS=200000``, ``RAGPULSE_FILTER__MODE=all``. Every field has a default that
works for the single-machine setup (loopback endpoints, tansu on 127.0.0.1:9092); validation runs
on construction so a bad value fails at start-up with the field's name.
"""

from __future__ import annotations

import os
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from ragpulse.common import KafkaSettings

__all__ = [
    "CollectorSettings",
    "FilterSettings",
    "OtlpSettings",
    "ProducerSettings",
    "QueueSettings",
    "available_cores",
]

_MiB = 1 << 20


def available_cores() -> int:
    """Cores this process may run on: its CPU affinity, lowered by a cgroup v2 CPU quota
    (``cpu.max``, what a container's CPU limit sets). At least 1."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    try:
        with open("/sys/fs/cgroup/cpu.max") as f:
            quota, period = f.read().split()[:2]
        if quota != "max":
            cores = min(cores, max(1, int(int(quota) / int(period))))
    except (OSError, ValueError):
        pass
    return max(1, cores)


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class OtlpSettings(_Frozen):
    """The OTLP receivers. Loopback by default: exposing them is an explicit choice."""

    http_enabled: bool = True
    http_host: str = "127.0.0.1"
    http_port: int = Field(4318, ge=0, le=65535, description="0 picks a free port (tests).")
    grpc_enabled: bool = True
    grpc_host: str = "127.0.0.1"
    grpc_port: int = Field(4317, ge=0, le=65535, description="0 picks a free port (tests).")
    max_body_bytes: int = Field(
        16 * _MiB, ge=1024, description="Largest request body accepted as sent (413 above)."
    )
    max_decompressed_bytes: int = Field(
        64 * _MiB,
        ge=1024,
        description="Largest body after gzip decompression; bounds gzip bombs (413 above).",
    )
    max_items: int = Field(
        1_000_000,  # ingest.DEFAULT_MAX_ITEMS
        ge=1_000,
        le=100_000_000,
        description="Most items one request may hold: spans, events, links, attributes, array "
        "and key-value-list values (and the few other fields beside them), counted on the wire "
        "before decoding; OTLP/JSON may hold a quarter as many objects and arrays. Above it: 413 / "
        "RESOURCE_EXHAUSTED (not retryable), counted requests_too_many_items. A list item can be "
        "2 bytes on the wire and costs tens of bytes decoded: this bounds a request's work.",
    )
    max_span_age_days: int = Field(
        90,
        ge=0,
        le=36_500,
        description="A span that started longer ago than this is rejected alone (partial success "
        "naming the retention, counted spans_rejected_retention): the scores table's TTL "
        "(schema ttl_days, 90 by default) would delete its rows on insert. Keep it equal to the "
        "table's ttl_days; 0: no check beyond 2000-01-01.",
    )
    max_inflight_bytes: int = Field(
        256 * _MiB,
        ge=1024,
        description="Request bodies (as received plus decompressed, reserved as they are "
        "inflated) held by all HTTP requests in progress; a request that would exceed it gets "
        "429. Bounds receive memory.",
    )
    max_concurrent_requests: int = Field(
        64,
        ge=1,
        le=4096,
        description="HTTP connections served at once. At the cap, the connection idle or sending "
        "its request head for the longest is closed to admit a new one; only when all are busy "
        "does a new connection get 503.",
    )
    idle_timeout_s: float = Field(
        60.0, gt=0, le=3600, description="HTTP keep-alive: an idle connection is closed after this."
    )
    header_timeout_s: float = Field(
        10.0,
        gt=0,
        le=600,
        description="HTTP: total time from a request's first byte to the end of its headers "
        "(slowloris protection; not reset by each byte).",
    )
    body_timeout_s: float = Field(
        10.0,
        gt=0,
        le=600,
        description="HTTP: time allowed for a body, plus its length at body_min_bytes_per_s.",
    )
    body_min_bytes_per_s: int = Field(
        64 * 1024, ge=1024, description="HTTP: slowest body upload accepted (see body_timeout_s)."
    )
    grpc_workers: int = Field(8, ge=1, le=256, description="gRPC handler threads.")
    max_connection_age_s: float = Field(
        30.0,
        ge=0,
        le=86_400,
        description="A client connection is retired after about this long, so that no client "
        "stays on one worker process (or one collector behind a load balancer) forever: "
        "OTLP/HTTP answers its next request with 'Connection: close' (the client reconnects, "
        "and the new connection goes to the process holding the fewest), each connection's age "
        "drawn within +-10 % so that clients that connected together do not reconnect together; "
        "OTLP/gRPC sends GOAWAY (grpcio's max_connection_age, +-10 % jitter as gRPC servers "
        "apply it; the reconnection lands on a worker by SO_REUSEPORT's hash: best effort). "
        "0: never.",
    )
    max_connection_age_grace_s: float = Field(
        10.0,
        ge=0,
        le=3600,
        description="OTLP/gRPC: calls in progress on a connection past max_connection_age_s get "
        "this long to finish before it is closed.",
    )
    max_connection_requests: int = Field(
        0,
        ge=0,
        le=100_000_000,
        description="OTLP/HTTP: answer with 'Connection: close' after about this many requests "
        "on one connection (+-10 % per connection), as proxies' max requests per connection; "
        "0: no limit (max_connection_age_s still applies).",
    )
    retry_after_s: int = Field(
        2, ge=1, le=300, description="Retry-After sent with 429/503 (seconds)."
    )
    auth_token: SecretStr | None = Field(
        None,
        description="Bearer token both receivers require (HTTP 'Authorization: Bearer <token>', "
        "gRPC 'authorization' metadata); compared in constant time. None: no authentication, "
        "acceptable on the loopback default only. Env: RAGPULSE_OTLP__AUTH_TOKEN.",
    )
    cors_allowed_origins: tuple[str, ...] = Field(
        (),
        description="OTLP/HTTP: origins of web pages whose browser exporters may send (CORS, as "
        "otelcol's cors.allowed_origins: exact, '*' for any, or a '*' inside, "
        "'https://*.example.com'); they get preflights answered and Access-Control-Allow-Origin. "
        "Any other Origin, a browser's Sec-Fetch-Site: cross-site without an allowed Origin and, "
        "on a loopback listener, a Host that does not name this machine (DNS rebinding) get 403, "
        "counted http_refused_origin. Env: RAGPULSE_OTLP__CORS_ALLOWED_ORIGINS='[\"https://app.example.com\"]'; "
        "flag --cors-origin.",
    )
    cors_allowed_headers: tuple[str, ...] = Field(
        (),
        description="Request headers a CORS preflight may ask for besides Content-Type, "
        "Content-Encoding, Accept, Accept-Language and Content-Language ('*': any); a browser "
        "exporter sending the bearer token needs 'Authorization'.",
    )
    cors_max_age_s: int = Field(
        0, ge=0, le=86_400, description="Access-Control-Max-Age of preflight answers; 0: not sent."
    )
    allow_anonymous_ingest: bool = Field(
        False,
        description="Let `ragpulse collector` serve a receiver off loopback without auth_token "
        "(--allow-anonymous-ingest; e.g. behind a proxy that authenticates). Otherwise it "
        "refuses to start there. Env: RAGPULSE_OTLP__ALLOW_ANONYMOUS_INGEST.",
    )
    tls_cert_file: str | None = Field(
        None, description="PEM certificate (chain) for TLS on both receivers; with tls_key_file."
    )
    tls_key_file: str | None = Field(None, description="PEM private key of tls_cert_file.")
    workers: int = Field(
        None,  # type: ignore[assignment]  # resolved before validation (see _default_workers)
        ge=1,
        le=64,
        description="Collector processes serving the same ports (OTLP/HTTP: one listening socket, "
        "each new connection to the process with the fewest; OTLP/gRPC: SO_REUSEPORT). Python runs one core per process; each worker has its own queue, producer "
        "and recent-RAG-trace memory (a late root span arriving on another connection may land on "
        "a worker that has not seen its trace). Default: one per core this process may use "
        "(CPU affinity and the cgroup's CPU quota, at most 8) when the ports are fixed, else 1.",
    )

    @model_validator(mode="before")
    @classmethod
    def _default_workers(cls, data: Any) -> Any:
        if not isinstance(data, dict) or data.get("workers") is not None:
            return data
        fields = cls.model_fields
        ports = [data.get(f"{proto}_port", fields[f"{proto}_port"].default)
                 for proto in ("http", "grpc")
                 if str(data.get(f"{proto}_enabled", True)).lower() not in ("false", "0")]
        fixed = all(str(p).strip() not in ("0", "") for p in ports)
        return {**data, "workers": min(available_cores(), 8) if fixed else 1}

    @model_validator(mode="after")
    def _check(self) -> OtlpSettings:
        if not (self.http_enabled or self.grpc_enabled):
            raise ValueError("enable at least one of http_enabled, grpc_enabled")
        if (self.tls_cert_file is None) != (self.tls_key_file is None):
            raise ValueError("tls_cert_file and tls_key_file go together")
        if self.max_decompressed_bytes < self.max_body_bytes:
            raise ValueError("max_decompressed_bytes must be >= max_body_bytes")
        if self.max_inflight_bytes < self.max_body_bytes:
            raise ValueError("max_inflight_bytes must be >= max_body_bytes (one request always fits)")
        if self.workers > 1 and (
            (self.http_enabled and self.http_port == 0) or (self.grpc_enabled and self.grpc_port == 0)
        ):
            raise ValueError("workers > 1 need fixed ports: every worker binds the same ones")
        return self


class FilterSettings(_Frozen):
    """Which traces are produced to Kafka.

    ``rag`` keeps a trace when the request holds at least one RAG span of it (a span of any
    convention declared in :mod:`ragpulse.common.conventions`), together with the trace's other
    spans in that request (the HTTP root, database calls). Spans of a trace that arrive in a *later*
    request without a RAG span of their own (typically the root span, which ends last) are kept
    when the trace id was seen with a RAG span within the last ``remember_traces`` RAG traces
    (two generations of ``remember_traces`` ids each: at most about twice as many held). Spans
    that arrive *before* any RAG span of their trace is seen are dropped and counted: buffering every non-RAG span on the chance that a RAG span follows would cost
    unbounded memory for the common non-RAG traffic.
    """

    mode: Literal["rag", "all"] = "rag"
    remember_traces: int = Field(
        100_000, ge=0, le=10_000_000, description="RAG trace ids remembered for late spans."
    )


class QueueSettings(_Frozen):
    """Spans accepted but not yet acknowledged by Kafka: the collector's only buffer."""

    max_spans: int = Field(200_000, ge=1, description="Above this, requests get 429.")
    max_bytes: int = Field(256 * _MiB, ge=_MiB, description="Above this, requests get 429.")


LINGER_MS_ENQUEUE = 50
"""``producer.linger_ms`` by default with ``confirm=enqueue`` (the default)."""
LINGER_MS_ACK = 5
"""``producer.linger_ms`` by default with ``confirm=ack``: each request waits out the linger."""


class ProducerSettings(_Frozen):
    """kafka-python producer tuning (acks=all, idempotent, lz4 via ``KafkaSettings.compression``)."""

    acks: Literal["all", "1", "0"] = "all"
    linger_ms: int = Field(
        None,  # type: ignore[assignment]  # resolved before validation (see _default_linger)
        ge=0,
        le=10_000,
        description="Wait this long to fill a partition's batch before sending it. Default: "
        "50 with confirm=enqueue (the answer does not wait for Kafka, so a longer wait costs "
        "clients nothing and makes produce requests ~10x fewer and larger: the broker's CPU per "
        "span drops 4-6x, docs/benchmarks.md), 5 with confirm=ack (every request waits for it).",
    )
    batch_size: int = Field(
        1 * _MiB, ge=16_384, description="Per-partition batch bytes (before compression)."
    )
    max_request_size: int = Field(
        1_000_000,
        ge=16_384,
        description="Largest record; a larger per-trace record is rejected (partial success). "
        "Matches otelcol's max_message_bytes default and Kafka's message.max.bytes.",
    )
    delivery_timeout_ms: int = Field(
        30_000, ge=1_000, description="Give up on a record after this long (counted as failed)."
    )
    max_block_ms: int = Field(
        2_000, ge=100, description="Longest wait for topic metadata in a request (then 503)."
    )
    idempotent: bool = True
    partitions: int = Field(
        6, ge=1, le=10_000, description="Partitions when the collector creates the topic."
    )
    create_topic: bool = True
    records: Literal["per_partition", "per_trace"] = Field(
        "per_partition",
        description="What one Kafka record holds. per_partition (default): every trace of one "
        "request that goes to the same partition, unkeyed, the partition chosen from each trace "
        "id as for the keyed record (so each trace stays on one partition, also beside otelcol "
        "on a shared topic); fewer, larger records: less producer and delivery-report work per "
        "span, but one failed record fails all its traces. per_trace: one trace of one request, "
        "keyed by its trace id (otelcol-contrib's kafka exporter with partition_traces_by_id: "
        "true, exactly). docs/deploy.md, 'Kafka records'.",
    )
    confirm: Literal["enqueue", "ack"] = Field(
        "enqueue",
        description="Answer OTLP requests once spans are queued (like otelcol with its sending "
        "queue) or only after Kafka acknowledged them (no loss on a collector crash, lower "
        "throughput per client connection).",
    )
    ack_timeout_s: float = Field(10.0, gt=0, le=300, description="confirm=ack: wait this long.")

    @model_validator(mode="before")
    @classmethod
    def _default_linger(cls, data: Any) -> Any:
        if not isinstance(data, dict) or data.get("linger_ms") is not None:
            return data
        confirm = data.get("confirm", cls.model_fields["confirm"].default)
        return {**data, "linger_ms": LINGER_MS_ACK if confirm == "ack" else LINGER_MS_ENQUEUE}

    @model_validator(mode="after")
    def _check(self) -> ProducerSettings:
        if self.idempotent and self.acks != "all":
            raise ValueError("idempotent producer needs acks=all")
        if self.delivery_timeout_ms < self.linger_ms + 1_000:
            raise ValueError("delivery_timeout_ms must be at least linger_ms + 1000")
        return self


class CollectorSettings(BaseSettings):
    """Everything ``ragpulse collector`` needs; constructed from arguments, then ``RAGPULSE_*``."""

    model_config = SettingsConfigDict(
        env_prefix="RAGPULSE_",
        env_nested_delimiter="__",
        frozen=True,
        extra="ignore",  # other components' RAGPULSE_* variables share the environment
    )

    otlp: OtlpSettings = OtlpSettings()
    kafka: KafkaSettings = KafkaSettings()
    queue: QueueSettings = QueueSettings()
    producer: ProducerSettings = ProducerSettings()
    filter: FilterSettings = FilterSettings()

    @model_validator(mode="after")
    def _check(self) -> CollectorSettings:
        if self.producer.max_request_size > self.queue.max_bytes:
            raise ValueError("producer.max_request_size must be <= queue.max_bytes")
        return self
