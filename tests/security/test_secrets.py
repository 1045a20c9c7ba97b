"""Credentials never show up in what ragpulse prints: settings reprs, dumps, and the output of
the real commands when they start and fail (the moment an operator pastes logs into a ticket).

Secrets come from the environment (``RAGPULSE_*``), as in a deployment.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ragpulse.common import KafkaSettings
from ragpulse.deploy.facade import FacadeSettings
from ragpulse.scorer.store import StoreSettings

CLI = [str(Path(sys.executable).with_name("ragpulse"))]
KAFKA_SECRET = "kafka-s3cret-Zq9"
CH_SECRET = "clickhouse-s3cret-Xw7"


def test_settings_never_render_secrets() -> None:
    kafka = KafkaSettings(security_protocol="SASL_SSL", sasl_mechanism="PLAIN",
                          sasl_username="svc", sasl_password=KAFKA_SECRET)
    store = StoreSettings(dsn="http://127.0.0.1:8123", username="svc", password=CH_SECRET)
    facade = FacadeSettings(token=CH_SECRET)
    for obj in (kafka, store, facade):
        for text in (repr(obj), str(obj), obj.model_dump_json(), str(obj.model_dump())):
            assert KAFKA_SECRET not in text and CH_SECRET not in text
    # ...while the client still gets the real value
    assert kafka.client_kwargs()["sasl_plain_password"] == KAFKA_SECRET


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGPULSE_")}
    env.update(extra)
    return env


@pytest.mark.parametrize(
    ("args", "level"),
    [
        (["collector", "--kafka", "127.0.0.1:1", "--http", "127.0.0.1:0", "--no-grpc"], "INFO"),
        (["scorer", "--kafka", "127.0.0.1:1"], "INFO"),
        # kafka-python logs its whole configuration at DEBUG, password included: the
        # SecretFilter every command installs (ragpulse.deploy.logs) masks it.
        (["collector", "--kafka", "127.0.0.1:1", "--http", "127.0.0.1:0", "--no-grpc"], "DEBUG"),
        (["scorer", "--kafka", "127.0.0.1:1"], "DEBUG"),
    ],
    ids=["collector-info", "scorer-info", "collector-debug", "scorer-debug"],
)
def test_commands_that_fail_to_connect_do_not_print_credentials(args: list[str], level: str,
                                                               tmp_path) -> None:
    env = _env(
        RAGPULSE_KAFKA__SECURITY_PROTOCOL="SASL_PLAINTEXT",
        RAGPULSE_KAFKA__SASL_MECHANISM="PLAIN",
        RAGPULSE_KAFKA__SASL_USERNAME="svc",
        RAGPULSE_KAFKA__SASL_PASSWORD=KAFKA_SECRET,
        RAGPULSE_KAFKA__BOOTSTRAP_TIMEOUT_MS="1000",
        # a DSN with the password in it: the form clickhouse-connect users paste
        RAGPULSE_CLICKHOUSE=f"http://svc:{CH_SECRET}@127.0.0.1:1",
    )
    try:
        proc = subprocess.run([*CLI, *args, "--log-level", level], env=env, capture_output=True,
                              text=True, timeout=60, cwd=tmp_path, check=False)
    except subprocess.TimeoutExpired as exc:  # still retrying: judge what it printed so far
        out = (exc.stdout or b"").decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        err = (exc.stderr or b"").decode() if isinstance(exc.stderr, bytes) else (exc.stderr or "")
    else:
        out, err = proc.stdout, proc.stderr
        assert proc.returncode != 0  # nothing to connect to: it must fail, and say so
    text = out + err
    assert text.strip()
    assert KAFKA_SECRET not in text and CH_SECRET not in text, text[-2000:]
