"""The ClickHouse schema as data, and versioned, idempotent migrations.

Every table is a :class:`Table` value (columns, engine, keys, TTL, settings) rendered to DDL by
:func:`create_table_sql`; materialized views are :class:`View` values. Keeping the schema as data,
not as hand-written strings scattered through the code, lets a cluster variant (``ReplicatedMergeTree``
+ ``Distributed``, ``ON CLUSTER``) be derived later by swapping engines, and lets the writer take its
column names and types from the same definition it inserts into.

The SQL is identical on chDB (``chdb:///path``) and a ClickHouse server: only features present in
both (ClickHouse >= 23.x, verified on chDB 26.9) are used.

Design, in short (docs/schema.md has the long form):

* ``scores``: one row per (trace, metric). ``ReplacingMergeTree(version)`` with
  ``ORDER BY (service, metric, toDate(ts), trace_id)``: dashboards always filter by service and
  metric and a time range (``toDate(ts)`` is a monotonic function of ``ts``, so the primary index
  prunes on ``ts`` ranges too), and ``trace_id`` last makes the sorting key the identity of a score,
  so a replayed row with a newer ``version`` replaces the old one. Daily partitions let TTL drop
  whole parts (``ttl_only_drop_parts``) instead of rewriting them.
* ``scores_1m``: per-minute ``AggregatingMergeTree`` rollup fed by a materialized view. Like every
  insert-time rollup it sees a replayed row twice (the view runs on insert, the replace happens at
  merge). Identical retried inserts are dropped by insert deduplication (tokens + a
  non-replicated deduplication window on both tables); re-*scored* replays are not. Alerts that
  must be exact read ``scores FINAL`` (or the ``scores_dedup`` view) instead.
* ``pipeline_health``: per-minute self-telemetry counters and gauges of the collector and the
  scorer, ``ReplacingMergeTree`` so a component re-flushing the current minute overwrites it.
* ``schema_migrations``: which migration versions were applied, with a checksum of their DDL.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Annotated, Any, Protocol

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

__all__ = [
    "HEALTH_COLUMNS",
    "MIGRATIONS",
    "SCORE_COLUMNS",
    "SEGMENTS_TYPE",
    "UNSUPPORTED_TYPE",
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
    "create_table_sql",
    "init_schema",
    "latest_version",
    "validate_identifier",
]

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


class SchemaError(RuntimeError):
    """The schema cannot be created or migrated (bad settings, drifted migrations, DDL failure)."""


def validate_identifier(name: str, what: str = "identifier") -> str:
    """Return ``name`` if it is a plain ClickHouse identifier, else raise ``ValueError``.

    Database and table names end up inside DDL, where ClickHouse accepts no query parameters, so
    they are restricted to ``[A-Za-z_][A-Za-z0-9_]*`` instead of being quoted.
    """
    if not isinstance(name, str) or not _IDENT.match(name):
        raise ValueError(f"{what} {name!r} must match [A-Za-z_][A-Za-z0-9_]* (at most 63 chars)")
    return name


# The one type for a settings field that names a ClickHouse database (every settings model uses
# it, so every component refuses the same names with the same message).
DatabaseName = Annotated[str, AfterValidator(lambda v: validate_identifier(v, "database"))]
ClusterName = Annotated[str, AfterValidator(lambda v: validate_identifier(v, "cluster"))]


class SchemaSettings(BaseModel):
    """Where the schema lives and how long data is kept. Frozen; validated on construction."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    database: DatabaseName = "rag"
    """Database holding every ragpulse table. Tests use unique names (``rag_<uuid8>``)."""
    ttl_days: int = Field(default=90, ge=1, le=36500)
    """Raw score rows older than this (by trace time ``ts``) are deleted."""
    rollup_ttl_days: int = Field(default=400, ge=1, le=36500)
    """Per-minute rollup rows older than this are deleted; longer than raw rows on purpose."""
    health_ttl_days: int = Field(default=30, ge=1, le=36500)
    """Pipeline-health rows older than this are deleted."""
    dedup_window: int = Field(default=1000, ge=0, le=1_000_000)
    """``non_replicated_deduplication_window``: how many recent insert blocks are remembered so an
    identical retried insert (same deduplication token) is dropped, rollup included. 0 disables."""

    cluster: ClusterName | None = None
    """ClickHouse cluster (a ``remote_servers`` name) for the replicated variant, ``None`` for one
    node. Set: every statement runs ``ON CLUSTER``, tables become ``Replicated*MergeTree`` named
    ``<table>_local`` with ``Distributed`` tables under the single-node names (same columns), so
    readers and the writer use the same names either way (see :func:`cluster_statements`)."""



