"""Every settings model that names a ClickHouse database refuses the same names, the same way
(one validator: ragpulse.scorer.store.DatabaseName)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ragpulse.dashboards import DashboardsSettings
from ragpulse.deploy.embedded import EmbeddedSettings
from ragpulse.deploy.facade import FacadeSettings
from ragpulse.deploy.telemetry import TelemetrySettings
from ragpulse.scorer.pipeline import ScorerSettings
from ragpulse.scorer.store import SchemaSettings, StoreSettings

MODELS = [DashboardsSettings, EmbeddedSettings, FacadeSettings, TelemetrySettings, ScorerSettings,
          SchemaSettings, StoreSettings]


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
@pytest.mark.parametrize("bad", ["rag; DROP TABLE x", "1rag", "r" * 64, "", "rag`"])
def test_bad_database_names_are_refused_with_one_message(model: type, bad: str) -> None:
    with pytest.raises(ValidationError, match=r"database .* must match \[A-Za-z_\]"):
        model(database=bad)


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_a_plain_name_is_kept(model: type) -> None:
    assert model(database="rag_prod_2").database == "rag_prod_2"
