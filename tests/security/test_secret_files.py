"""Credentials from ``*_FILE`` variables (Kubernetes/Docker secrets), as every command reads them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ragpulse.deploy.secrets import SecretFileError, load_secret_files


def test_file_values_fill_unset_variables(tmp_path: Path) -> None:
    (tmp_path / "pw").write_text("kafka-pw\n")
    (tmp_path / "key").write_text("sk-file")
    env = {"RAGPULSE_KAFKA__SASL_PASSWORD_FILE": str(tmp_path / "pw"),
           "OPENAI_API_KEY_FILE": str(tmp_path / "key"),
           "RAGPULSE_CLICKHOUSE_FILE": str(tmp_path / "pw"), "RAGPULSE_CLICKHOUSE": "explicit",
           "OTHER_FILE": "/nonexistent"}
    assert load_secret_files(env) == ["OPENAI_API_KEY", "RAGPULSE_KAFKA__SASL_PASSWORD"]
    assert env["RAGPULSE_KAFKA__SASL_PASSWORD"] == "kafka-pw"  # one trailing newline removed
    assert env["OPENAI_API_KEY"] == "sk-file"
    assert env["RAGPULSE_CLICKHOUSE"] == "explicit"  # an explicit value wins


@pytest.mark.parametrize(("content", "match"), [(None, "cannot read"), (b"", "is empty"),
                                                (b"\xff\xfe", "not UTF-8")])
def test_bad_files_are_clear_errors_without_content(tmp_path: Path, content, match) -> None:
    path = tmp_path / "secret"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(SecretFileError, match=match) as info:
        load_secret_files({"RAGPULSE_KAFKA__SASL_PASSWORD_FILE": str(path)})
    assert "RAGPULSE_KAFKA__SASL_PASSWORD_FILE" in str(info.value)


def test_the_command_refuses_an_unreadable_secret_file(tmp_path: Path) -> None:
    env = {**os.environ, "RAGPULSE_KAFKA__SASL_PASSWORD_FILE": str(tmp_path / "missing")}
    proc = subprocess.run([str(Path(sys.executable).with_name("ragpulse")), "--help"], env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2
    assert "RAGPULSE_KAFKA__SASL_PASSWORD_FILE" in proc.stderr and "cannot read" in proc.stderr
