"""What the default ``ragpulse up`` listens on is what it reports, on loopback (issue 17).

SeaweedFS (``weed mini``, the durable broker storage) also opened an Iceberg REST catalog and a
Lance namespace server, on 127.0.0.1:8181 and 9101 (or the next free ports), and WebDAV:
services ragpulse never uses and never mentioned. Now those are off, and every port the weed
process holds is one that ``up`` chose and prints in its start-up table.

Real processes: the ``ragpulse up`` command and its children; the listening sockets are read
from /proc (the child's socket inodes matched against /proc/<pid>/net/tcp and tcp6).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ragpulse.deploy.broker import free_port

pytestmark = pytest.mark.slow

_LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp
# 127.0.0.1, ::ffff:127.0.0.1 (gRPC's dual-stack socket) and ::1, as /proc/net/tcp{,6} write them
_LOOPBACK = {"0100007F", "0000000000000000FFFF00000100007F", "00000000000000000000000001000000"}


def listening(pid: int) -> set[tuple[str, int]]:
    """(address as /proc writes it, port) of every TCP socket ``pid`` listens on."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:  # closed meanwhile
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:["):-1])
    out = set()
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == _LISTEN and fields[9] in inodes:
                addr, port = fields[1].rsplit(":", 1)
                out.add((addr, int(port, 16)))
    return out


def descendants(pid: int) -> set[int]:
    out: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            out |= {int(child)} | descendants(int(child))
    return out


def test_seaweedfs_listens_only_on_the_ports_up_reports(tmp_path: Path) -> None:
    log = tmp_path / "up.log"
    cmd = [sys.executable, "-m", "ragpulse.deploy.cli", "up", "--data-dir", str(tmp_path / "data"),
           "--http-port", str(free_port()), "--grpc-port", str(free_port()),
           "--clickhouse-port", str(free_port()), "--status-interval", "60"]
    # No RAGPULSE_* from the developer's shell; a wide console so the table is not wrapped.
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGPULSE_")} | {
        "COLUMNS": "400"}
    proc = subprocess.Popen(cmd, stdout=log.open("wb"), stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + 120  # a failure bound, not a measurement
        while "Ctrl-C drains" not in log.read_text(errors="replace"):
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        text = log.read_text()
        row = next((line for line in text.splitlines() if "Broker storage (SeaweedFS)" in line),
                   None)
        assert row is not None, text
        value = row.split("(SeaweedFS)", 1)[1]  # "S3 http://127.0.0.1:P; also on ...: P (master), ..."
        found = re.findall(r"127\.0\.0\.1:(\d+)|(\d+) \(", value)
        reported = {int(s3 or other) for s3, other in found}
        assert len(reported) == len(found) >= 2, row
        weed = [p for p in descendants(proc.pid)
                if b"weed" in Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0")[0]]
        assert weed, "no weed process under up"
        held = set().union(*(listening(p) for p in weed))
        assert {port for _, port in held} == reported, (sorted(held), sorted(reported), row)
        assert {addr for addr, _ in held} == {"0100007F"}  # 127.0.0.1 only

        # The whole process tree (up itself, tansu, weed): every listener is in the table.
        table = {int(p) for p in re.findall(r"127\.0\.0\.1:(\d+)", text)} | reported
        everything = set().union(*(listening(p) for p in {proc.pid} | descendants(proc.pid)))
        assert {port for _, port in everything} == table, (sorted(everything), text)
        assert {addr for addr, _ in everything} <= _LOOPBACK, sorted(everything)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
