"""``ragpulse scorer`` validates its settings before connecting and says what is wrong."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from ragpulse.deploy import cli as root


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


def test_status_line_names_every_stage():
    """``scorer``'s line (no collector: records consumed) in ``up``'s words."""
    from ragpulse.deploy.statusline import status_line

    line = status_line({f"scorer.{k}": v for k, v in {
        "records_consumed": 3, "traces_assembled": 2, "traces_scored": 1, "rows_written": 5,
        "consumer_lag": 7, "paused": 1, "write_errors": 2, "evaluate_errors": 1}.items()}, 4)
    assert line == ("[     4s] records consumed 3, traces assembled 2 = sampled out 0 + not RAG 0 "
                    "+ expired incomplete 0 + unscorable 0 + scored 1 + failed 1 + dropped 0 + "
                    "in progress 0; rows 5, lag 7, errors 3, paused (backpressure)"), line


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
