"""ragpulse.scorer.store: the ClickHouse side of the scorer.

Schema and migrations (defined in :mod:`ragpulse.common.schema`, re-exported here for the
commands that apply them), row types (:mod:`.rows`), the batched acknowledged writer
(:mod:`.writer`) and its retry policy (:mod:`.retry`), ``pipeline_health`` rows
(:mod:`.pipeline_health`) and :func:`open_store`, which opens a client for a ``chdb://`` or
``http(s)://`` DSN and follows the process that owns a chDB directory to its facade
(:mod:`.client`; the facade itself is ``ragpulse.deploy.facade``).
"""

from ragpulse.common.schema import (
    MIGRATIONS,
    ClusterName,
    DatabaseName,
    MigrationReport,
    SchemaError,
    SchemaSettings,
    applied_versions,
    init_schema,
    latest_version,
    validate_identifier,
)

from .client import (
    DEFAULT_DSN,
    OwnerInfo,
    StoreSettings,
    chdb_path,
    credentials_from_env,
    dsn_scheme,
    legacy_store_note,
    lock_holder,
    open_store,
    read_owner,
    remove_owner,
    write_owner,
)
from .errors import (
    PermanentStoreError,
    RetryableStoreError,
    StoreError,
    StoreLockedError,
    WriterClosed,
    WriterFull,
    is_retryable,
)
from .pipeline_health import PipelineHealthRecorder, PipelineHealthSampler
from .retry import RetryPolicy, RetrySettings
from .rows import (
    DEFAULT_EVIDENCE_CHARS,
    DEFAULT_MAX_UNSUPPORTED,
    PipelineHealthRow,
    ScoredTraceMeta,
    ScoreRow,
    columns_of,
    rows_from_scores,
    safe_label,
    safe_text,
    unsupported_column,
    without_controls,
    without_format,
)
from .writer import (
    BatchWriter,
    ScoreWriter,
    WriteAck,
    WriterSettings,
    build_pipeline_health_writer,
    build_score_writer,
)

__all__ = [
    "DEFAULT_DSN",
    "DEFAULT_EVIDENCE_CHARS",
    "DEFAULT_MAX_UNSUPPORTED",
    "MIGRATIONS",
    "BatchWriter",
    "ClusterName",
    "DatabaseName",
    "MigrationReport",
    "OwnerInfo",
    "PermanentStoreError",
    "PipelineHealthRecorder",
    "PipelineHealthRow",
    "PipelineHealthSampler",
    "RetryPolicy",
    "RetrySettings",
    "RetryableStoreError",
    "SchemaError",
    "SchemaSettings",
    "ScoreRow",
    "ScoreWriter",
    "ScoredTraceMeta",
    "StoreError",
    "StoreLockedError",
    "StoreSettings",
    "WriteAck",
    "WriterClosed",
    "WriterFull",
    "WriterSettings",
    "applied_versions",
    "build_pipeline_health_writer",
    "build_score_writer",
    "chdb_path",
    "columns_of",
    "credentials_from_env",
    "dsn_scheme",
    "init_schema",
    "is_retryable",
    "latest_version",
    "legacy_store_note",
    "lock_holder",
    "open_store",
    "read_owner",
    "remove_owner",
    "rows_from_scores",
    "safe_label",
    "safe_text",
    "unsupported_column",
    "validate_identifier",
    "without_controls",
    "without_format",
    "write_owner",
]
