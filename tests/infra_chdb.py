"""chDB fixtures. chDB runs one engine, on one directory, per process. Each pytest process (`make
test` runs two, pytest-xdist workers, each with its own temporary folders) has one session
directory (``chdb_dsn``); its in-process tests share it and isolate themselves by database name
(``rag_database``: ``rag_<uuid8>``). A test that needs a directory of
its own (kill/restart, a second owner) runs the chDB side in a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(scope="session")
def chdb_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The one chDB directory this pytest process may open."""
    return tmp_path_factory.mktemp("chdb")


@pytest.fixture(scope="session")
def chdb_dsn(chdb_dir: Path) -> str:
    return f"chdb://{chdb_dir}"


@pytest.fixture(scope="session")
def chdb_client(chdb_dsn: str) -> Iterator[Any]:
    """A clickhouse-connect client on the session directory (no default database)."""
    from ragpulse.scorer.store import open_store

    client = open_store(chdb_dsn)
    yield client
    client.close()


@pytest.fixture
def rag_database(chdb_client: Any) -> Iterator[str]:
    """A unique, not yet created database name, dropped after the test."""
    name = f"rag_{uuid.uuid4().hex[:8]}"
    yield name
    chdb_client.command(f"DROP DATABASE IF EXISTS `{name}` SYNC")


@pytest.fixture
def rag_schema(chdb_client: Any, rag_database: str) -> Any:
    """The ragpulse schema at its latest version in a fresh database; returns its SchemaSettings."""
    from ragpulse.scorer.store import SchemaSettings, init_schema

    settings = SchemaSettings(database=rag_database)
    init_schema(chdb_client, settings)
    return settings


_QUERY_CODE = (
    "import json, sys, clickhouse_connect\n"
    "c = clickhouse_connect.get_client(dsn=sys.argv[1])\n"
    "rows = c.query(sys.argv[2], parameters=json.loads(sys.argv[3])).result_rows\n"
    "print(json.dumps([list(r) for r in rows], default=str))\n"
)


def query_chdb_dir(path: Path, sql: str, parameters: Mapping[str, Any] | None = None) -> list[list[Any]]:
    """Run ``sql`` on the chDB directory ``path`` in a child process (this process may already
    own another chDB directory) and return the rows as JSON values. Blocks; raises
    ``CalledProcessError`` when the query fails."""
    out = subprocess.run(
        [sys.executable, "-c", _QUERY_CODE, f"chdb://{path}", sql, json.dumps(dict(parameters or {}))],
        capture_output=True, timeout=120, check=True,
    )
    return json.loads(out.stdout)