@dataclass(frozen=True)
class Column:
    """One column: name, ClickHouse type and the optional default, codec and comment clauses."""

    name: str
    type: str
    default: str = ""
    """Full default clause, e.g. ``MATERIALIZED 1 / sampling_rate`` or ``DEFAULT ''``."""
    codec: str = ""
    comment: str = ""

    def sql(self) -> str:
        """The column's definition as it stands in ``CREATE TABLE``."""
        parts = [f"`{self.name}`", self.type]
        if self.default:
            parts.append(self.default)
        if self.codec:
            parts.append(f"CODEC({self.codec})")
        if self.comment:
            parts.append("COMMENT " + _sql_string(self.comment))
        return " ".join(parts)


@dataclass(frozen=True)
class Table:
    """A table definition. ``{…}`` placeholders in engine/partition/order/ttl are filled from
    :class:`SchemaSettings` (``ttl_days``, ``rollup_ttl_days``, ``health_ttl_days``, ``dedup_window``)."""

    name: str
    columns: tuple[Column, ...]
    engine: str
    order_by: str
    partition_by: str = ""
    ttl: str = ""
    indexes: tuple[str, ...] = ()
    constraints: tuple[str, ...] = ()
    settings: tuple[str, ...] = ()
    comment: str = ""

    def column(self, name: str) -> Column:
        """The column called ``name``; raises ``KeyError`` when there is none."""
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(name)

    @property
    def insertable(self) -> tuple[Column, ...]:
        """Columns a writer supplies (MATERIALIZED/ALIAS columns are computed by ClickHouse)."""
        return tuple(c for c in self.columns if not c.default.startswith(("MATERIALIZED", "ALIAS")))


@dataclass(frozen=True)
class View:
    """A materialized view ``TO`` an existing table (never an implicit ``.inner`` table, so the
    target can be inspected, backfilled and migrated like any other table)."""

    name: str
    to: str
    select: str


def _sql_string(s: str) -> str:
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _fmt(template: str, settings: SchemaSettings) -> str:
    return template.format(
        db=settings.database,
        ttl_days=settings.ttl_days,
        rollup_ttl_days=settings.rollup_ttl_days,
        health_ttl_days=settings.health_ttl_days,
        dedup_window=settings.dedup_window,
    )


def create_table_sql(table: Table, settings: SchemaSettings) -> str:
    """``CREATE TABLE IF NOT EXISTS db.table (...) ENGINE ...`` for ``table``."""
    body = [c.sql() for c in table.columns]
    body += [f"INDEX {ix}" for ix in table.indexes]
    body += [f"CONSTRAINT {ct}" for ct in table.constraints]
    lines = [
        f"CREATE TABLE IF NOT EXISTS `{settings.database}`.`{table.name}`",
        "(\n    " + ",\n    ".join(body) + "\n)",
        f"ENGINE = {_fmt(table.engine, settings)}",
    ]
    if table.partition_by:
        lines.append(f"PARTITION BY {_fmt(table.partition_by, settings)}")
    lines.append(f"ORDER BY ({_fmt(table.order_by, settings)})")
    if table.ttl:
        lines.append(f"TTL {_fmt(table.ttl, settings)}")
    if table.settings:
        lines.append("SETTINGS " + ", ".join(_fmt(s, settings) for s in table.settings))
    if table.comment:
        lines.append("COMMENT " + _sql_string(table.comment))
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# Tables

_LC = "LowCardinality(String)"

UNSUPPORTED_TYPE = ("Array(Tuple(statement String, context Int32, passage String, "
                    "support Nullable(Float32)))")
"""``scores.unsupported``: per faithfulness row, the statements the judge found unsupported
(lowest support first), each with the context (0-based; -1: none named) and the span of it that
came closest, and the judge's P(supported) (NULL for the LLM judge). Excerpts, like
``question``/``answer``: empty when excerpts are off."""
_UNSUPPORTED_COMMENT = "unsupported statements with the closest passage; empty when disabled"

