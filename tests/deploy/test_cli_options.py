"""Issue 43 item 3: every option of ``up``, ``scorer`` and ``collector`` that sets a setting
reaches it, from the flag and from the variable its help names, through the one mechanism
(:class:`ragpulse.deploy.options.Options`); a flag wins over its variable, a variable over the
default, and an option left at its default changes nothing. The real commands run through the
real CLI up to the point where their settings are built (nothing starts)."""

from __future__ import annotations

from importlib import import_module
from pathlib import Path
from typing import Any

import pytest
import typer
from pydantic import SecretStr
from typer.testing import CliRunner

from ragpulse.deploy import cli
from ragpulse.deploy.options import HEALTH, Options

M = str(Path("/srv/ragpulse-model").resolve())
HEALTH_ROW = (["--health-port", "9999"],
              {"RAGPULSE_HEALTH__ENABLED": "true", "RAGPULSE_HEALTH__PORT": "9999"},
              {"health.enabled": True, "health.port": 9999})

# param: (flag arguments, the same through the variables, {dotted setting: value}) per command.
ROWS: dict[str, dict[str, tuple[list[str], dict[str, str], dict[str, Any]]]] = {
    "up": {
        "data_dir": (["--data-dir", M], {"RAGPULSE_UP__DATA_DIR": M}, {"data_dir": Path(M)}),
        "demo": (["--demo"], {"RAGPULSE_UP__DEMO": "true"}, {"demo": True}),
        "demo_rate": (["--demo-rate", "3.5"], {"RAGPULSE_UP__DEMO_RATE": "3.5"}, {"demo_rate": 3.5}),
        "demo_limit": (["--demo-limit", "7"], {"RAGPULSE_UP__DEMO_LIMIT": "7"}, {"demo_limit": 7}),
        "demo_story": (["--demo-story", "incident"], {"RAGPULSE_UP__DEMO_STORY": "incident"},
                       {"demo_story": "incident"}),
        "host": (["--host", "::1"], {"RAGPULSE_UP__HOST": "::1"}, {"host": "::1"}),
        "http_port": (["--http-port", "14318"], {"RAGPULSE_UP__HTTP_PORT": "14318"}, {"http_port": 14318}),
        "grpc_port": (["--grpc-port", "14317"], {"RAGPULSE_UP__GRPC_PORT": "14317"}, {"grpc_port": 14317}),
        "clickhouse_port": (["--clickhouse-port", "18123"], {"RAGPULSE_UP__CLICKHOUSE_PORT": "18123"},
                            {"clickhouse_port": 18123}),
        "kafka_port": (["--kafka-port", "19092"], {"RAGPULSE_UP__KAFKA_PORT": "19092"}, {"kafka_port": 19092}),
        "s3_base_port": (["--s3-base-port", "18333"], {"RAGPULSE_UP__S3_BASE_PORT": "18333"},
                         {"s3_base_port": 18333}),
        "judge": (["--judge", "llm"], {"RAGPULSE_UP__JUDGE": "llm"}, {"judge": "llm"}),
        "model_dir": (["--model-dir", M], {"RAGPULSE_UP__JUDGE_MODEL_DIR": M}, {"judge_model_dir": Path(M)}),
        "model": (["--model", "m1"], {"RAGPULSE_UP__JUDGE_MODEL": "m1"}, {"judge_model": "m1"}),
        "base_url": (["--base-url", "http://127.0.0.1:9/v1"],
                     {"RAGPULSE_UP__JUDGE_BASE_URL": "http://127.0.0.1:9/v1"},
                     {"judge_base_url": "http://127.0.0.1:9/v1"}),
        "sampling_rate": (["--sampling-rate", "0.25"], {"RAGPULSE_UP__SAMPLING_RATE": "0.25"},
                          {"sampling_rate": 0.25}),
        "grace": (["--grace", "1.5"], {"RAGPULSE_UP__GRACE_S": "1.5"}, {"grace_s": 1.5}),
        "status_interval": (["--status-interval", "2.5"], {"RAGPULSE_UP__STATUS_INTERVAL_S": "2.5"},
                            {"status_interval_s": 2.5}),
        "drain_timeout": (["--drain-timeout", "9"], {"RAGPULSE_UP__DRAIN_TIMEOUT_S": "9"},
                          {"drain_timeout_s": 9.0}),
        "clickhouse_user": (["--clickhouse-user", "u"], {"RAGPULSE_UP__CLICKHOUSE_USER": "u"},
                            {"clickhouse_user": "u"}),
        "clickhouse_password": (["--clickhouse-user", "u", "--clickhouse-password", "pw"],
                                {"RAGPULSE_UP__CLICKHOUSE_USER": "u",
                                 "RAGPULSE_UP__CLICKHOUSE_PASSWORD": "pw"},
                                {"clickhouse_password": "pw"}),
        "clickhouse_token": (["--clickhouse-token", "t"], {"RAGPULSE_UP__CLICKHOUSE_TOKEN": "t"},
                             {"clickhouse_token": "t"}),
        "allow_anonymous_ingest": (["--allow-anonymous-ingest"],
                                   {"RAGPULSE_UP__ALLOW_ANONYMOUS_INGEST": "true"},
                                   {"allow_anonymous_ingest": True}),
        "durable": (["--in-memory"], {"RAGPULSE_UP__DURABLE": "false"}, {"durable": False}),
    },
    "scorer": {
        "kafka": (["--kafka", "k1:9093"], {"RAGPULSE_KAFKA__BOOTSTRAP_SERVERS": "k1:9093"},
                  {"kafka.bootstrap_servers": "k1:9093"}),
        "topic": (["--topic", "t1"], {"RAGPULSE_KAFKA__TOPIC": "t1"}, {"kafka.topic": "t1"}),
        "clickhouse": (["--clickhouse", "http://ch:8123"], {"RAGPULSE_CLICKHOUSE": "http://ch:8123"},
                       {"clickhouse": "http://ch:8123"}),
        "database": (["--database", "db2"], {"RAGPULSE_DATABASE": "db2"}, {"database": "db2"}),
        "group": (["--group", "g2"], {"RAGPULSE_CONSUMER__GROUP_ID": "g2"}, {"consumer.group_id": "g2"}),
        "judge": (["--judge", "llm"], {"RAGPULSE_JUDGE": "llm"}, {"judge": "llm"}),
        "model": (["--model", "m1"], {"RAGPULSE_JUDGE_MODEL": "m1"}, {"judge_model": "m1"}),
        "base_url": (["--base-url", "http://h/v1"], {"RAGPULSE_JUDGE_BASE_URL": "http://h/v1"},
                     {"judge_base_url": "http://h/v1"}),
        "model_dir": (["--model-dir", M], {"RAGPULSE_NLI__MODEL_DIR": M}, {"nli.model_dir": Path(M)}),
        "positive_label": (["--positive-label", "entailment"],
                           {"RAGPULSE_NLI__POSITIVE_LABEL": "entailment"},
                           {"nli.positive_label": "entailment"}),
        "metrics": (["--metrics", "faithfulness"], {"RAGPULSE_EVALUATE__METRICS": "faithfulness"},
                    {"evaluate.metrics": ("faithfulness",)}),
        "sample_rate": (["--sampling-rate", "0.3"], {"RAGPULSE_SAMPLING__DEFAULT_RATE": "0.3"},
                        {"sampling.default_rate": 0.3}),
        "service_rate": (["--service-rate", "checkout=0.25"],
                         {"RAGPULSE_SAMPLING__SERVICE_RATES": '{"checkout": 0.25}'},
                         {"sampling.service_rates": {"checkout": 0.25}}),
        "grace": (["--grace", "1.5"], {"RAGPULSE_ASSEMBLY__GRACE_S": "1.5"}, {"assembly.grace_s": 1.5}),
        "max_in_flight": (["--max-in-flight", "7"], {"RAGPULSE_EVALUATE__MAX_IN_FLIGHT": "7"},
                          {"evaluate.max_in_flight": 7}),
        "drain_timeout": (["--drain-timeout", "9"], {"RAGPULSE_DRAIN_TIMEOUT_S": "9"},
                          {"drain_timeout_s": 9.0}),
        "status_interval": (["--status-interval", "2.5"], {"RAGPULSE_STATUS_INTERVAL_S": "2.5"},
                            {"status_interval_s": 2.5}),
        "health_port": HEALTH_ROW,
    },
    "collector": {
        "kafka": (["--kafka", "k1:9093"], {"RAGPULSE_KAFKA__BOOTSTRAP_SERVERS": "k1:9093"},
                  {"kafka.bootstrap_servers": "k1:9093"}),
        "topic": (["--topic", "t1"], {"RAGPULSE_KAFKA__TOPIC": "t1"}, {"kafka.topic": "t1"}),
        "http": (["--http", "127.0.0.2:14318"],
                 {"RAGPULSE_OTLP__HTTP_HOST": "127.0.0.2", "RAGPULSE_OTLP__HTTP_PORT": "14318"},
                 {"otlp.http_host": "127.0.0.2", "otlp.http_port": 14318}),
        "grpc": (["--grpc", "127.0.0.2:14317"],
                 {"RAGPULSE_OTLP__GRPC_HOST": "127.0.0.2", "RAGPULSE_OTLP__GRPC_PORT": "14317"},
                 {"otlp.grpc_host": "127.0.0.2", "otlp.grpc_port": 14317}),
        "no_grpc": (["--no-grpc"], {"RAGPULSE_OTLP__GRPC_ENABLED": "false"}, {"otlp.grpc_enabled": False}),
        "no_http": (["--no-http"], {"RAGPULSE_OTLP__HTTP_ENABLED": "false"}, {"otlp.http_enabled": False}),
        "pass_all": (["--pass-all"], {"RAGPULSE_FILTER__MODE": "all"}, {"filter.mode": "all"}),
        "partitions": (["--partitions", "5"], {"RAGPULSE_PRODUCER__PARTITIONS": "5"},
                       {"producer.partitions": 5}),
        "queue_max_spans": (["--queue-max-spans", "777"], {"RAGPULSE_QUEUE__MAX_SPANS": "777"},
                            {"queue.max_spans": 777}),
        "confirm": (["--confirm", "ack"], {"RAGPULSE_PRODUCER__CONFIRM": "ack"}, {"producer.confirm": "ack"}),
        "records": (["--records", "per-trace"], {"RAGPULSE_PRODUCER__RECORDS": "per_trace"},
                    {"producer.records": "per_trace"}),
        "workers": (["--workers", "2"], {"RAGPULSE_OTLP__WORKERS": "2"}, {"otlp.workers": 2}),
        "allow_anonymous_ingest": (["--allow-anonymous-ingest"],
                                   {"RAGPULSE_OTLP__ALLOW_ANONYMOUS_INGEST": "true"},
                                   {"otlp.allow_anonymous_ingest": True}),
        "cors_origin": (["--cors-origin", "https://a.example.com"],
                        {"RAGPULSE_OTLP__CORS_ALLOWED_ORIGINS": '["https://a.example.com"]'},
                        {"otlp.cors_allowed_origins": ("https://a.example.com",)}),
        "health_port": HEALTH_ROW,
    },
}
# each command's maps (the package exports the command functions under the modules' names)
OPTIONS: dict[str, list[Options]] = {
    name: [import_module(f"ragpulse.deploy.commands.{name}").OPTIONS,
           *([HEALTH] if name != "up" else [])] for name in ROWS}
