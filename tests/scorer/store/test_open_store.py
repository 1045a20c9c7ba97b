"""open_store: DSNs, the one-process-per-directory rule, and reaching an owner's data."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ragpulse.deploy.facade import FacadeSettings, build_facade
from ragpulse.scorer.store import (
    StoreError,
    StoreLockedError,
    StoreSettings,
    latest_version,
    open_store,
    read_owner,
    write_owner,
)
from ragpulse.scorer.store.client import OWNER_FILE, chdb_path, lock_holder, remove_owner

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def foreign_pid() -> Iterator[int]:
    """The pid of a live process that is not this one."""
    p = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    yield p.pid
    p.stdin.close()  # type: ignore[union-attr]
    p.wait(30)


def test_dsn_parsing_and_validation(tmp_path: Path) -> None:
    assert chdb_path(f"chdb://{tmp_path}") == str(tmp_path.resolve())
    assert chdb_path("chdb://rel/dir") == os.path.realpath("rel/dir")
    with pytest.raises(ValueError, match="unsupported"):
        open_store("mysql://x")
    with pytest.raises(ValueError):
        StoreSettings(dsn="postgres://x")
    with pytest.raises(ValueError):
        StoreSettings(database="no-dashes")
    assert StoreSettings().dsn.startswith("chdb://")


def test_unreachable_server_is_a_clear_error_without_credentials(
        caplog: pytest.LogCaptureFixture) -> None:
    with pytest.raises(StoreError, match=r"cannot connect to ClickHouse at http://127\.0\.0\.1:1\b") as ei, \
            caplog.at_level("WARNING"):
        open_store("http://ops:hunter2@127.0.0.1:1", connect_timeout=2)
    assert "Unexpected Http Driver Exception" not in caplog.text  # the driver's bare line
    assert "hunter2" not in str(ei.value).split(":", 2)[-1].split("Error")[0]
    assert "hunter2" not in str(ei.value)
    # the cause in a few words, not the driver's urllib3 repr
    assert str(ei.value).endswith("connection refused (nothing listens there)"), str(ei.value)


def test_advertised_owner_is_named_or_followed(tmp_path: Path, foreign_pid: int, chdb_dir: Path,
                                               chdb_client: Any) -> None:
    facade = build_facade(str(chdb_dir), FacadeSettings(advertise=False))
    facade.start()
    try:
        other = tmp_path / "owned"
        write_owner(str(other), facade.url, pid=foreign_pid)
        with pytest.raises(StoreLockedError) as ei:
            open_store(f"chdb://{other}")
        msg = str(ei.value)
        assert f"pid {foreign_pid}" in msg and f"--clickhouse {facade.url}" in msg
        via_settings = open_store(StoreSettings(dsn=facade.url, connect_timeout_s=5))
        assert via_settings.command("SELECT 8") == 8
        via_settings.close()
        followed = open_store(f"chdb://{other}", follow_owner=True)
        assert followed.command("SELECT 7") == 7 and followed.url.startswith(facade.url)
        followed.close()
    finally:
        facade.shutdown()


def test_stale_owner_file_is_ignored(chdb_dir: Path, chdb_client: Any) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    pid = int(dead.stdout)
    write_owner(str(chdb_dir), "http://127.0.0.1:9", pid=pid)
    try:
        assert read_owner(str(chdb_dir)) is not None and not read_owner(str(chdb_dir)).alive()
        c = open_store(f"chdb://{chdb_dir}")  # the process that wrote it is gone
        assert c.command("SELECT 1") == 1
        c.close()
    finally:
        remove_owner(str(chdb_dir), pid=pid)
    assert not (chdb_dir / OWNER_FILE).exists()


def test_lock_holder_of_this_process(chdb_dir: Path, chdb_client: Any, tmp_path: Path) -> None:
    assert lock_holder(str(chdb_dir)) == os.getpid()
    assert lock_holder(str(tmp_path)) is None  # no chDB there


def test_second_directory_in_one_process_is_a_clear_error(tmp_path: Path, chdb_client: Any) -> None:
    with pytest.raises(StoreError, match="one directory per process"):
        open_store(f"chdb://{tmp_path / 'elsewhere'}")
    assert chdb_client.command("SELECT 1") == 1  # the session engine is unharmed


def _ragpulse(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from ragpulse.deploy.cli import main; main()", *args],
        capture_output=True, text=True, timeout=120, cwd=REPO)


def test_status_reaches_data_through_the_owning_process(tmp_path: Path) -> None:
    """Another process owns the directory (as `ragpulse up` does): this process never opens it
    (the checks come first, so the session engine is untouched), names the URL or the pid, and
    `ragpulse db status` in a third process follows the owner's facade."""
    data = tmp_path / "chdb"
    owner = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("owner_proc.py")), str(data), "rag_h6_owned"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        url = owner.stdout.readline().strip()  # type: ignore[union-attr]
        assert url.startswith("http://127.0.0.1:"), url
        assert lock_holder(str(data)) == owner.pid
        with pytest.raises(StoreLockedError, match=f"--clickhouse {url}"):
            open_store(f"chdb://{data}")
        via = open_store(f"chdb://{data}", follow_owner=True)
        assert via.command("SELECT count() FROM rag_h6_owned.schema_migrations FINAL") == latest_version()
        via.close()
        st = _ragpulse("db", "status", "--clickhouse", f"chdb://{data}", "--database", "rag_h6_owned")
        assert st.returncode == 0, st.stderr
        assert f"schema version {latest_version()}" in st.stdout and "scores" in st.stdout
        # An owner that does not advertise itself: the kernel's lock table names it.
        os.unlink(data / OWNER_FILE)
        with pytest.raises(StoreLockedError, match=f"locked by another process \\(pid {owner.pid}\\)"):
            open_store(f"chdb://{data}")
    finally:
        owner.stdin.close()  # type: ignore[union-attr]
        owner.wait(60)
    assert owner.returncode == 0
    assert lock_holder(str(data)) is None


@pytest.mark.parametrize("dsn", ["mysql://x", "chdb", "/var/lib/chdb", "clickhouse://h:9000"])
def test_one_dsn_check_for_the_store_and_the_scorer(dsn: str) -> None:
    """StoreSettings, ScorerSettings and open_store refuse the same DSNs with the same words."""
    from pydantic import ValidationError

    from ragpulse.scorer.pipeline.settings import ScorerSettings

    for build in (lambda: StoreSettings(dsn=dsn), lambda: ScorerSettings(clickhouse=dsn)):
        with pytest.raises(ValidationError, match="unsupported ClickHouse DSN"):
            build()
    with pytest.raises(ValueError, match="unsupported ClickHouse DSN"):
        open_store(dsn)
