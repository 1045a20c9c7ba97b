"""``ragpulse scorer`` validates its settings before connecting and says what is wrong."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from ragpulse.deploy import cli as root
from ragpulse.deploy.commands.scorer import _settings_from, status_line


@pytest.fixture(scope="module")
def app():
    root._register()
    return root.app


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--kafka", "no-port"], "kafka.bootstrap_servers"),
        (["--clickhouse", "mysql://x"], "clickhouse"),
        (["--metrics", "faithfulness,bogus"], "unknown metrics"),
        (["--sampling-rate", "1.5"], "sampling.default_rate"),
        (["--sample-rate", "1.5"], "sampling.default_rate"),  # its old name
        (["--service-rate", "checkout"], "expected SERVICE=RATE"),
        (["--grace", "100"], "grace_s"),
    ],
)
def test_bad_settings_exit_2_with_the_field_named(app, monkeypatch, args, message):
    for k in list(__import__("os").environ):
        if k.startswith("RAGPULSE_"):
            monkeypatch.delenv(k)
    result = CliRunner().invoke(app, ["scorer", *args])
    assert result.exit_code == 2, result.output
    assert message in result.output


def test_environment_then_flags(monkeypatch):
    monkeypatch.setenv("RAGPULSE_CONSUMER__GROUP_ID", "from-env")
    monkeypatch.setenv("RAGPULSE_ASSEMBLY__GRACE_S", "1.5")
    monkeypatch.setenv("RAGPULSE_KAFKA__BOOTSTRAP_SERVERS", "env-host:9092")
    s = _settings_from(
        {
            "kafka.bootstrap_servers": "flag-host:9093",
            "consumer.group_id": None,
            "sampling.service_rates": {"checkout": 0.25},
        }
    )
    assert s.kafka.bootstrap_servers == "flag-host:9093"
    assert s.consumer.group_id == "from-env" and s.assembly.grace_s == 1.5
    assert s.sampling.service_rates == {"checkout": 0.25}


def test_status_line_names_every_stage():
    line = status_line(
        {
            "records_consumed": 3,
            "traces_assembled": 2,
            "traces_sampled": 2,
            "traces_scored": 1,
            "rows_written": 5,
            "consumer_lag": 7,
            "paused": 1,
            "write_errors": 2,
            "evaluate_errors": 1,
        }
    )
    for part in (
        "consumed 3",
        "assembled 2",
        "sampled 2",
        "scored 1",
        "written 5 rows",
        "lag 7",
        "PAUSED",
        "errors 3",
    ):
        assert part in line


@pytest.mark.parametrize("value", ["faithfulness, answer_relevancy", '["faithfulness", "answer_relevancy"]'])
def test_metrics_from_the_environment_as_a_list_or_json(monkeypatch, value) -> None:
    from ragpulse.scorer.pipeline.settings import ScorerSettings

    monkeypatch.setenv("RAGPULSE_EVALUATE__METRICS", value)
    assert ScorerSettings().evaluate.metrics == ("faithfulness", "answer_relevancy")


def test_the_writer_refuses_an_environment_name_from_before_0_1(monkeypatch) -> None:
    """Renames in 0.x are listed in CHANGELOG.md and not read any more: a nested old name is a
    start-up error (the section forbids unknown keys), not a silently ignored setting."""
    from pydantic import ValidationError

    from ragpulse.scorer.pipeline.settings import ScorerSettings

    for k in list(__import__("os").environ):
        if k.startswith("RAGPULSE_"):
            monkeypatch.delenv(k)
    monkeypatch.setenv("RAGPULSE_WRITER__RETRY_MAX_BACKOFF_S", "7")
    with pytest.raises(ValidationError, match="retry_max_backoff_s"):
        ScorerSettings()
