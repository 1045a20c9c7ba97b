"""`ragpulse scorer` with Kafka down says so first, and Ctrl-C while it waits stops it cleanly
(issue 38, item 15).

It printed nothing for 11 s, then a line about the dead-letter topic; Ctrl-C at 20 s printed
`Bootstrap failed: weakly-referenced object no longer exists` (the KeyboardInterrupt raised
inside kafka-python's bootstrap). Now it says `waiting for Kafka at HOST:PORT: connection
refused; retrying` as the collector does, a signal only sets a flag (nothing is raised inside
the Kafka client), and it exits with 130 and one line, as `ragpulse up` interrupted while
starting. The real CLI in a subprocess, against a closed port.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ragpulse.deploy.broker import free_port

CLI = [sys.executable, "-m", "ragpulse.deploy.cli", "scorer"]


def _scorer(tmp_path: Path, port: int, timeout_ms: int) -> tuple[subprocess.Popen[bytes], Path]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGPULSE_")}
    env["RAGPULSE_KAFKA__BOOTSTRAP_TIMEOUT_MS"] = str(timeout_ms)
    err = tmp_path / "stderr.log"
    proc = subprocess.Popen([*CLI, "--kafka", f"127.0.0.1:{port}",
                             "--clickhouse", f"chdb://{tmp_path / 'db'}"],
                            stdout=subprocess.DEVNULL, stderr=err.open("wb"), env=env)
    return proc, err


def _lines(err: Path) -> list[str]:
    return [ln for ln in err.read_text(errors="replace").splitlines() if ln.strip()]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_waiting_for_kafka_is_said_first_and_a_signal_stops_it_cleanly(tmp_path: Path, sig) -> None:
    port = free_port()  # closed: nothing listens there
    proc, err = _scorer(tmp_path, port, timeout_ms=120_000)
    try:
        deadline = time.monotonic() + 90  # the imports take seconds on a busy machine
        while not _lines(err):
            assert proc.poll() is None and time.monotonic() < deadline, err.read_text()
            time.sleep(0.1)
        first = _lines(err)[0]
        assert first.endswith(f"WARNING ragpulse.deploy.commands.scorer: waiting for Kafka at "
                              f"127.0.0.1:{port}: connection refused; retrying"), err.read_text()
        time.sleep(1.5)  # waiting, retrying
        sent = time.monotonic()
        proc.send_signal(sig)
        assert proc.wait(timeout=30) == 130, err.read_text()
        assert time.monotonic() - sent < 10  # at once, not after the bootstrap timeout
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = err.read_text()
    assert _lines(err)[-1] == "ragpulse scorer: interrupted while starting; stopped.", text
    for noise in ("Traceback", "weakly-referenced", "Bootstrap failed", "KeyboardInterrupt",
                  "dead-letter"):
        assert noise not in text, text


def test_kafka_that_never_answers_is_one_wait_and_one_error(tmp_path: Path) -> None:
    port = free_port()
    proc, err = _scorer(tmp_path, port, timeout_ms=3000)
    assert proc.wait(timeout=120) == 1, err.read_text()
    lines = _lines(err)
    assert "waiting for Kafka at 127.0.0.1:" in lines[0], lines
    assert lines[-1] == (f"error: cannot start the scorer: Kafka at 127.0.0.1:{port} did not "
                         "answer within 3 s (connection refused); is it running? "
                         "(RAGPULSE_KAFKA__BOOTSTRAP_TIMEOUT_MS sets the wait)"), lines
    assert len(lines) == 2, lines  # no dead-letter line, no second bootstrap wait