SEGMENTS_TYPE = "Map(LowCardinality(String), String)"
"""``scores.segments``: further dimensions of the row, key to value: ``language`` (en, ja, zh,
other) and the span attributes listed in ``write.segment_attributes`` (e.g. ``http.route``),
each value cleaned, cut and capped per key by the scorer. Empty on rows written before
migration 8 (or by a scorer that sets none)."""
_SEGMENTS_COMMENT = "language and configured span attributes (capped per key); empty when unset"

SCORES = Table(
    name="scores",
    columns=(
        # String, not FixedString(32): clients return FixedString as bytes, and Grafana data links,
        # `WHERE trace_id = '…'` and joins with other trace stores all want the plain hex text.
        Column("trace_id", "String", comment="W3C trace id, 32 lowercase hex chars"),
        Column("span_id", "String", comment="root span id, 16 lowercase hex chars"),
        Column("ts", "DateTime64(3, 'UTC')", codec="Delta, ZSTD(1)",
               comment="trace end time; must come from the trace, never the wall clock (replays)"),
        Column("scored_at", "DateTime64(3, 'UTC')", codec="Delta, ZSTD(1)"),
        Column("service", _LC),
        Column("environment", _LC),
        Column("model", _LC, comment="the RAG app's generation model"),
        Column("prompt_version", _LC),
        Column("retriever_version", _LC),
        Column("metric", _LC),
        Column("value", "Nullable(Float64)", comment="in [0, 1]; NULL with status/reason, never NaN"),
        Column("status", _LC, comment="ok | null | error | skipped"),
        Column("reason", _LC, comment="why value is NULL; empty when status = ok"),
        Column("interval_low", "Nullable(Float64)"),
        Column("interval_high", "Nullable(Float64)"),
        Column("judge", _LC, comment="llm | local"),
        Column("judge_model", _LC),
        Column("judge_prompt_version", _LC),
        Column("llm_calls", "Float32", comment="this score's share of the judge calls"),
        Column("prompt_tokens", "Float32"),
        Column("completion_tokens", "Float32"),
        Column("judge_latency_ms", "Float32"),
        Column("sampling_rate", "Float64", comment="probability this trace was scored, (0, 1]"),
        Column("weight", "Float64", default="MATERIALIZED 1 / sampling_rate",
               comment="reweighting factor: sum(weight) estimates the unsampled count"),
        Column("counts", "Map(LowCardinality(String), UInt32)",
               comment="the metric's counts, e.g. statements / supported"),
        Column("question", "String", codec="ZSTD(3)", comment="excerpt; empty when disabled"),
        Column("answer", "String", codec="ZSTD(3)", comment="excerpt; empty when disabled"),
        Column("explanation", "String", codec="ZSTD(3)"),
        Column("unsupported", UNSUPPORTED_TYPE, codec="ZSTD(3)",
               comment=_UNSUPPORTED_COMMENT),
        Column("segments", SEGMENTS_TYPE, comment=_SEGMENTS_COMMENT),
        Column("version", "UInt64", comment="ReplacingMergeTree version: scored_at in ms"),
    ),
    engine="ReplacingMergeTree(version)",
    partition_by="toYYYYMMDD(ts)",
    order_by="service, metric, toDate(ts), trace_id",
    ttl="toDateTime(ts) + INTERVAL {ttl_days} DAY DELETE",
    indexes=(
        # Point lookups from a Grafana data link or `ragpulse report --trace`.
        "trace_id_bf trace_id TYPE bloom_filter(0.01) GRANULARITY 4",
        # Sub-day time ranges: the key only has toDate(ts).
        "ts_minmax ts TYPE minmax GRANULARITY 1",
    ),
    constraints=("sampling_rate_range CHECK sampling_rate > 0 AND sampling_rate <= 1",),
    settings=(
        "ttl_only_drop_parts = 1",
        "non_replicated_deduplication_window = {dedup_window}",
    ),
    comment="ragpulse: one row per (trace, metric); replays overwrite (read with FINAL)",
)

_ROLLUP_DIMS = ("service", "environment", "model", "prompt_version", "retriever_version",
                "metric", "judge")

