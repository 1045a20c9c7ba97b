"""Settings of the live scorer: one frozen model, configured by flags or ``RAGPULSE_*`` variables.

Nested models use ``__`` in environment variables, e.g. ``RAGPULSE_KAFKA__BOOTSTRAP_SERVERS``,
``RAGPULSE_CONSUMER__GROUP_ID``, ``RAGPULSE_ASSEMBLY__GRACE_S``. Everything is validated when the
model is built, so a bad value fails at start-up with the field's name.
"""

from __future__ import annotations

import os
import re
import socket
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from ragpulse.common import KafkaSettings, env_list
from ragpulse.common.schema import DatabaseName

from ..judges.nli.settings import NliJudgeSettings
from ..judges.registry import DEFAULT_JUDGE, JudgeSetting
from ..metrics import DEFAULT_METRICS, METRICS
from ..privacy import PrivacySettings
from ..store.client import DEFAULT_DSN, dsn_scheme
from ..store.writer import WriterSettings
from ..traces.extract import ExtractionSettings
from ..traces.sampling import SamplingSettings
from .trace_buffer import AssemblySettings

__all__ = [
    "ConsumerSettings",
    "EvaluateSettings",
    "ScorerSettings",
    "WriteSettings",
]


class ConsumerSettings(BaseModel):
    """The Kafka consumer group (kafka-python ``KafkaConsumer``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    group_id: str = Field("ragpulse-scorer", min_length=1, description="consumer group")
    session_timeout_ms: int = Field(
        6000,
        ge=1000,
        le=300_000,
        description="explicit: the client default (45 s) makes a tansu group join take 20 s",
    )
    heartbeat_interval_ms: int = Field(2000, ge=100, le=100_000)
    max_poll_interval_ms: int = Field(300_000, ge=1000, description="max time between polls")
    max_poll_records: int = Field(500, ge=1, le=100_000, description="records per poll")
    poll_timeout_ms: int = Field(100, ge=1, le=10_000, description="how long one poll may wait")
    max_partition_fetch_bytes: int = Field(
        16 * 1024 * 1024,
        ge=1024,
        description="per-partition fetch size; must exceed the largest record",
    )
    fetch_max_bytes: int = Field(64 * 1024 * 1024, ge=1024)
    commit_interval_s: float = Field(
        1.0, gt=0.0, le=300.0, description="how often offsets are committed"
    )
    revoke_drain_timeout_s: float = Field(
        2.0,
        ge=0.0,
        description="on rebalance, wait this long for in-flight traces of revoked partitions "
        "(capped at half the session timeout: heartbeats pause meanwhile)",
    )
    dead_letter: bool = Field(True, description="send undecodable records to kafka.dlq_topic")

    @model_validator(mode="after")
    def _check(self) -> ConsumerSettings:
        if self.heartbeat_interval_ms * 3 > self.session_timeout_ms:
            raise ValueError(
                f"heartbeat_interval_ms ({self.heartbeat_interval_ms}) must be at most a third of "
                f"session_timeout_ms ({self.session_timeout_ms})"
            )
        return self


class EvaluateSettings(BaseModel):
    """Which metrics are computed and how much work may be in flight."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # NoDecode: a comma-separated RAGPULSE_EVALUATE__METRICS is split below instead of being
    # parsed as JSON (a JSON list still works: the validator passes lists through).
    metrics: Annotated[tuple[str, ...], NoDecode] = Field(
        DEFAULT_METRICS, min_length=1, description="metric names, comma-separated or a JSON list")
    max_in_flight: int = Field(
        256,
        ge=1,
        le=100_000,
        description="traces handed to evaluate/write and not yet acknowledged; at the limit the "
        "consumer pauses its partitions",
    )
    max_concurrency: int = Field(16, ge=1, le=10_000, description="judge calls running at once")

    @field_validator("metrics", mode="before")
    @classmethod
    def _split(cls, v: object) -> object:
        return env_list(v)

    @field_validator("metrics")
    @classmethod
    def _known(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [m for m in v if m not in METRICS]
        if unknown:
            raise ValueError(f"unknown metrics {unknown}; known: {sorted(METRICS)}")
        return v


_ATTRIBUTE = re.compile(r"[A-Za-z0-9_.:/-]{1,64}")
# The why decomposition's own dimensions: a segment attribute must not take their names.
_RESERVED_SEGMENTS = frozenset({"all", "service", "environment", "model",
                                "prompt_version", "retriever_version"})


class WriteSettings(BaseModel):
    """What goes into score rows (``RAGPULSE_WRITE__*``).

    How rows are batched and retried is the ClickHouse writer's: ``writer``
    (``ragpulse.scorer.store.WriterSettings``, ``RAGPULSE_WRITER__*``), whose ``retry`` section
    is the one retry policy of writes and dead letters.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    excerpts: bool = Field(True, description="store question/answer excerpts, and the "
                           "unsupported statements with their closest passage (privacy switch)")
    max_excerpt_chars: int = Field(1000, ge=0, le=1_000_000)
    max_unsupported: int = Field(
        3, ge=0, le=20, description="unsupported statements stored per faithfulness score, "
        "lowest support first, each with the passage that came closest (0: none)")
    max_evidence_chars: int = Field(
        400, ge=0, le=10_000, description="characters kept of each unsupported statement and "
        "of its passage (never more than max_excerpt_chars)")
    segment_attributes: Annotated[tuple[str, ...], NoDecode] = Field(
        (), max_length=16, description="span attributes stored as segments of each row, e.g. "
        "http.route, app.doc_source, and `language` for the trace's detected language "
        "(comma-separated or a JSON list); `status --why` and the why panel rank them after "
        "the five built-in dimensions")
    max_segment_values: int = Field(
        50, ge=1, le=10_000, description="distinct values kept per segment attribute and "
        "scorer process; later new values are stored as 'other'")
    max_segment_chars: int = Field(64, ge=1, le=256,
                                   description="characters kept of a segment attribute's value")

    @field_validator("segment_attributes", mode="before")
    @classmethod
    def _split_attributes(cls, v: object) -> object:
        return env_list(v)

    @field_validator("segment_attributes")
    @classmethod
    def _attribute_names(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for name in v:
            if not _ATTRIBUTE.fullmatch(name):
                raise ValueError(f"segment attribute {name!r}: use 1-64 letters, digits and "
                                 "._-:/ (an OpenTelemetry attribute name)")
            if name in _RESERVED_SEGMENTS:
                raise ValueError(f"segment attribute {name!r} would share its name with a "
                                 f"dimension of its own; reserved: {sorted(_RESERVED_SEGMENTS)}")
        if len(set(v)) != len(v):
            raise ValueError(f"segment attributes {list(v)} name one attribute twice")
        return v


def _default_instance() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class ScorerSettings(BaseSettings):
    """Everything ``ragpulse scorer`` needs. ``ScorerSettings()`` reads the environment."""

    model_config = SettingsConfigDict(
        env_prefix="RAGPULSE_", env_nested_delimiter="__", frozen=True, extra="ignore"
    )

    kafka: KafkaSettings = Field(default_factory=KafkaSettings)
    consumer: ConsumerSettings = Field(default_factory=ConsumerSettings)
    assembly: AssemblySettings = Field(default_factory=AssemblySettings)
    evaluate: EvaluateSettings = Field(default_factory=EvaluateSettings)
    write: WriteSettings = Field(default_factory=WriteSettings)
    writer: WriterSettings = Field(default_factory=WriterSettings)
    sampling: SamplingSettings = Field(default_factory=SamplingSettings)
    extraction: ExtractionSettings = Field(default_factory=ExtractionSettings)
    privacy: PrivacySettings = Field(
        default_factory=PrivacySettings,
        description="PII redaction before judging and storing; store_text=false stores no trace text",
    )
    clickhouse: str = Field(
        DEFAULT_DSN,
        description="chdb:///abs/dir or chdb://rel/dir (this process owns the directory), or http(s)://host:8123",
    )
    database: DatabaseName = "rag"
    init_schema: bool = Field(
        True, description="create or migrate the schema at start-up (idempotent)"
    )
    judge: JudgeSetting = Field(DEFAULT_JUDGE, description="model | fast | nli | llm "
                                "(ragpulse.scorer.judges.registry; old names local-model, local)")
    judge_model: str | None = Field(None, description="LLM judge model")
    judge_base_url: str | None = Field(
        None, description="OpenAI-compatible base URL of the LLM judge"
    )
    nli: NliJudgeSettings = Field(
        default_factory=NliJudgeSettings,
        description="the NLI judge (judge nli): RAGPULSE_NLI__MODEL_DIR (required by that judge), "
        "__POSITIVE_LABEL, __THREADS, __BATCH_SIZE ...; its model is loaded at start-up",
    )
    drain_timeout_s: float = Field(
        30.0,
        ge=0.0,
        le=3600.0,
        description="on shutdown: finish, write and commit within this budget",
    )
    drain_buffered: bool = Field(
        True,
        description="on shutdown, score traces still waiting for their grace period (else "
        "they stay uncommitted and are assembled again by the next run)",
    )
    status_interval_s: float = Field(5.0, gt=0.0, description="status line period")
    pipeline_health_interval_s: float = Field(
        15.0, ge=0.0, description="write counters to pipeline_health this often (0: never)"
    )
    instance: str = Field(default_factory=_default_instance, description="name in pipeline_health")

    @field_validator("clickhouse")
    @classmethod
    def _dsn(cls, v: str) -> str:
        dsn_scheme(v)
        return v

    @model_validator(mode="after")
    def _nli_model_dir(self) -> ScorerSettings:
        if self.judge == "nli" and self.nli.model_dir is None:
            raise ValueError("judge nli needs nli.model_dir (--model-dir or "
                             "RAGPULSE_NLI__MODEL_DIR; docs/judges.md)")
        return self
