"""`ragpulse <command> --help` piped (`| less`, a CI log): rich printed it 80 columns wide and cut
long option and variable names (`--allow-anonymous-inge…`, `RAGPULSE_UP__CLICKHOUS…`), the very
names the help recommends. Run through the console script's entry point, as a user runs it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

CLI = [sys.executable, "-c", "from ragpulse.deploy.cli import main; main()"]


@pytest.mark.parametrize("command", ["up", "score", "scorer", "collector", "status", "report"])
def test_piped_help_cuts_no_name(command: str) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "TERMINAL_WIDTH")}
    out = subprocess.run([*CLI, command, "--help"], capture_output=True, text=True, env=env,
                         timeout=60, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr
    assert "…" not in out.stdout, out.stdout
    if command == "up":
        for name in ("--allow-anonymous-ingest", "RAGPULSE_UP__CLICKHOUSE_PASSWORD(_FILE)",
                     "RAGPULSE_OTLP__AUTH_TOKEN"):
            assert name in out.stdout, name
    if command == "status":
        assert "Exit code 3 when an alert fires" in " ".join(out.stdout.split())