SETTINGS = Options.settings  # the real one (built() replaces it)
CASES = [(command, param, how) for command, rows in ROWS.items() for param in rows
         for how in ("flag", "env")]


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for k in list(os.environ):
        if k.upper().startswith("RAGPULSE_"):
            monkeypatch.delenv(k)


def built(monkeypatch: pytest.MonkeyPatch, command: str, args: list[str]) -> dict[str, Any]:
    """The settings ``ragpulse COMMAND ARGS`` builds from its options, by class name: the
    command runs through the real CLI and stops once its last settings object is built."""
    if not cli.app.registered_commands:
        cli._register()
    last = OPTIONS[command][-1]
    seen: dict[str, Any] = {}

    def capture(self: Options, ctx: typer.Context, cls: type[Any]) -> Any:
        seen[cls.__name__] = SETTINGS(self, ctx, cls)
        if self is last:
            raise typer.Exit(0)
        return seen[cls.__name__]

    monkeypatch.setattr(Options, "settings", capture)
    result = CliRunner().invoke(cli.app, [command, *args])
    assert result.exit_code == 0, result.output
    return seen


def _value(settings: dict[str, Any], dotted: str) -> Any:
    first, *rest = dotted.split(".")
    roots = [s for s in settings.values() if first in type(s).model_fields]
    assert len(roots) == 1, (dotted, list(settings))
    node = roots[0]
    for part in (first, *rest):
        node = getattr(node, part)
    return node.get_secret_value() if isinstance(node, SecretStr) else node


