"""One generated database for the whole dashboards test package: written once through the real
ScoreWriter / health writer into the session chDB directory (tests/infra_chdb.py)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from ragpulse.dashboards.settings import AlertSettings, DashboardsSettings
from ragpulse.scorer.store import init_schema

from .data import fill, fixed_date_schema


@pytest.fixture(scope="session")
def filled_db(chdb_client: Any) -> Iterator[str]:
    name = f"rag_dash_{uuid.uuid4().hex[:8]}"
    init_schema(chdb_client, fixed_date_schema(name))
    fill(chdb_client, name)
    yield name
    chdb_client.command(f"DROP DATABASE IF EXISTS `{name}` SYNC")


@pytest.fixture(scope="session")
def settings(filled_db: str) -> DashboardsSettings:
    # The generated steady service has ~15 answer_relevancy rows per 30 minutes: the null-rate
    # rule's minimum is lowered to that volume (every other threshold is the default).
    return DashboardsSettings(database=filled_db, alerts=AlertSettings(null_rate_min_rows=10))
