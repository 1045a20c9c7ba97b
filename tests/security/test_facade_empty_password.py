"""A facade login with a user name and no password (issue 38, item 5).

``ragpulse up --host 0.0.0.0 --clickhouse-user default`` with a forgotten password started and
served every stored row to ``Basic default:``, ``X-ClickHouse-User: default``, ``?user=default``
and clickhouse-connect without a password. On loopback the same login also switched off the
guards against web pages (DNS rebinding, other sites' Origins), though a page can send
``?user=default``. Now such a login off loopback (and an empty token anywhere) stops ``up`` and
the facade; on loopback ``up`` says what it means and the guards stay on.

Real processes and sockets: the ``ragpulse up`` command, and the facade over a real chDB store.
"""

from __future__ import annotations

import base64
import http.client
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import clickhouse_connect
import pytest

from ragpulse.deploy.broker import free_port
from ragpulse.deploy.embedded import EmbeddedSettings
from ragpulse.deploy.facade import ClickHouseHttpFacade, FacadeSettings, build_facade
from ragpulse.deploy.logs import mask_secrets


def _env(**extra: str) -> dict[str, str]:
    """The environment of a ``ragpulse up`` child: none of the developer's RAGPULSE_*, the
    receivers' own token (off loopback they need one), a console too wide to wrap."""
    return {k: v for k, v in os.environ.items() if not k.startswith("RAGPULSE_")} | {
        "COLUMNS": "400", "RAGPULSE_OTLP__AUTH_TOKEN": "ingest-token", **extra}


def _up(data: Path, host: str, *args: str) -> list[str]:
    return [sys.executable, "-m", "ragpulse.deploy.cli", "up", "--in-memory", "--host", host,
            "--data-dir", str(data), "--http-port", str(free_port()), "--grpc-port",
            str(free_port()), "--clickhouse-port", str(free_port()), "--status-interval", "60",
            *args]


def test_no_password_is_no_login_off_loopback() -> None:
    for host in ("0.0.0.0", "192.168.1.10", "::"):
        with pytest.raises(ValueError, match="user 'default' and no password"):
            FacadeSettings(host=host, username="default")
        with pytest.raises(ValueError, match="no password"):
            FacadeSettings(host=host, username="default", password="")
        with pytest.raises(ValueError, match="no password"):
            EmbeddedSettings(host=host, clickhouse_user="default", clickhouse_token=None)
    # An empty token would match "Authorization: Bearer ": refused on loopback too.
    for host in ("0.0.0.0", "127.0.0.1"):
        with pytest.raises(ValueError, match="token is empty"):
            FacadeSettings(host=host, token="")
    # A secret is enough: a password, or a token beside a user name without one.
    assert FacadeSettings(host="0.0.0.0", username="default", password="pw").secret_login
    assert FacadeSettings(host="0.0.0.0", username="default", token="tok").secret_login
    assert not FacadeSettings(username="default").secret_login  # loopback: allowed, said


@pytest.mark.parametrize("how", ["flag", "empty-env"])
def test_up_refuses_a_user_without_a_password_off_loopback(tmp_path: Path, how: str) -> None:
    args, extra = (["--clickhouse-user", "default"], {}) if how == "flag" else \
        ([], {"RAGPULSE_UP__CLICKHOUSE_USER": "default", "RAGPULSE_UP__CLICKHOUSE_PASSWORD": ""})
    proc = subprocess.run(_up(tmp_path / "data", "0.0.0.0", *args), env=_env(**extra),
                          capture_output=True, text=True, timeout=60)  # a failure bound
    out = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode == 2, out[-2000:]
    assert "user 'default' and no password" in out and "--clickhouse-password" in out
    assert not (tmp_path / "data" / "chdb").exists()  # refused before anything started


@pytest.fixture
def passwordless(chdb_dir: Path, rag_schema: Any, caplog: pytest.LogCaptureFixture,
                 monkeypatch: pytest.MonkeyPatch) -> Iterator[ClickHouseHttpFacade]:
    f = build_facade(str(chdb_dir), FacadeSettings(database=rag_schema.database,
                                                    username="default", advertise=False))
    # a library's logging.config.dictConfig earlier in the session disables existing loggers
    # (disable_existing_loggers): the facade's warning must reach caplog whatever ran before
    for name in ("ragpulse", "ragpulse.deploy", "ragpulse.deploy.facade"):
        monkeypatch.setattr(logging.getLogger(name), "disabled", False)
        monkeypatch.setattr(logging.getLogger(name), "propagate", True)
    with caplog.at_level(logging.WARNING, logger="ragpulse.deploy.facade"):
        f.start()
    yield f
    f.shutdown()


def _get(port: int, path: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", path, headers=headers or {})
        r = conn.getresponse()
        return r.status, r.read().decode()
    finally:
        conn.close()


def _four_shapes(port: int) -> list[tuple[int, str]]:
    """``SELECT 1`` as the four clients of the report send user ``default`` without a
    password: Basic, X-ClickHouse-User, ?user=, clickhouse-connect."""
    q = "/?query=SELECT%201"
    basic = base64.b64encode(b"default:").decode()
    out = [_get(port, q, {"Authorization": f"Basic {basic}"}),
           _get(port, q, {"X-ClickHouse-User": "default"}),
           _get(port, q + "&user=default")]
    client = clickhouse_connect.get_client(host="127.0.0.1", port=port, username="default",
                                           password="")
    try:
        out.append((200, f"{client.command('SELECT 1')}\n"))
    finally:
        client.close()
    return out


def test_an_empty_password_on_loopback_keeps_the_web_page_guards(
        passwordless: ClickHouseHttpFacade, caplog: pytest.LogCaptureFixture) -> None:
    f = passwordless
    # What the empty password means, said when the facade starts.
    # The warning must read the same through the SecretFilter every command's handlers carry
    # (CI ran this after a test that configured logging: "password: anyone" came out "***").
    assert any("EMPTY password" in mask_secrets(r.getMessage())
               and "anyone on this machine" in mask_secrets(r.getMessage())
               for r in caplog.get_records("setup"))
    # Anyone on this machine is let in, whichever way the name is sent ...
    assert _four_shapes(f.port) == [(200, "1\n")] * 4
    # ... but not a web page: the user name is no secret, so the loopback guards stay on.
    q = "/?query=SELECT%201&user=default"
    for headers in ({"Host": "rebind.evil.example"}, {"Origin": "https://evil.example"},
                    {"Sec-Fetch-Site": "cross-site"}):
        status, body = _get(f.port, q, headers)
        assert status == 403 and body.startswith("Code: 497."), (headers, status, body)
    assert f.stats()["refused_origin"] == 3
    # and no login means the anonymous time cap
    assert f.policy.caps["max_execution_time"] == f.settings.anonymous_max_execution_time_s


@pytest.mark.slow
def test_up_on_loopback_says_what_an_empty_password_means(tmp_path: Path) -> None:
    log = tmp_path / "up.log"
    cmd = _up(tmp_path / "data", "127.0.0.1", "--clickhouse-user", "default")
    port = int(cmd[cmd.index("--clickhouse-port") + 1])
    proc = subprocess.Popen(cmd, stdout=log.open("wb"), stderr=subprocess.STDOUT, env=_env())
    try:
        deadline = time.monotonic() + 120  # a failure bound, not a measurement
        while "Ctrl-C drains" not in log.read_text(errors="replace"):
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        row = next(line for line in log.read_text().splitlines() if "ClickHouse login" in line)
        assert "user 'default' with an EMPTY password" in row, row
        assert "anyone on this machine can read" in row, row
        assert _four_shapes(port) == [(200, "1\n")] * 4
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