SCORES_1M = Table(
    name="scores_1m",
    columns=(
        Column("minute", "DateTime('UTC')"),
        *(Column(d, _LC) for d in _ROLLUP_DIMS),
        Column("rows", "SimpleAggregateFunction(sum, UInt64)", comment="score rows, any status"),
        Column("n_ok", "SimpleAggregateFunction(sum, UInt64)"),
        Column("n_null", "SimpleAggregateFunction(sum, UInt64)"),
        Column("n_error", "SimpleAggregateFunction(sum, UInt64)"),
        Column("n_skipped", "SimpleAggregateFunction(sum, UInt64)"),
        Column("value_count", "AggregateFunction(count)", comment="countState of non-NULL values"),
        Column("value_sum", "SimpleAggregateFunction(sum, Float64)"),
        Column("value_avg", "AggregateFunction(avg, Float64)"),
        Column("value_quantiles", "AggregateFunction(quantilesTDigest(0.5, 0.9, 0.99), Float64)"),
        Column("weight_sum", "SimpleAggregateFunction(sum, Float64)",
               comment="sum of 1/sampling_rate over scored (ok) rows"),
        Column("weighted_value_sum", "SimpleAggregateFunction(sum, Float64)",
               comment="sum of value/sampling_rate: weighted mean = this / weight_sum"),
        Column("llm_calls", "SimpleAggregateFunction(sum, Float64)"),
        Column("prompt_tokens", "SimpleAggregateFunction(sum, Float64)"),
        Column("completion_tokens", "SimpleAggregateFunction(sum, Float64)"),
        Column("judge_latency_ms_sum", "SimpleAggregateFunction(sum, Float64)"),
    ),
    engine="AggregatingMergeTree",
    partition_by="toYYYYMM(minute)",
    order_by="service, metric, minute, environment, model, prompt_version, retriever_version, judge",
    ttl="minute + INTERVAL {rollup_ttl_days} DAY DELETE",
    # The view inherits insert deduplication only when its target remembers blocks too.
    settings=("non_replicated_deduplication_window = {dedup_window}",),
    comment="ragpulse: per-minute rollup of scores (insert-time; a re-scored replay counts twice)",
)

SCORES_1M_MV = View(
    name="scores_1m_mv",
    to="scores_1m",
    select="""SELECT
    toStartOfMinute(ts) AS minute,
    service, environment, model, prompt_version, retriever_version, metric, judge,
    count() AS rows,
    countIf(status = 'ok') AS n_ok,
    countIf(status = 'null') AS n_null,
    countIf(status = 'error') AS n_error,
    countIf(status = 'skipped') AS n_skipped,
    countStateIf(value IS NOT NULL) AS value_count,
    sum(ifNull(value, 0)) AS value_sum,
    avgStateIf(assumeNotNull(value), value IS NOT NULL) AS value_avg,
    quantilesTDigestStateIf(0.5, 0.9, 0.99)(assumeNotNull(value), value IS NOT NULL) AS value_quantiles,
    sumIf(1 / sampling_rate, value IS NOT NULL) AS weight_sum,
    sumIf(assumeNotNull(value) / sampling_rate, value IS NOT NULL) AS weighted_value_sum,
    sum(toFloat64(llm_calls)) AS llm_calls,
    sum(toFloat64(prompt_tokens)) AS prompt_tokens,
    sum(toFloat64(completion_tokens)) AS completion_tokens,
    sum(toFloat64(judge_latency_ms)) AS judge_latency_ms_sum
FROM `{db}`.`scores`
GROUP BY minute, service, environment, model, prompt_version, retriever_version, metric, judge""",
)

PIPELINE_HEALTH = Table(
    name="pipeline_health",
    columns=(
        Column("minute", "DateTime('UTC')"),
        Column("component", _LC, comment="collector | scorer | up"),
        Column("instance", _LC, comment="host:pid or a configured name"),
        Column("name", _LC, comment="counter or gauge name, e.g. spans_received, consumer_lag"),
        Column("label", _LC, default="DEFAULT ''",
               comment="sub-key, e.g. the unscorable reason or the partition"),
        Column("kind", "Enum8('counter' = 1, 'gauge' = 2)"),
        Column("value", "Float64", comment="counter: increase within the minute; gauge: last value"),
        Column("written_at", "DateTime64(3, 'UTC')"),
    ),
    engine="ReplacingMergeTree(written_at)",
    partition_by="toYYYYMM(minute)",
    order_by="component, name, label, instance, minute",
    ttl="minute + INTERVAL {health_ttl_days} DAY DELETE",
    comment="ragpulse: per-minute self-telemetry; re-flushing a minute overwrites it (read FINAL)",
)

