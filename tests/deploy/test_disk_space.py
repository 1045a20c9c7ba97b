"""`ragpulse up` on a disk without room (or with a taken port): it refuses before creating anything, with one line that
says how much is free and what it needs, instead of the broker's opaque ``KafkaProtocolError:
Unable to decode response`` (SeaweedFS with no volume to write to; docs/reliability.md, "Disk
space"); and its status line warns once free space falls below the minimum while it runs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections import namedtuple
from pathlib import Path

import pytest

from ragpulse.deploy import diskspace
from ragpulse.deploy.diskspace import (
    DURABLE_MIN_FREE,
    IN_MEMORY_MIN_FREE,
    DiskSpaceError,
    check_free_space,
    free_bytes,
    human_bytes,
)
from ragpulse.deploy.embedded import Embedded, EmbeddedSettings
from ragpulse.deploy.statusline import status_line

Usage = namedtuple("Usage", "total used free")


def test_the_real_command_refuses_a_full_disk_before_creating_anything(tmp_path: Path) -> None:
    data = tmp_path / "not-yet" / "data"
    need = free_bytes(tmp_path) + (1 << 40)  # a TiB more than this disk has: "full"
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGPULSE_")}
    env["RAGPULSE_UP__MIN_FREE_BYTES"] = str(need)
    env["COLUMNS"] = "400"  # one line, as a log collector reads it
    proc = subprocess.run(
        [sys.executable, "-m", "ragpulse.deploy.cli", "up", "--data-dir", str(data),
         "--http-port", "0", "--grpc-port", "0", "--clickhouse-port", "0"],
        env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "ragpulse up failed: DiskSpaceError: only " in out
    assert f"needs {human_bytes(need)} there" in out and "SeaweedFS (--durable)" in out
    assert "RAGPULSE_UP__MIN_FREE_BYTES" in out and "Traceback" not in out
    assert not (tmp_path / "not-yet").exists()  # nothing created: no chDB, no SeaweedFS, no broker


def test_minimum_by_storage_mode_and_override(tmp_path: Path) -> None:
    assert EmbeddedSettings(data_dir=tmp_path).required_free_bytes == DURABLE_MIN_FREE
    assert EmbeddedSettings(data_dir=tmp_path, durable=False).required_free_bytes == IN_MEMORY_MIN_FREE
    assert EmbeddedSettings(data_dir=tmp_path, min_free_bytes=0).required_free_bytes == 0
    assert DURABLE_MIN_FREE > 1 << 30  # room for one whole 1 GiB SeaweedFS volume, and chDB
    with pytest.raises(ValueError):
        EmbeddedSettings(min_free_bytes=-1)


def test_check_measures_the_nearest_existing_directory(monkeypatch: pytest.MonkeyPatch,
                                                       tmp_path: Path) -> None:
    seen: list[Path] = []

    def usage(path: Path) -> Usage:
        seen.append(Path(path))
        return Usage(10 << 30, (10 << 30) - (700 << 20), 700 << 20)

    monkeypatch.setattr(shutil, "disk_usage", usage)
    target = tmp_path / "a" / "b"
    assert check_free_space(target, 700 << 20, durable=True) == 700 << 20  # exactly enough
    assert seen == [tmp_path]
    with pytest.raises(DiskSpaceError, match=r"only 700 MiB free .* needs 1\.25 GiB there: "
                       r"SeaweedFS") as err:
        check_free_space(target, DURABLE_MIN_FREE, durable=True)
    assert str(tmp_path) in str(err.value)
    with pytest.raises(DiskSpaceError, match="chDB needs room for its parts and merges"):
        check_free_space(target, (700 << 20) + 1, durable=False)
    assert not target.exists()


def test_the_status_line_warns_once_free_space_is_below_the_minimum(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    stack = Embedded(EmbeddedSettings(data_dir=tmp_path, durable=False))  # nothing started
    monkeypatch.setattr(diskspace, "free_bytes", lambda _p: 512 << 20)
    st = stack.stats()
    assert st["disk.free_bytes"] == 512 << 20 and st["disk.min_free_bytes"] == IN_MEMORY_MIN_FREE
    assert status_line(st, 5).endswith(", errors 0")  # 512 MiB >= 256 MiB: no note
    monkeypatch.setattr(diskspace, "free_bytes", lambda _p: 100 << 20)
    line = status_line(stack.stats(), 5)
    assert line.endswith(f"; DISK LOW: 100 MiB free under {tmp_path} (needs 256 MiB)"), line
    # min_free_bytes 0 turns the check and the warning off
    off = Embedded(EmbeddedSettings(data_dir=tmp_path, min_free_bytes=0)).stats()
    assert "disk.free_bytes" not in off and "DISK" not in status_line(off, 5)


def test_human_bytes() -> None:
    assert human_bytes(DURABLE_MIN_FREE) == "1.25 GiB"
    assert human_bytes(699.29 * (1 << 20)) == "699.29 MiB"
    assert human_bytes(1 << 30) == "1 GiB" and human_bytes(3000) == "3 KiB"


@pytest.mark.parametrize("flag,what", [("--http-port", "OTLP/HTTP"), ("--grpc-port", "OTLP/gRPC"),
                                       ("--clickhouse-port", "ClickHouse facade")])
def test_a_taken_port_is_named_before_anything_starts(tmp_path: Path, flag: str, what: str) -> None:
    """`Address already in use` named no port (the helper's walkthrough): now the listener,
    the port and the flag, and nothing is created."""
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        ports = {"--http-port": "0", "--grpc-port": "0", "--clickhouse-port": "0", flag: str(port)}
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAGPULSE_")}
        proc = subprocess.run(
            [sys.executable, "-m", "ragpulse.deploy.cli", "up", "--data-dir", str(tmp_path / "d"),
             *(x for kv in ports.items() for x in kv)],
            env={**env, "COLUMNS": "400"}, capture_output=True, text=True, timeout=120)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert (f"PortInUseError: cannot listen on 127.0.0.1:{port} ({what}): address in use; "
            f"choose another with {flag} (0 picks a free one)") in out
    assert not (tmp_path / "d").exists()


def test_the_kafka_port_is_checked_on_loopback_where_the_broker_listens() -> None:
    """The broker always binds 127.0.0.1; checking its port on --host let a taken loopback port
    through to a bind failure after the other parts had started."""
    import socket

    from ragpulse.deploy.embedded import PortInUseError, check_ports

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        # (constructed without validation: serving on 0.0.0.0 also needs tokens, beside the point)
        settings = EmbeddedSettings.model_construct(host="0.0.0.0", kafka_port=port, http_port=0,
                                                    grpc_port=0, clickhouse_port=0)
        with pytest.raises(PortInUseError, match=f"127.0.0.1:{port} \\(Kafka broker\\).*--kafka-port"):
            check_ports(settings)


def test_a_store_held_by_another_command_is_not_called_another_up(tmp_path: Path) -> None:
    """A `report`, `db status` or a notebook holding DATA_DIR/chdb was named "another `ragpulse
    up`" with advice to read it through `ragpulse status`, which it does not serve."""
    from ragpulse.deploy.embedded import check_not_running
    from ragpulse.scorer.store import StoreLockedError

    store = tmp_path / "d" / "chdb"
    code = ("import sys; from ragpulse.scorer.store import open_store; "
            f"c = open_store('chdb://{store}'); print('ready', flush=True); sys.stdin.readline()")
    holder = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"  # type: ignore[union-attr]
        with pytest.raises(StoreLockedError) as err:
            check_not_running(EmbeddedSettings(data_dir=tmp_path / "d"))
        said = str(err.value)
        assert f"another process (pid {holder.pid}) holds the store" in said, said
        assert "ragpulse up" in said and "already runs" not in said and err.value.owner_pid == holder.pid
    finally:
        holder.stdin.close()  # type: ignore[union-attr]
        holder.wait(60)
