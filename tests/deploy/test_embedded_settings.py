"""`ragpulse up` composes its parts' settings from its own choices plus ``RAGPULSE_*``.

Regression: nested settings were passed as model instances, which replace the environment's
nested values wholesale, so ``RAGPULSE_ASSEMBLY__MAX_WAIT_S`` or ``RAGPULSE_OTLP__MAX_BODY_BYTES``
were silently ignored under ``up``. Nothing is started here: the settings are built from a stack
whose broker address is known.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from ragpulse.deploy.embedded import Embedded, EmbeddedSettings


@pytest.fixture
def stack(tmp_path: Path) -> Embedded:
    e = Embedded(EmbeddedSettings(data_dir=tmp_path, grace_s=3.5, http_port=0, grpc_port=0))
    e.broker = SimpleNamespace(bootstrap="127.0.0.1:39092")
    e._chdb_path = str(tmp_path / "chdb")
    return e


def test_environment_reaches_nested_settings(stack: Embedded, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGPULSE_ASSEMBLY__MAX_WAIT_S", "77")
    monkeypatch.setenv("RAGPULSE_ASSEMBLY__LATE_SPANS", "rescore")
    monkeypatch.setenv("RAGPULSE_OTLP__MAX_BODY_BYTES", "1234")
    monkeypatch.setenv("RAGPULSE_KAFKA__TOPIC", "spans_x")
    monkeypatch.setenv("RAGPULSE_KAFKA__BOOTSTRAP_SERVERS", "elsewhere:9092")

    scorer = stack.scorer_settings()
    assert scorer.assembly.max_wait_s == 77.0
    assert scorer.assembly.late_spans == "rescore"
    assert scorer.assembly.grace_s == 3.5  # up's own flag wins
    assert scorer.kafka.topic == "spans_x"
    assert scorer.kafka.bootstrap_servers == "127.0.0.1:39092"  # up owns the broker address
    assert scorer.clickhouse == f"chdb://{stack._chdb_path}"

    collector = stack.collector_settings()
    assert collector.otlp.max_body_bytes == 1234
    assert collector.otlp.http_port == 0 and collector.otlp.http_host == "127.0.0.1"
    assert collector.kafka.topic == "spans_x"
    assert collector.kafka.bootstrap_servers == "127.0.0.1:39092"
    assert stack._kafka().topic == "spans_x"  # the topic `up` creates is the one both use


def test_defaults_without_environment(stack: Embedded) -> None:
    scorer = stack.scorer_settings()
    assert scorer.assembly.grace_s == 3.5
    assert scorer.kafka.topic == "otlp_spans"
    assert stack.collector_settings().otlp.grpc_host == "127.0.0.1"