SCHEMA_MIGRATIONS = Table(
    name="schema_migrations",
    columns=(
        Column("version", "UInt32"),
        Column("name", "String"),
        Column("checksum", "String"),
        Column("applied_at", "DateTime64(3, 'UTC')"),
    ),
    engine="ReplacingMergeTree(applied_at)",
    order_by="version",
    comment="ragpulse: applied schema migrations",
)

SCORE_COLUMNS: tuple[Column, ...] = SCORES.insertable
"""The columns :class:`~ragpulse.scorer.store.rows.ScoreRow` fills, in insert order."""
HEALTH_COLUMNS: tuple[Column, ...] = PIPELINE_HEALTH.insertable

TABLES: dict[str, Table] = {t.name: t for t in (SCORES, SCORES_1M, PIPELINE_HEALTH, SCHEMA_MIGRATIONS)}


# --------------------------------------------------------------------------------------------
# Migrations


@dataclass(frozen=True)
class Migration:
    """One schema step. Statements are templates (``{db}``, ``{ttl_days}``…) and each must be
    idempotent on its own (``IF NOT EXISTS``), so a migration interrupted half-way is simply run
    again. The checksum covers the templates, not the rendered settings, so changing ``ttl_days``
    is not drift."""

    version: int
    name: str
    statements: tuple[str, ...]

    @property
    def checksum(self) -> str:
        """First 16 hex digits of the SHA-256 of the statement templates (drift check)."""
        h = hashlib.sha256()
        for s in self.statements:
            h.update(s.encode())
            h.update(b"\0")
        return h.hexdigest()[:16]

    def render(self, settings: SchemaSettings) -> list[str]:
        """The statements with ``settings`` filled in; with a cluster, each one rewritten for it
        (:func:`cluster_statements`)."""
        out = [_fmt(s, settings) for s in self.statements]
        if settings.cluster is not None:
            out = [c for s in out for c in cluster_statements(s, settings)]
        return out


def _table_template(table: Table) -> str:
    # Render with placeholder-preserving settings so the template (and its checksum) does not
    # depend on the configured TTLs or database.
    sentinel = SchemaSettings.model_construct(
        database="{db}", ttl_days="{ttl_days}", rollup_ttl_days="{rollup_ttl_days}",
        health_ttl_days="{health_ttl_days}", dedup_window="{dedup_window}",
    )
    return create_table_sql(table, sentinel)


def _view_template(view: View) -> str:
    return (
        f"CREATE MATERIALIZED VIEW IF NOT EXISTS `{{db}}`.`{view.name}` TO `{{db}}`.`{view.to}` AS\n"
        + view.select
    )


# Migration 1 was the first public schema (scores without excerpts/explanation); later versions
# only ever add. Never edit a released migration: add a new one (the checksum guards this).
_SCORES_V1 = replace(
    SCORES,
    columns=tuple(c for c in SCORES.columns
                  if c.name not in ("question", "answer", "explanation", "unsupported",
                                     "segments")),
)

# A plain view's columns are fixed when it is created (``SELECT *`` is expanded then), so a
# migration that adds a column to ``scores`` must replace ``scores_dedup`` too.
_DEDUP_VIEW = "CREATE OR REPLACE VIEW `{db}`.`scores_dedup` AS SELECT * FROM `{db}`.`scores` FINAL"

