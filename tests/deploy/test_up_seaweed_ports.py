"""SeaweedFS's ports under `ragpulse up` (issue 38, item 9).

Six starts in a row failed with `weed mini ... Port allocation failed: port 56579 for Master ...
is not available` although a plain bind to that port worked, and the error began with stale
lines of the previous run's weed.log. Why: `weed mini` checks a port given by flag on 127.0.0.1
*and* on every interface (Go's `net.Listen("tcp", ":P")`, the dual-stack IPv6 wildcard), so a
socket holding the port on another address (here `[::1]:P`) makes it refuse a port that a plain
bind on 127.0.0.1 accepts; and `up` picked the ports by binding to port 0 and closing, about
0.4 s before weed checks them, time in which anything on the machine may take one. Now `up`
picks ports with weed's own check, starts weed again on fresh ports when it refuses one,
lets the user fix all ten (`--s3-base-port`, `RAGPULSE_UP__S3_BASE_PORT`), and its errors show
only this run's log lines.

Real processes: the `weed mini` binary, the `ragpulse up` command and its children.
"""

from __future__ import annotations

import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from ragpulse.deploy.broker import free_port
from ragpulse.deploy.durable import PORT_NAMES, SeaweedS3, weed_can_listen
from tests.security.test_up_listeners import descendants, listening

pytestmark = pytest.mark.slow


def _free_range(count: int = len(PORT_NAMES)) -> int:
    """A base port whose ``count`` ports weed would all accept now (below the ephemeral range,
    where no outgoing connection takes one meanwhile)."""
    for _ in range(200):
        base = random.randrange(20_000, 32_000)
        if all(weed_can_listen(base + i) for i in range(count)):
            return base
    raise AssertionError("no free range of ports")


@contextmanager
def _held_on_ipv6_loopback(port: int) -> Iterator[None]:
    """Another program's socket on [::1]:port (a listener; a TIME-WAIT connection counts too)."""
    with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as sock:
        sock.bind(("::1", port))
        sock.listen(1)
        yield


def _up(args: list[str], log: Path, env_extra: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGPULSE_")}
    env.update(env_extra or {})
    cmd = [sys.executable, "-m", "ragpulse.deploy.cli", "up", "--http-port", "0", "--grpc-port",
           "0", "--clickhouse-port", "0", *args]
    return subprocess.Popen(cmd, stdout=log.open("ab"), stderr=subprocess.STDOUT, env=env)


def _wait_started(proc: subprocess.Popen[bytes], log: Path) -> str:
    deadline = time.monotonic() + 120
    while "Ctrl-C drains" not in (text := log.read_text(errors="replace")):
        assert proc.poll() is None, text
        assert time.monotonic() < deadline, text
        time.sleep(0.2)
    return text


def _stop(proc: subprocess.Popen[bytes], log: Path) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            assert proc.wait(timeout=120) == 0, log.read_text()[-3000:]
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def test_weed_refuses_a_port_held_on_another_address_and_says_only_this_run(tmp_path: Path) -> None:
    base = _free_range()
    master = base + PORT_NAMES.index("master.port")
    (tmp_path / "weed.log").write_text("STALE line of an earlier run\n" * 30)
    with _held_on_ipv6_loopback(master):
        with socket.socket() as plain:  # what `up`'s probe did: a plain bind works ...
            plain.bind(("127.0.0.1", master))
        assert not weed_can_listen(master)  # ... weed's check does not
        s3 = SeaweedS3(tmp_path, base_port=base, start_timeout_s=30)
        with pytest.raises(RuntimeError) as failed:
            s3.start()
        s3.shutdown()
    message = str(failed.value)
    assert f"Port allocation failed: port {master} for Master" in message, message
    assert "STALE" not in message, message  # only this run's lines
    assert "fresh ports" not in message  # fixed ports: not retried on others


def _steal_first_master_port(up_pid: int, stop: threading.Event, stolen: list[int]) -> None:
    """Take the master port of the first `weed mini` under ``up_pid`` on [::1] as soon as its
    command line shows it (weed checks its ports about 0.4 s after it starts): a port taken
    between `up`'s pick and weed's check, as on the busy machine."""
    held: list[socket.socket] = []
    try:
        while not stop.is_set() and not stolen:
            try:
                pids = descendants(up_pid)
            except OSError:  # a process of the tree exited meanwhile
                continue
            for pid in pids:
                try:
                    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
                except OSError:
                    continue
                if m := re.search(rb" mini .*-master\.port=(\d+)", cmdline):
                    sock = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
                    sock.bind(("::1", int(m.group(1))))
                    sock.listen(1)
                    held.append(sock)
                    stolen.append(int(m.group(1)))
                    break
            time.sleep(0.001)
        stop.wait(300)
    finally:
        for sock in held:
            sock.close()


def test_up_starts_weed_again_on_fresh_ports_when_one_was_taken(tmp_path: Path) -> None:
    log = tmp_path / "up.log"
    proc = _up(["--data-dir", str(tmp_path / "data")], log)
    stop, stolen = threading.Event(), []
    thief = threading.Thread(target=_steal_first_master_port, args=(proc.pid, stop, stolen))
    thief.start()
    try:
        text = _wait_started(proc, log)
        assert stolen, "the port was not taken: this test checks nothing"
        assert f"SeaweedFS refused port {stolen[0]}" in text, text
        weed = [p for p in descendants(proc.pid)
                if b"weed" in Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0")[0]]
        assert weed and stolen[0] not in {port for pid in weed for _a, port in listening(pid)}
    finally:
        stop.set()
        _stop(proc, log)
        thief.join()


def test_s3_base_port_fixes_all_ten_ports(tmp_path: Path) -> None:
    base = _free_range()
    log = tmp_path / "up.log"
    proc = _up(["--data-dir", str(tmp_path / "data"), "--s3-base-port", str(base)], log)
    try:
        text = _wait_started(proc, log)
        assert f"S3 http://127.0.0.1:{base};" in text, text
        weed = [p for p in descendants(proc.pid)
                if b"weed" in Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0")[0]]
        held = {port for pid in weed for _addr, port in listening(pid)}
        assert held == set(range(base, base + len(PORT_NAMES))), (sorted(held), base)
    finally:
        _stop(proc, log)


def test_a_taken_s3_base_port_is_refused_before_anything_starts(tmp_path: Path) -> None:
    base = _free_range()
    volume = base + PORT_NAMES.index("volume.port")
    log = tmp_path / "up.log"
    with _held_on_ipv6_loopback(volume):
        proc = _up(["--data-dir", str(tmp_path / "data")], log,
                   {"RAGPULSE_UP__S3_BASE_PORT": str(base)})
        try:
            assert proc.wait(timeout=120) == 1, log.read_text()
        except subprocess.TimeoutExpired:
            _stop(proc, log)  # it started: the setting was not read
            raise
    text = " ".join(log.read_text().split())  # rich wraps long lines
    assert (f"cannot listen on 127.0.0.1:{volume} (SeaweedFS volume, --s3-base-port {base} + 3)"
            in text), text
    assert not (tmp_path / "data" / "s3").exists()  # nothing started


def test_free_ports_are_picked_as_weed_checks_them() -> None:
    """The probe `up` used (a plain bind on 127.0.0.1) accepted a port weed refuses; the pick
    now uses weed's check, so a port held on [::1] is never handed to weed."""
    port = free_port()
    with _held_on_ipv6_loopback(port):
        assert not weed_can_listen(port)
    assert weed_can_listen(port)
