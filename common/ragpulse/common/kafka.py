"""The Kafka wire contract every ragpulse component shares: connection settings, topic
provisioning and the trace-id partitioner.

One :class:`KafkaSettings` model describes how to reach the cluster (bootstrap servers, TLS/SASL)
and which topics carry spans, so the collector (producer), the scorer (consumer group) and
``ragpulse up`` agree by construction. Components nest it in their own pydantic-settings model, so
it is configured as ``RAGPULSE_KAFKA__BOOTSTRAP_SERVERS=...`` and so on.

The record format on ``topic`` is the OpenTelemetry Collector kafka exporter's
``encoding: otlp_proto`` with ``partition_traces_by_id: true``: value = serialized
``ExportTraceServiceRequest`` holding one trace, key = the trace id as 32 lowercase hex characters.
"""

from __future__ import annotations

import logging
import struct
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

__all__ = [
    "KafkaSettings",
    "KafkaUnavailable",
    "TopicError",
    "ensure_topic",
    "partition_for_key",
    "partitions_for_keys",
]

log = logging.getLogger(__name__)

Compression = Literal["none", "gzip", "snappy", "lz4", "zstd"]
SecurityProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
SaslMechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI"]


class TopicError(RuntimeError):
    """A topic could not be created or has an incompatible layout (permanent: fix the config)."""


class KafkaUnavailable(RuntimeError):
    """The cluster could not be reached in time (retryable: Kafka down, wrong address)."""