# A parameterized view: the same minutes as scores_1m, computed at query time from the
# deduplicated rows, so a re-scored replay is counted once. Costlier than the rollup (it reads raw
# rows with FINAL): meant for alerts and reports over short windows. Doubled braces survive the
# template formatting and become ClickHouse's {name:Type} view parameters.
_EXACT_ROLLUP = """CREATE VIEW IF NOT EXISTS `{db}`.`scores_1m_exact` AS
SELECT
    toStartOfMinute(ts) AS minute,
    service, environment, model, prompt_version, retriever_version, metric, judge,
    count() AS rows,
    countIf(status = 'ok') AS n_ok,
    countIf(status = 'null') AS n_null,
    countIf(status = 'error') AS n_error,
    countIf(status = 'skipped') AS n_skipped,
    count(value) AS value_count,
    avg(value) AS value_avg,
    sumIf(assumeNotNull(value) / sampling_rate, value IS NOT NULL)
        / sumIf(1 / sampling_rate, value IS NOT NULL) AS value_weighted_avg,
    quantilesTDigest(0.5, 0.9, 0.99)(value) AS value_quantiles,
    sumIf(1 / sampling_rate, value IS NOT NULL) AS weight_sum
FROM `{db}`.`scores` FINAL
WHERE ts >= {{from:DateTime64(3, 'UTC')}} AND ts < {{to:DateTime64(3, 'UTC')}}
GROUP BY minute, service, environment, model, prompt_version, retriever_version, metric, judge"""

MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "scores table", (
        "CREATE DATABASE IF NOT EXISTS `{db}`",
        _table_template(SCHEMA_MIGRATIONS),
        _table_template(_SCORES_V1),
    )),
    Migration(2, "per-minute rollup scores_1m and its materialized view", (
        _table_template(SCORES_1M),
        _view_template(SCORES_1M_MV),
    )),
    Migration(3, "pipeline_health table", (
        _table_template(PIPELINE_HEALTH),
    )),
    Migration(4, "scores: question/answer excerpts and the judge's explanation", (
        "ALTER TABLE `{db}`.`scores` ADD COLUMN IF NOT EXISTS `question` String CODEC(ZSTD(3)) "
        "COMMENT 'excerpt; empty when disabled' AFTER `counts`",
        "ALTER TABLE `{db}`.`scores` ADD COLUMN IF NOT EXISTS `answer` String CODEC(ZSTD(3)) "
        "COMMENT 'excerpt; empty when disabled' AFTER `question`",
        "ALTER TABLE `{db}`.`scores` ADD COLUMN IF NOT EXISTS `explanation` String CODEC(ZSTD(3)) "
        "AFTER `answer`",
    )),
    Migration(5, "scores_dedup view: the replay-exact read path", (
        "CREATE VIEW IF NOT EXISTS `{db}`.`scores_dedup` AS SELECT * FROM `{db}`.`scores` FINAL",
    )),
    Migration(6, "scores_1m_exact(from, to): the per-minute rollup computed from scores FINAL", (
        _EXACT_ROLLUP,
    )),
    Migration(7, "scores: unsupported statements with the closest passage", (
        "ALTER TABLE `{db}`.`scores` ADD COLUMN IF NOT EXISTS `unsupported` "
        + UNSUPPORTED_TYPE + " CODEC(ZSTD(3)) COMMENT " + _sql_string(_UNSUPPORTED_COMMENT)
        + " AFTER `explanation`",
        _DEDUP_VIEW,
    )),
    Migration(8, "scores: segments (language and configured span attributes)", (
        "ALTER TABLE `{db}`.`scores` ADD COLUMN IF NOT EXISTS `segments` " + SEGMENTS_TYPE
        + " COMMENT " + _sql_string(_SEGMENTS_COMMENT) + " AFTER `unsupported`",
        _DEDUP_VIEW,
    )),
)


def latest_version() -> int:
    """The version a fully migrated database has."""
    return MIGRATIONS[-1].version


class Executor(Protocol):
    """What :func:`init_schema` needs from a client: clickhouse-connect's ``command``/``query``."""

    def command(self, cmd: str, parameters: Any = None, **kw: Any) -> Any: ...

    def query(self, query: str, parameters: Any = None, **kw: Any) -> Any: ...


@dataclass
class MigrationReport:
    """What :func:`init_schema` did: the version before and after, and each migration applied."""

    database: str
    before: int
    after: int
    applied: list[tuple[int, str]] = field(default_factory=list)

    def lines(self) -> list[str]:
        """The report as lines for a terminal."""
        if not self.applied:
            return [f"schema `{self.database}` is up to date (version {self.after})"]
        out = [f"migrated `{self.database}` from version {self.before} to {self.after}:"]
        out += [f"  applied {v:>3}  {n}" for v, n in self.applied]
        return out


