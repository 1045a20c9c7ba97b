"""One data directory, whatever its spelling: `ragpulse up` finds the broker's data again
(issue 38, items 8 and 9).

With the default relative `--data-dir .ragpulse`, SeaweedFS ran with its working directory inside
the data directory and got the same relative path again: the broker's data landed in
`.ragpulse/s3/.ragpulse/s3`, weed.log said "cannot create log" after every line, and a restart
naming the directory by its absolute path found an empty store (0 traces replayed of 37 left in
Kafka; the relative spelling replayed them). Now `up` makes the directory absolute once, at the
start, and a directory in the old nested layout is moved into place on the next start.

Real processes throughout: the `ragpulse up` command (tansu, SeaweedFS, collector, scorer with
the local judge, chDB), OTLP/HTTP over real sockets; the nested layout is made by a real
SeaweedFS and broker.
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
from tests.reliability.test_up_crash import _alive, _children, _scored, _send
from tests.security.corpus import rag_spans, request, trace_id

pytestmark = pytest.mark.slow

TRACES = 20


def _start_up(args: list[str], cwd: Path, log: Path) -> tuple[subprocess.Popen[bytes], dict[str, int]]:
    """`ragpulse up ARGS` started in ``cwd`` on free ports, logging to ``log``; returns once it
    serves."""
    ports = {k: free_port() for k in ("http", "grpc", "ch")}
    cmd = [sys.executable, "-m", "ragpulse.deploy.cli", "up", *args,
           "--http-port", str(ports["http"]), "--grpc-port", str(ports["grpc"]),
           "--clickhouse-port", str(ports["ch"]), "--status-interval", "1"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGPULSE_")}
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=log.open("ab"), stderr=subprocess.STDOUT, env=env)
    deadline = time.monotonic() + 120
    while "Ctrl-C drains" not in log.read_text(errors="replace"):
        assert proc.poll() is None, log.read_text()
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.2)
    return proc, ports


def _wait_scored(ports: dict[str, int], ids: set[str], log: Path) -> None:
    deadline = time.monotonic() + 120
    scored: dict[str, object] = {}
    while time.monotonic() < deadline and len(scored) < len(ids):
        time.sleep(1)
        scored = _scored(ports, ids)
    assert len(scored) == len(ids), (f"{len(ids) - len(scored)} of {len(ids)} traces left in "
                                     f"Kafka never scored\n{log.read_text()[-3000:]}")


def _stop(proc: subprocess.Popen[bytes], log: Path) -> None:
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=120) == 0, log.read_text()[-3000:]


def test_a_restart_under_another_spelling_replays_what_a_relative_data_dir_held(tmp_path: Path) -> None:
    project = tmp_path / "project"  # the user's working directory
    project.mkdir()
    log = tmp_path / "up-1.log"
    # A long grace (under max_wait_s, 30 s): no trace is scored before the kill (a few seconds
    # later), every acknowledged one stays in Kafka.
    proc, ports = _start_up(["--data-dir", ".ragpulse", "--grace", "25"], project, log)
    try:
        helpers = _children(proc.pid)
        acked = {tid for i in range(TRACES) if (tid := _send(ports["http"], i)) is not None}
        assert acked, log.read_text()
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 30
        while any(_alive(p) for p in helpers):  # they die with `up` (pdeathsig)
            assert time.monotonic() < deadline
            time.sleep(0.1)

        # The same directory by its absolute path, from another working directory.
        log = tmp_path / "up-2.log"
        proc, ports = _start_up(["--data-dir", str(project / ".ragpulse"), "--grace", "0.5"],
                                tmp_path, log)
        _wait_scored(ports, acked, log)
        _stop(proc, log)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    store = project / ".ragpulse" / "s3"
    assert (store / "filerldb2").is_dir() and not (store / ".ragpulse").exists()
    weed_log = (store / "weed.log").read_text(errors="replace")
    assert "cannot create log" not in weed_log, weed_log[:2000]


def _nested_layout(data: Path, traces: int) -> set[str]:
    """What `up` before issue 38 left after a crash with `--data-dir .ragpulse`: the broker's
    store in `DATA_DIR/s3/.ragpulse/s3`, holding ``traces`` OTLP records nobody consumed.
    Returns their trace ids."""
    from kafka import KafkaProducer

    from ragpulse.common import KafkaSettings, ensure_topic
    from ragpulse.deploy.durable import SeaweedS3, durable_broker

    s3 = SeaweedS3(data / "s3" / ".ragpulse" / "s3").start()
    broker = durable_broker(s3).start()
    try:
        ensure_topic(KafkaSettings(bootstrap_servers=broker.bootstrap), 3)
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
        ids = {trace_id(f"nested-{i}") for i in range(traces)}
        futures = [producer.send("otlp_spans", key=tid.encode(), value=request(
            rag_spans(tid, start=time.time_ns())).SerializeToString()) for tid in ids]
        producer.flush(60)
        assert all(f.succeeded() for f in futures)
        producer.close(5)
    finally:
        broker.shutdown()
        s3.kill()  # a crash
    return ids


def test_the_nested_layout_of_older_versions_keeps_its_data(tmp_path: Path) -> None:
    data = tmp_path / "data"
    ids = _nested_layout(data, TRACES)
    nested = data / "s3" / ".ragpulse" / "s3"
    assert (nested / "filerldb2").is_dir()
    log = tmp_path / "up.log"
    proc, ports = _start_up(["--data-dir", str(data), "--grace", "0.5"], tmp_path, log)
    try:
        _wait_scored(ports, ids, log)
        _stop(proc, log)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert f"moved the broker's data from {nested} to {data / 's3'}" in log.read_text()
    assert (data / "s3" / "filerldb2").is_dir() and not (data / "s3" / ".ragpulse").exists()


def test_two_stores_are_not_merged_and_the_warning_names_both(tmp_path: Path, caplog) -> None:
    """A start under another spelling before this fix made a store at the top too: which one
    holds the unscored records cannot be told, and two stores cannot be merged, so nothing moves
    and the warning says where the other one is and how to use it."""
    import logging

    from ragpulse.deploy.durable import adopt_nested_store

    store = tmp_path / "s3"
    nested = store / ".ragpulse" / "s3"
    (store / "filerldb2").mkdir(parents=True)
    (nested / "filerldb2").mkdir(parents=True)
    (nested / "1.dat").write_bytes(b"records")
    with caplog.at_level(logging.WARNING, logger="ragpulse.deploy.durable"):
        assert adopt_nested_store(store) is None
    assert (nested / "1.dat").read_bytes() == b"records" and not (store / "1.dat").exists()
    assert f"is in {nested}, not read: this start uses {store}" in caplog.text