class KafkaSettings(BaseModel):
    """Where the Kafka cluster is and which topics ragpulse uses.

    Immutable and validated on construction; invalid values raise ``pydantic.ValidationError``
    with the field name, so a bad ``RAGPULSE_KAFKA__*`` variable fails at start-up, not later.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    bootstrap_servers: str = Field(
        "127.0.0.1:9092",
        description="Comma-separated host:port list used to discover the cluster.",
    )
    topic: str = Field("otlp_spans", description="Topic carrying one ExportTraceServiceRequest per trace.")
    dlq_topic: str = Field(
        "otlp_spans.dlq", description="Dead-letter topic for records the scorer cannot decode."
    )
    compression: Compression = Field(
        "lz4", description="Producer compression codec (lz4: the cheapest in CPU per byte saved, as "
        "otelcol's kafka exporter is usually configured)."
    )
    client_id: str = Field("ragpulse", description="Client id reported to the broker (quotas, logs).")
    security_protocol: SecurityProtocol = "PLAINTEXT"
    sasl_mechanism: SaslMechanism | None = None
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    ssl_cafile: str | None = Field(None, description="CA bundle to verify the brokers (SSL, SASL_SSL).")
    ssl_certfile: str | None = Field(None, description="Client certificate for mutual TLS.")
    ssl_keyfile: str | None = Field(None, description="Private key of ssl_certfile.")
    request_timeout_ms: int = Field(
        30_000, ge=1_000, le=600_000, description="Per-request timeout for produce/admin calls."
    )
    bootstrap_timeout_ms: int = Field(
        10_000,
        ge=500,
        le=600_000,
        description="How long a new client tries to reach the cluster before failing start-up.",
    )
    rdkafka: dict[str, str] = Field(
        default_factory=dict,
        description="Extra librdkafka properties for the collector's producer, e.g. "
        '{"sasl.oauthbearer.method": "oidc", ...} (https://github.com/confluentinc/librdkafka/'
        "blob/master/CONFIGURATION.md). They override what ragpulse derives from the fields above.",
    )

    @field_validator("bootstrap_servers")
    @classmethod
    def _check_servers(cls, value: str) -> str:
        servers = [s.strip() for s in value.split(",") if s.strip()]
        if not servers:
            raise ValueError("needs at least one host:port")
        for server in servers:
            host, sep, port = server.rpartition(":")
            if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ValueError(f"{server!r} is not host:port")
        return ",".join(servers)

    @field_validator("topic", "dlq_topic")
    @classmethod
    def _check_topic(cls, value: str) -> str:
        # Kafka's own rule (kafka.common.internals.Topic): [a-zA-Z0-9._-]{1,249}, not "." or "..".
        if not value or len(value) > 249 or value in {".", ".."}:
            raise ValueError(f"invalid topic name {value!r}")
        if not all(c.isascii() and (c.isalnum() or c in "._-") for c in value):
            raise ValueError(f"invalid topic name {value!r}: only [a-zA-Z0-9._-] are allowed")
        return value

    @model_validator(mode="after")
    def _check_security(self) -> KafkaSettings:
        if self.topic == self.dlq_topic:
            raise ValueError("dlq_topic must differ from topic")
        if self.security_protocol.startswith("SASL"):
            if self.sasl_mechanism is None:
                raise ValueError(f"security_protocol {self.security_protocol} needs sasl_mechanism")
            if self.sasl_mechanism in {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"} and (
                not self.sasl_username or self.sasl_password is None
            ):
                raise ValueError(f"sasl_mechanism {self.sasl_mechanism} needs sasl_username and sasl_password")
        if (self.ssl_certfile is None) != (self.ssl_keyfile is None):
            raise ValueError("ssl_certfile and ssl_keyfile go together")
        return self

    @property
    def servers(self) -> list[str]:
        """The bootstrap servers as a list."""
        return self.bootstrap_servers.split(",")

    def client_kwargs(self) -> dict[str, Any]:
        """Connection keyword arguments common to kafka-python's producer, consumer and admin client.

        Component-specific options (acks, linger, group, session timeout) are added by each caller.
        """
        kwargs: dict[str, Any] = {
            "bootstrap_servers": self.servers,
            "client_id": self.client_id,
            "security_protocol": self.security_protocol,
            "request_timeout_ms": self.request_timeout_ms,
            "bootstrap_timeout_ms": self.bootstrap_timeout_ms,
        }
        if self.sasl_mechanism is not None:
            kwargs["sasl_mechanism"] = self.sasl_mechanism
            if self.sasl_username is not None:
                kwargs["sasl_plain_username"] = self.sasl_username
            if self.sasl_password is not None:
                kwargs["sasl_plain_password"] = self.sasl_password.get_secret_value()
        for name in ("ssl_cafile", "ssl_certfile", "ssl_keyfile"):
            if getattr(self, name) is not None:
                kwargs[name] = getattr(self, name)
        return kwargs

    def rdkafka_config(self) -> dict[str, Any]:
        """The connection properties of librdkafka (the collector's producer): the same cluster,
        client id, TLS and SASL as :meth:`client_kwargs`, then :attr:`rdkafka` on top."""
        conf: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap_servers,
            "client.id": self.client_id,
            "security.protocol": self.security_protocol.lower(),
            "socket.connection.setup.timeout.ms": self.bootstrap_timeout_ms,
            # A metadata request for a missing topic must not create it with the broker's
            # defaults: topics are created explicitly, with the partitions asked for.
            "allow.auto.create.topics": False,
        }
        if self.sasl_mechanism is not None:
            conf["sasl.mechanism"] = self.sasl_mechanism
            if self.sasl_username is not None:
                conf["sasl.username"] = self.sasl_username
            if self.sasl_password is not None:
                conf["sasl.password"] = self.sasl_password.get_secret_value()
        for field, prop in (("ssl_cafile", "ssl.ca.location"), ("ssl_certfile", "ssl.certificate.location"),
                            ("ssl_keyfile", "ssl.key.location")):
            if getattr(self, field) is not None:
                conf[prop] = getattr(self, field)
        conf.update(self.rdkafka)
        return conf

    def producer_compression(self) -> str | None:
        """The value for kafka-python's ``compression_type`` (``None`` means uncompressed)."""
        return None if self.compression == "none" else self.compression


def ensure_topic(
    settings: KafkaSettings,
    partitions: int,
    *,
    topic: str | None = None,
    replication_factor: int = 1,
    timeout_s: float = 30.0,
) -> bool:
    """Create ``topic`` (default ``settings.topic``) with ``partitions`` partitions if it is missing.

    Blocks for at most about ``timeout_s`` (metadata + CreateTopics round trips). Returns ``True``
    when this call created the topic, ``False`` when it already existed. An existing topic with
    fewer partitions than requested is logged, not altered: partition counts only grow, the key →
    partition mapping would move, and tansu does not support CreatePartitions at all.

    Raises :class:`TopicError` when creation is refused (permanent), and
    ``kafka.errors.KafkaTimeoutError`` / ``NoBrokersAvailable`` when the cluster is unreachable
    within ``settings.bootstrap_timeout_ms`` (retryable). Safe to call concurrently from several processes: losing the creation race is
    the same as finding the topic.
    """
    if partitions < 1:
        raise ValueError("partitions must be >= 1")
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic
    from kafka.errors import TopicAlreadyExistsError

    name = topic or settings.topic
    kwargs = settings.client_kwargs()
    kwargs["request_timeout_ms"] = max(1_000, int(timeout_s * 1000))
    admin = KafkaAdminClient(**kwargs)
    try:
        existing = _partition_count(admin, name)
        if existing is not None:
            if existing < partitions:
                log.warning(
                    "topic %s exists with %d partitions (< %d requested); leaving it as is",
                    name,
                    existing,
                    partitions,
                )
            return False
        try:
            admin.create_topics(
                [NewTopic(name, num_partitions=partitions, replication_factor=replication_factor)],
                timeout_ms=int(timeout_s * 1000),
            )
        except TopicAlreadyExistsError:
            return False
        except Exception as exc:  # kafka-python raises per-error-code subclasses of KafkaError
            if type(exc).__name__ == "TopicAlreadyExistsError":
                return False
            raise TopicError(f"cannot create topic {name!r}: {exc}") from exc
        log.info("created topic %s with %d partitions", name, partitions)
        return True
    finally:
        admin.close()


def _partition_count(admin: Any, topic: str) -> int | None:
    """Partitions of ``topic`` according to the cluster, or ``None`` when it does not exist."""
    if topic not in set(admin.list_topics()):
        return None
    for described in admin.describe_topics([topic]):
        if described.get("topic") == topic and not described.get("error_code"):
            return len(described.get("partitions") or [])
    return None


def partition_for_key(key: bytes, partitions: int) -> int:
    """The partition the OpenTelemetry Collector's kafka exporter picks for a keyed record.

    otelcol-contrib's franz-go client uses ``StickyKeyPartitioner(SaramaCompatHasher(fnv32a))``
    (``internal/kafka/client.go``): FNV-1a 32 of the key, as a signed int32, Go's truncated
    remainder, then the absolute value. Using the same function here keeps every span of a
    trace on one partition even when this collector and otelcol feed the same topic (Kafka's
    Java default, murmur2, would spread them over two partitions).
    """
    h = 0x811C9DC5
    for byte in key:
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    if h >= 0x80000000:
        h -= 0x100000000
    return abs(h) % partitions


def partitions_for_keys(keys: list[bytes], partitions: int) -> list[int]:
    """:func:`partition_for_key` for many keys at once.

    Trace-id keys all have 32 bytes. FNV-1a is sequential within a key, but independent across
    keys: the keys' 32-bit states are packed into one Python integer, 64 bits apart, and each of
    the 32 steps is one XOR, one multiplication and one mask on that integer (a state times the
    25-bit prime stays below 2**64, so lanes never overlap). About 2.5 times faster than the
    scalar loop and 3 times faster than numpy at a request's 10-100 keys. Other key shapes fall
    back to the scalar function.
    """
    n = len(keys)
    if n < 2 or any(len(k) != 32 for k in keys):
        return [partition_for_key(k, partitions) for k in keys]
    joined = b"".join(keys)
    mask = int.from_bytes(b"\xff\xff\xff\xff\x00\x00\x00\x00" * n, "little")
    state = int.from_bytes(b"\xc5\x9d\x1c\x81\x00\x00\x00\x00" * n, "little")  # the offset basis
    column = bytearray(8 * n)
    for c in range(32):
        column[0::8] = joined[c::32]  # byte c of every key, one per lane
        state = ((state ^ int.from_bytes(column, "little")) * 0x01000193) & mask
    out = []
    for h, _ in struct.iter_unpack("<II", state.to_bytes(8 * n, "little")):
        if h >= 0x80000000:  # as Go's int32, then its truncated remainder, then abs
            h -= 0x100000000
        out.append(abs(h) % partitions)
    return out