def applied_versions(client: Executor, database: str) -> dict[int, str]:
    """``{version: checksum}`` of applied migrations; empty when the database or table is absent."""
    validate_identifier(database, "database")
    exists = client.query(
        "SELECT count() FROM system.tables WHERE database = {db:String} AND name = 'schema_migrations'",
        parameters={"db": database},
    ).result_rows[0][0]
    if not exists:
        return {}
    rows = client.query(
        f"SELECT version, argMax(checksum, applied_at) FROM `{database}`.`schema_migrations` "
        "GROUP BY version ORDER BY version"
    ).result_rows
    return {int(v): str(c) for v, c in rows}


def init_schema(
    client: Executor,
    settings: SchemaSettings | None = None,
    *,
    target: int | None = None,
    now: datetime | None = None,
) -> MigrationReport:
    """Create or migrate the schema to ``target`` (default: the latest version). Idempotent.

    Blocks while DDL runs. Raises :class:`SchemaError` if an applied migration's checksum differs
    from this code's (someone edited a released migration, or the database belongs to a newer
    ragpulse: its version is above ours), or if a statement fails (the message names the version
    and the statement; re-running resumes, every statement is ``IF NOT EXISTS``).
    Not safe to run concurrently with itself against one database (DDL is, the bookkeeping
    may record a version twice, which is harmless: the table is keyed by version).
    """
    settings = settings or SchemaSettings()
    target = latest_version() if target is None else target
    known = {m.version for m in MIGRATIONS}
    if target not in known:
        raise SchemaError(f"unknown schema version {target}; this ragpulse knows {sorted(known)}")
    applied = applied_versions(client, settings.database)
    newer = sorted(v for v in applied if v not in known)
    if newer:
        raise SchemaError(
            f"database `{settings.database}` has schema versions {newer} that this ragpulse does "
            f"not know (it knows up to {latest_version()}): upgrade ragpulse instead of migrating"
        )
    for m in MIGRATIONS:
        if m.version in applied and applied[m.version] != m.checksum:
            raise SchemaError(
                f"schema migration {m.version} ({m.name}) in `{settings.database}` has checksum "
                f"{applied[m.version]}, this ragpulse has {m.checksum}: a released migration was "
                "edited; add a new migration instead"
            )
    before = max(applied, default=0)
    report = MigrationReport(settings.database, before, before)
    for m in MIGRATIONS:
        if m.version > target or m.version in applied:
            continue
        for i, stmt in enumerate(m.render(settings), 1):
            try:
                client.command(stmt)
            except Exception as exc:  # surfaced with context; the cause is chained
                first = stmt.strip().splitlines()[0]
                raise SchemaError(
                    f"migration {m.version} ({m.name}) failed at statement {i} `{first} …`: {exc}"
                ) from exc
        stamp = now or datetime.now(UTC)
        client.command(
            f"INSERT INTO `{settings.database}`.`schema_migrations` (version, name, checksum, applied_at) "
            "VALUES ({v:UInt32}, {n:String}, {c:String}, {t:DateTime64(3, 'UTC')})",
            parameters={"v": m.version, "n": m.name, "c": m.checksum, "t": stamp},
        )
        report.applied.append((m.version, m.name))
        report.after = m.version
    report.after = max(report.after, before)
    return report


# --------------------------------------------------------------------------------------------
# Cluster variant (``SchemaSettings.cluster``): derived from the single-node statements above, so
# both always have the same columns. Each table becomes a Replicated*MergeTree ``<name>_local``
# on every node plus a Distributed ``<name>`` over it; materialized views run on the local
# tables (each shard rolls up the rows it stores); plain views read the Distributed tables.

LOCAL_SUFFIX = "_local"

# Distributed sharding keys. A key's replays must land on the shard holding its first copy, or
# ReplacingMergeTree could not replace them: scores by trace id (the last column of its sorting
# key, whose other columns are the trace's too), health rows by the component instance.
CLUSTER_SHARDING: dict[str, str] = {
    "scores": "cityHash64(trace_id)",
    "scores_1m": "cityHash64(service, metric)",  # filled on each shard by its view, not inserted
    "pipeline_health": "cityHash64(component, instance)",
}
# Replicated to every node, one shard-less ZooKeeper path: the migration bookkeeping is global.
_CLUSTER_GLOBAL = ("schema_migrations",)

_ENGINE_LINE = re.compile(r"^ENGINE = (\w*MergeTree)(?:\((.*)\))?$", re.MULTILINE)


