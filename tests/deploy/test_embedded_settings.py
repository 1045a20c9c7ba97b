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


def _parsed(monkeypatch: pytest.MonkeyPatch, *args: str) -> EmbeddedSettings:
    """The settings ``ragpulse up ARGS`` would run with (``run`` captured, nothing started)."""
    import typer
    from typer.testing import CliRunner

    from ragpulse.deploy import embedded
    from ragpulse.deploy.commands import up

    seen: list[EmbeddedSettings] = []

    def capture(settings: EmbeddedSettings, console: object) -> int:
        seen.append(settings)
        return 0

    monkeypatch.setattr(embedded, "run_embedded", capture)
    app = typer.Typer()
    app.command()(up)  # a one-command app: its arguments are up's
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return seen[0]


def test_up_flags_override_environment_and_defaults_do_not(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("RAGPULSE_UP__DATA_DIR", str(tmp_path / "from-env"))
    monkeypatch.setenv("RAGPULSE_UP__GRACE_S", "4")
    monkeypatch.setenv("RAGPULSE_UP__DEMO_RATE", "7")
    s = _parsed(monkeypatch, "--demo-rate", "3", "--sampling-rate", "0.2")
    assert s.data_dir == tmp_path / "from-env"  # flag not given: the environment applies
    assert s.grace_s == 4.0
    assert s.demo_rate == 3.0  # flag given: it wins
    assert s.sampling_rate == 0.2
    assert s.http_port == 4318  # neither: the settings' default


def test_up_sampling_rate_reaches_the_scorer(tmp_path: Path) -> None:
    e = Embedded(EmbeddedSettings(data_dir=tmp_path, sampling_rate=0.15))
    e.broker = SimpleNamespace(bootstrap="127.0.0.1:39092")
    assert e.scorer_settings().sampling.default_rate == 0.15
    with pytest.raises(ValueError):
        EmbeddedSettings(data_dir=tmp_path, sampling_rate=1.5)


def test_up_refuses_a_facade_off_loopback_without_a_login(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import typer
    from typer.testing import CliRunner

    from ragpulse.deploy.commands import up

    app = typer.Typer()
    app.command()(up)
    result = CliRunner().invoke(app, ["--host", "0.0.0.0", "--data-dir", str(tmp_path)])
    assert result.exit_code == 2
    flat = " ".join(result.output.split())  # rich wraps at the console width
    assert "without a login" in flat and "--clickhouse-user" in flat
    # With a login from the environment (RAGPULSE_UP__CLICKHOUSE_PASSWORD_FILE resolves to it).
    monkeypatch.setenv("RAGPULSE_OTLP__AUTH_TOKEN", "ingest-token")  # the receivers' own login
    monkeypatch.setenv("RAGPULSE_UP__CLICKHOUSE_USER", "grafana")
    monkeypatch.setenv("RAGPULSE_UP__CLICKHOUSE_PASSWORD", "pw")
    s = _parsed(monkeypatch, "--host", "0.0.0.0", "--data-dir", str(tmp_path))
    e = Embedded(s)
    facade = e.facade_settings()
    assert facade.host == "0.0.0.0" and facade.auth_required and facade.username == "grafana"
    assert facade.password.get_secret_value() == "pw" and facade.database == "rag"
    assert EmbeddedSettings(host="0.0.0.0", clickhouse_token="t").clickhouse_token is not None
    monkeypatch.delenv("RAGPULSE_UP__CLICKHOUSE_USER")
    monkeypatch.delenv("RAGPULSE_UP__CLICKHOUSE_PASSWORD")
    with pytest.raises(ValueError, match="without clickhouse_user"):
        EmbeddedSettings(clickhouse_password="x")
    assert not Embedded(EmbeddedSettings()).facade_settings().auth_required  # loopback default


def _invoke_up(monkeypatch: pytest.MonkeyPatch, *args: str):
    """``ragpulse up ARGS`` up to the point where it would start the stack (never started)."""
    import typer
    from typer.testing import CliRunner

    from ragpulse.deploy import embedded
    from ragpulse.deploy.commands import up

    def refuse(settings: EmbeddedSettings, console: object) -> int:
        raise AssertionError("the stack would have started")

    monkeypatch.setattr(embedded, "run_embedded", refuse)

    app = typer.Typer()
    app.command()(up)
    return CliRunner().invoke(app, list(args))


def test_up_refuses_open_otlp_receivers_off_loopback(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Issue 17: `up --host 0.0.0.0 --clickhouse-token X` served the OTLP receivers to anyone.
    The facade had a login; the receivers need one too, or an explicit opt-out."""
    for var in ("RAGPULSE_OTLP__AUTH_TOKEN", "RAGPULSE_OTLP__AUTH_TOKEN_FILE",
                "RAGPULSE_UP__ALLOW_ANONYMOUS_INGEST"):
        monkeypatch.delenv(var, raising=False)
    args = ("--host", "0.0.0.0", "--clickhouse-token", "X", "--data-dir", str(tmp_path))
    result = _invoke_up(monkeypatch, *args)
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())  # rich wraps long lines
    assert "OTLP receivers on 0.0.0.0 without authentication" in text
    assert "RAGPULSE_OTLP__AUTH_TOKEN" in text and "--allow-anonymous-ingest" in text
    with pytest.raises(ValueError, match="without authentication"):
        EmbeddedSettings(host="::", clickhouse_token="X")

    # Each way out: the flag, its environment form, a token (or a token file).
    s = _parsed(monkeypatch, *args, "--allow-anonymous-ingest")
    assert s.allow_anonymous_ingest
    monkeypatch.setenv("RAGPULSE_UP__ALLOW_ANONYMOUS_INGEST", "true")
    assert EmbeddedSettings(host="0.0.0.0", clickhouse_token="X").allow_anonymous_ingest
    monkeypatch.delenv("RAGPULSE_UP__ALLOW_ANONYMOUS_INGEST")
    monkeypatch.setenv("RAGPULSE_OTLP__AUTH_TOKEN_FILE", str(tmp_path / "token"))
    assert not _parsed(monkeypatch, *args).allow_anonymous_ingest
    monkeypatch.delenv("RAGPULSE_OTLP__AUTH_TOKEN_FILE")
    monkeypatch.setenv("RAGPULSE_OTLP__AUTH_TOKEN", "t0ken")
    e = Embedded(_parsed(monkeypatch, *args))
    e.broker = SimpleNamespace(bootstrap="127.0.0.1:39092")
    assert e.collector_settings().otlp.auth_token.get_secret_value() == "t0ken"
    assert e.ingest_auth_line().startswith("bearer token")
    # Loopback needs neither (the default).
    monkeypatch.delenv("RAGPULSE_OTLP__AUTH_TOKEN")
    assert EmbeddedSettings().host == "127.0.0.1"


def test_up_does_not_start_open_receivers_when_the_token_vanished(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The settings check reads the environment; the collector's start checks the token the
    receivers really get, so an environment changed in between cannot open them."""
    monkeypatch.setenv("RAGPULSE_OTLP__AUTH_TOKEN", "t")
    # 192.0.2.1 (TEST-NET-1) is off loopback and on no interface here: nothing can bind it.
    e = Embedded(EmbeddedSettings(host="192.0.2.1", clickhouse_token="X", data_dir=tmp_path,
                                  http_port=0, grpc_port=0))
    e.broker = SimpleNamespace(bootstrap="127.0.0.1:39092")
    monkeypatch.delenv("RAGPULSE_OTLP__AUTH_TOKEN")
    with pytest.raises(RuntimeError, match="no bearer token"):
        e._start_collector()
    assert e.collector is None


def test_the_judge_line_names_the_judge_and_where_its_quality_is_documented(tmp_path) -> None:
    from ragpulse.deploy.embedded import EmbeddedSettings, judge_line

    assert judge_line(EmbeddedSettings(data_dir=tmp_path)).startswith(
        "model (ragpulse's own faithfulness cross-encoder, bundled")
    assert judge_line(EmbeddedSettings(data_dir=tmp_path, judge="local")).startswith("fast (")
    with pytest.raises(ValueError, match="unknown judge 'bogus': one of model, fast, nli, llm"):
        EmbeddedSettings(data_dir=tmp_path, judge="bogus")
    llm = judge_line(EmbeddedSettings(data_dir=tmp_path, judge="llm", judge_model="m1",
                                      judge_base_url="http://127.0.0.1:9/v1"))
    assert llm.startswith("llm (m1 at http://127.0.0.1:9/v1)")
    nli = judge_line(EmbeddedSettings(data_dir=tmp_path, judge="nli", judge_model_dir=tmp_path))
    assert nli.startswith(f"nli (model {tmp_path})")
    assert all(line.endswith("docs/judges.md") for line in (llm, nli))


def test_the_redaction_line_says_bare_names_are_stored_as_written(
    stack: Embedded, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 17: with redaction on, `up` says at start-up that unmarked person names are kept,
    and how to recognise the common ones."""
    from ragpulse.deploy.embedded import redaction_line

    default = redaction_line(stack.scorer_settings().privacy)
    assert default.startswith("on (") and "person" in default
    assert "Taro Yamada" in default and "stored as written" in default
    assert "RAGPULSE_PRIVACY__UNMARKED_NAMES=true" in default
    monkeypatch.setenv("RAGPULSE_PRIVACY__UNMARKED_NAMES", "true")
    on = redaction_line(stack.scorer_settings().privacy)
    assert "common EN/JA/ZH patterns" in on and "UNMARKED_NAMES=true" not in on
    monkeypatch.setenv("RAGPULSE_PRIVACY__REDACT", "false")
    assert redaction_line(stack.scorer_settings().privacy).startswith("off:")


def test_errors_reach_the_user_as_written(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A start-up error or a settings error is printed as written: rich markup swallowed the
    `[nli]` of `pip install 'ragpulse[nli]'`, and a model-level validation error printed as
    `invalid setting : Value error, ...`."""
    from ragpulse.deploy import embedded

    monkeypatch.delenv("RAGPULSE_NLI__MODEL_DIR", raising=False)
    r = _invoke_up(monkeypatch, "--judge", "nli", "--data-dir", str(tmp_path))
    flat = " ".join(r.output.split())
    assert r.exit_code == 2 and "invalid settings: judge nli needs a model directory" in flat, flat
    assert "Value error" not in flat and "setting :" not in flat

    def fail(settings: EmbeddedSettings, console: object) -> int:
        raise ValueError("the nli judge needs onnxruntime: pip install 'ragpulse[nli]'")

    monkeypatch.setattr(embedded, "run_embedded", fail)
    import typer
    from typer.testing import CliRunner

    from ragpulse.deploy.commands import up

    app = typer.Typer()
    app.command()(up)
    r = CliRunner().invoke(app, ["--data-dir", str(tmp_path)])
    assert r.exit_code == 1 and "pip install 'ragpulse[nli]'" in " ".join(r.output.split()), r.output


def test_a_part_settings_error_is_one_line_per_setting(tmp_path: Path) -> None:
    """`up --grace 60` printed pydantic's whole ValidationError, with its documentation link,
    after "ragpulse up failed". The real command in a child process (the scorer's settings are
    built while starting)."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGPULSE_")}
    proc = subprocess.run(
        [sys.executable, "-m", "ragpulse.deploy.cli", "up", "--in-memory", "--grace", "60",
         "--data-dir", str(tmp_path), "--http-port", "0", "--grpc-port", "0",
         "--clickhouse-port", "0"], env={**env, "COLUMNS": "300"}, capture_output=True,
        text=True, timeout=120, stdin=subprocess.DEVNULL)
    out = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode == 2, out
    assert ("invalid setting assembly: grace_s (60; `up --grace`, RAGPULSE_ASSEMBLY__GRACE_S) "
            "must be less than max_wait_s (30; RAGPULSE_ASSEMBLY__MAX_WAIT_S)") in out, out
    assert "errors.pydantic.dev" not in out and "failed" not in out


def test_a_second_ctrl_c_after_the_drain_or_while_starting(tmp_path: Path) -> None:
    """After the drain, a second Ctrl-C changes nothing (it said "not waiting for the drain" and
    exited 130 though everything was scored); while starting, it stops at the next part without
    raising from the signal handler (which could leave a part half-started)."""
    done = Embedded(EmbeddedSettings(data_dir=tmp_path / "a", min_free_bytes=0))
    done._drained = True
    assert done.abandon_drain() is False and not done.drain_abandoned
    draining = Embedded(EmbeddedSettings(data_dir=tmp_path / "b", min_free_bytes=0))
    assert draining.abandon_drain() is True and draining.drain_abandoned
    starting = Embedded(EmbeddedSettings(data_dir=tmp_path / "c", min_free_bytes=0, http_port=0,
                                         grpc_port=0, clickhouse_port=0))
    starting.interrupt_start()
    with pytest.raises(KeyboardInterrupt):
        starting.launch()
    assert not starting.started and not (tmp_path / "c").exists()  # stopped before the store


@pytest.mark.parametrize(("durable", "confirm", "linger"), [(True, "ack", 5), (False, "enqueue", 50)])
def test_up_lingers_as_its_confirm_mode_allows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               durable: bool, confirm: str, linger: int) -> None:
    """Durable `up` answers after Kafka's ack, so each request would wait out the linger: 5 ms;
    in memory it answers once queued: 50 ms fills fewer, larger batches (issue 41). An explicit
    RAGPULSE_PRODUCER__LINGER_MS still wins."""
    e = Embedded(EmbeddedSettings(data_dir=tmp_path, durable=durable, http_port=0, grpc_port=0))
    e.broker = SimpleNamespace(bootstrap="127.0.0.1:39092")
    producer = e.collector_settings().producer
    assert (producer.confirm, producer.linger_ms) == (confirm, linger)
    monkeypatch.setenv("RAGPULSE_PRODUCER__LINGER_MS", "7")
    assert e.collector_settings().producer.linger_ms == 7