def test_every_option_that_sets_a_setting_has_a_row() -> None:
    """A new option in a command's map needs its row here (and so its test)."""
    for command, options in OPTIONS.items():
        assert set(ROWS[command]) == {p for o in options for p in o.sets}, command


@pytest.mark.parametrize(("command", "param", "how"), CASES,
                         ids=[f"{c}-{p}-{h}" for c, p, h in CASES])
def test_the_flag_and_the_variable_reach_the_setting(
    monkeypatch: pytest.MonkeyPatch, command: str, param: str, how: str
) -> None:
    args, env, expected = ROWS[command][param]
    if how == "env":
        for name, value in env.items():
            monkeypatch.setenv(name, value)
    settings = built(monkeypatch, command, args if how == "flag" else [])
    assert {dotted: _value(settings, dotted) for dotted in expected} == expected


@pytest.mark.parametrize("command", ["scorer", "collector"])
def test_a_flag_wins_over_its_variable_and_a_default_flag_changes_nothing(
    monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    monkeypatch.setenv("RAGPULSE_KAFKA__BOOTSTRAP_SERVERS", "env-host:9092")
    monkeypatch.setenv("RAGPULSE_KAFKA__TOPIC", "from-env")
    monkeypatch.setenv("RAGPULSE_KAFKA__COMPRESSION", "lz4")  # no flag: the environment's
    s = built(monkeypatch, command, ["--kafka", "flag-host:9093"])
    kafka = _value(s, "kafka")
    assert kafka.bootstrap_servers == "flag-host:9093" and kafka.topic == "from-env"
    assert kafka.compression == "lz4"
    assert _value(s, "health.enabled") is False  # --health-port not given: the default


def test_up_flags_win_and_options_at_their_default_change_nothing(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAGPULSE_UP__DURABLE", "false")
    monkeypatch.setenv("RAGPULSE_UP__DEMO_RATE", "7")
    s = built(monkeypatch, "up", ["--demo-rate", "3"])["EmbeddedSettings"]
    assert s.demo_rate == 3.0 and s.durable is False and s.http_port == 4318
    assert built(monkeypatch, "up", ["--durable"])["EmbeddedSettings"].durable is True


@pytest.mark.parametrize(("command", "args", "env", "line"), [
    ("collector", [], {"RAGPULSE_QUEUE__MAX_SPANS": "0"},
     "ragpulse collector: invalid setting queue.max_spans (--queue-max-spans, "
     "RAGPULSE_QUEUE__MAX_SPANS): Input should be greater than or equal to 1"),
    ("scorer", ["--sample-rate", "1.5"], {},
     "ragpulse scorer: invalid setting sampling.default_rate (--sampling-rate, "
     "RAGPULSE_SAMPLING__DEFAULT_RATE): Input should be less than or equal to 1"),
    ("scorer", ["--grace", "100"], {},  # a section's own check: its message names the variables
     "ragpulse scorer: invalid setting assembly: grace_s (100; "),
    ("scorer", [], {"RAGPULSE_HEALTH__PORT": "x"},
     "ragpulse scorer: invalid setting health.port (--health-port, RAGPULSE_HEALTH__PORT): "),
    ("up", ["--demo-rate", "0"], {},
     "ragpulse up: invalid setting demo_rate (--demo-rate, RAGPULSE_UP__DEMO_RATE): "),
    ("up", ["--judge", "nli"], {}, "ragpulse up: invalid settings: judge nli needs a model directory"),
])
def test_a_bad_value_exits_2_naming_the_setting_its_flag_and_variable(
    monkeypatch: pytest.MonkeyPatch, command: str, args: list[str], env: dict[str, str], line: str
) -> None:
    if not cli.app.registered_commands:
        cli._register()
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    result = CliRunner().invoke(cli.app, [command, *args])
    assert result.exit_code == 2, result.output
    assert line in " ".join(result.output.split()), result.output
    assert "Value error" not in result.output