def _replicated(body: str, database: str, local: str, sharded: bool) -> str:
    m = _ENGINE_LINE.search(body)
    if m is None:
        raise SchemaError(f"cluster DDL: no MergeTree engine in the definition of {local}")
    path = (f"/clickhouse/tables/{{shard}}/{database}/{local}" if sharded
            else f"/clickhouse/tables/ragpulse_global/{database}/{local}")
    args = [f"'{path}'", "'{replica}'"] + ([m.group(2)] if m.group(2) else [])
    engine = f"ENGINE = Replicated{m.group(1)}({', '.join(args)})"
    body = body[: m.start()] + engine + body[m.end():]
    # Replicated tables deduplicate retried inserts through Keeper, with their own window.
    return body.replace("non_replicated_deduplication_window", "replicated_deduplication_window")


def cluster_statements(statement: str, settings: SchemaSettings) -> list[str]:
    """The ``ON CLUSTER`` form of one rendered single-node statement (one or two statements).

    Raises :class:`SchemaError` for a statement shape it does not know, so a new migration that
    needs a cluster form fails its tests instead of creating a single-node object on a cluster.
    """
    if settings.cluster is None:
        return [statement]
    db, oc = settings.database, f" ON CLUSTER `{settings.cluster}`"
    q = re.escape(f"`{db}`")
    text = statement.strip()
    if re.fullmatch(rf"CREATE DATABASE IF NOT EXISTS {q}", text):
        return [text + oc]
    m = re.match(rf"CREATE TABLE IF NOT EXISTS {q}\.`(\w+)`\n", text)
    if m:
        name, body = m.group(1), text[m.end():]
        if name in _CLUSTER_GLOBAL:
            return [f"CREATE TABLE IF NOT EXISTS `{db}`.`{name}`{oc}\n"
                    + _replicated(body, db, name, sharded=False)]
        if name not in CLUSTER_SHARDING:
            raise SchemaError(f"cluster DDL: no sharding key declared for table {name}")
        local = name + LOCAL_SUFFIX
        return [
            f"CREATE TABLE IF NOT EXISTS `{db}`.`{local}`{oc}\n" + _replicated(body, db, local, True),
            (f"CREATE TABLE IF NOT EXISTS `{db}`.`{name}`{oc} AS `{db}`.`{local}`\n"
             f"ENGINE = Distributed(`{settings.cluster}`, `{db}`, `{local}`, "
             f"{CLUSTER_SHARDING[name]})"),
        ]
    m = re.match(rf"CREATE MATERIALIZED VIEW IF NOT EXISTS {q}\.`(\w+)` TO {q}\.`(\w+)` AS\n", text)
    if m:
        select = text[m.end():]
        for t in CLUSTER_SHARDING:
            select = select.replace(f"`{db}`.`{t}`", f"`{db}`.`{t}{LOCAL_SUFFIX}`")
        return [(f"CREATE MATERIALIZED VIEW IF NOT EXISTS `{db}`.`{m.group(1)}`{oc} "
                 f"TO `{db}`.`{m.group(2)}{LOCAL_SUFFIX}` AS\n{select}")]
    m = re.match(rf"ALTER TABLE {q}\.`(\w+)` ", text)
    if m and m.group(1) in CLUSTER_SHARDING:
        rest = text[m.end():]
        # The local tables first: a Distributed table must not name a column its shards lack.
        return [f"ALTER TABLE `{db}`.`{m.group(1)}{LOCAL_SUFFIX}`{oc} {rest}",
                f"ALTER TABLE `{db}`.`{m.group(1)}`{oc} {rest}"]
    m = re.match(rf"CREATE VIEW IF NOT EXISTS {q}\.`(\w+)` AS\n?", text)
    if m:
        return [f"CREATE VIEW IF NOT EXISTS `{db}`.`{m.group(1)}`{oc} AS\n{text[m.end():]}"]
    m = re.match(rf"CREATE OR REPLACE VIEW {q}\.`(\w+)` AS\s?", text)
    if m:
        return [f"CREATE OR REPLACE VIEW `{db}`.`{m.group(1)}`{oc} AS {text[m.end():]}"]
    first = text.splitlines()[0] if text else ""
    raise SchemaError(f"cluster DDL: no cluster form for statement `{first} …`")
