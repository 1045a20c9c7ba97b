"""ragpulse.common.schema: what the scorer writes to ClickHouse and the dashboards read.

The scorer (writer) and the dashboards (reader) both depend on this package, never on each
other's modules for it:

* :mod:`.clickhouse` — the tables and views as data, their DDL, and versioned, idempotent
  migrations (:func:`init_schema`); :data:`SCORE_COLUMNS` / :data:`HEALTH_COLUMNS` are the row
  layouts the writer inserts.
* :mod:`.reasons` — the stable strings of the ``reason`` column of null score rows that trace
  extraction produces, and :data:`ADVICE`, the remedy shown beside each.

Import from this package, not from its modules.
"""

from .clickhouse import (
    HEALTH_COLUMNS,
    MIGRATIONS,
    SCORE_COLUMNS,
    ClusterName,
    Column,
    DatabaseName,
    Migration,
    MigrationReport,
    SchemaError,
    SchemaSettings,
    Table,
    View,
    applied_versions,
    cluster_statements,
    create_table_sql,
    init_schema,
    latest_version,
    validate_identifier,
)
from .reasons import ADVICE, CONTENT_NOT_CAPTURED, CONTENT_SETTINGS, NOT_RAG, content_advice

__all__ = [
    "ADVICE",
    "CONTENT_NOT_CAPTURED",
    "CONTENT_SETTINGS",
    "HEALTH_COLUMNS",
    "MIGRATIONS",
    "NOT_RAG",
    "SCORE_COLUMNS",
    "ClusterName",
    "Column",
    "DatabaseName",
    "Migration",
    "MigrationReport",
    "SchemaError",
    "SchemaSettings",
    "Table",
    "View",
    "applied_versions",
    "cluster_statements",
    "content_advice",
    "create_table_sql",
    "init_schema",
    "latest_version",
    "validate_identifier",
]
