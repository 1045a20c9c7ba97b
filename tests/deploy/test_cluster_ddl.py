"""The ClickHouse cluster variant of the schema (``SchemaSettings.cluster``) against the single-node one.

chDB has no ``remote_servers`` clusters and no Keeper, so ``ON CLUSTER``, ``Replicated*MergeTree``
and ``Distributed`` cannot run here (chDB answers CLUSTER_DOESNT_EXIST / "No macro 'shard'"). The
test therefore runs every cluster statement on chDB after three mechanical substitutions that
keep the column definitions untouched: ``ON CLUSTER `c``` dropped, ``ReplicatedX('path',
'{replica}', args)`` back to ``X(args)``, and ``ENGINE = Distributed(c, db, local, key)`` to
``ENGINE = Merge(db, '^local$')`` (a table that, like Distributed, takes its structure from the
``AS`` table and forwards reads). Then the columns of every ``<table>_local`` and of every
Distributed stand-in must equal the single-node table's (name, type, default, codec, comment),
and a row written through the same path as the writer reaches the rollup view.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest

from ragpulse.common.schema.clickhouse import (
    CLUSTER_SHARDING,
    LOCAL_SUFFIX,
    MIGRATIONS,
    SchemaError,
    SchemaSettings,
    cluster_statements,
    init_schema,
)

_COLS = (
    "SELECT name, type, default_kind, default_expression, compression_codec, comment "
    "FROM system.columns WHERE database = {db:String} AND table = {t:String} ORDER BY position"
)


def _unclustered(stmt: str) -> str:
    stmt = re.sub(r" ON CLUSTER `\w+`", "", stmt)
    stmt = re.sub(
        r"ENGINE = Replicated(\w*MergeTree)\('[^']*', '\{replica\}'(?:, )?(.*?)\)$",
        lambda m: f"ENGINE = {m.group(1)}" + (f"({m.group(2)})" if m.group(2) else ""),
        stmt,
        flags=re.MULTILINE,
    )
    return re.sub(
        r"ENGINE = Distributed\(`\w+`, `(\w+)`, `(\w+)`, .*\)$",
        r"ENGINE = Merge(\1, '^\2$')",
        stmt,
        flags=re.MULTILINE,
    )


def _columns(client: Any, db: str, table: str) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in client.query(_COLS, parameters={"db": db, "t": table}).result_rows]


@pytest.fixture
def two_databases(chdb_client: Any) -> Any:
    names = (f"rag_{uuid.uuid4().hex[:8]}", f"ragc_{uuid.uuid4().hex[:8]}")
    yield names
    for n in names:
        chdb_client.command(f"DROP DATABASE IF EXISTS `{n}` SYNC")


def test_cluster_ddl_has_the_single_node_columns(chdb_client: Any, two_databases: Any) -> None:
    single, clustered = two_databases
    init_schema(chdb_client, SchemaSettings(database=single))
    settings = SchemaSettings(database=clustered, cluster="prod")
    for m in MIGRATIONS:
        for stmt in m.render(settings):
            assert "ON CLUSTER `prod`" in stmt, stmt
            chdb_client.command(_unclustered(stmt))
    for table in CLUSTER_SHARDING:
        want = _columns(chdb_client, single, table)
        assert want, table
        assert _columns(chdb_client, clustered, table + LOCAL_SUFFIX) == want, table
        assert _columns(chdb_client, clustered, table) == want, table
    # The bookkeeping table is replicated whole, under its own name.
    assert _columns(chdb_client, clustered, "schema_migrations") == _columns(
        chdb_client, single, "schema_migrations"
    )


def test_cluster_engines_and_sharding_keys() -> None:
    settings = SchemaSettings(database="rag", cluster="prod")
    sql = "\n".join(s for m in MIGRATIONS for s in m.render(settings))
    assert (
        "ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/rag/scores_local', '{replica}', version)"
        in sql
    )
    assert (
        "ENGINE = ReplicatedAggregatingMergeTree('/clickhouse/tables/{shard}/rag/scores_1m_local', '{replica}')"
        in sql
    )
    assert "ENGINE = Distributed(`prod`, `rag`, `scores_local`, cityHash64(trace_id))" in sql
    # The rollup view fires on the local inserts each shard receives, into the local rollup.
    assert "TO `rag`.`scores_1m_local` AS" in sql and "FROM `rag`.`scores_local`" in sql
    # Replicated tables deduplicate through Keeper: no non-replicated window left behind.
    assert "non_replicated_deduplication_window" not in sql
    assert "replicated_deduplication_window = 1000" in sql
    # Every replay of a trace lands on one shard: the sharding key is part of the sorting key.
    assert "trace_id" in CLUSTER_SHARDING["scores"]


def test_single_node_statements_unchanged_without_cluster() -> None:
    s = SchemaSettings(database="rag")
    for m in MIGRATIONS:
        for stmt in m.render(s):
            assert (
                "ON CLUSTER" not in stmt and "Replicated" not in stmt and "Distributed" not in stmt
            )


def test_unknown_statement_shape_is_refused() -> None:
    with pytest.raises(SchemaError, match="no cluster form"):
        cluster_statements("OPTIMIZE TABLE `rag`.`scores` FINAL", SchemaSettings(cluster="prod"))
    with pytest.raises(ValueError):
        SchemaSettings(cluster="bad name; DROP")
