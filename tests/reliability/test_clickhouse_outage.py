"""ClickHouse crashes (SIGKILL) while the scorer writes, and comes back on the same directory and
port: the scorer keeps retrying, commits no offset whose rows were not acknowledged, and in the
end every trace is in the deduplicated table exactly once.

Real processes: a chDB owner subprocess serving the ClickHouse-HTTP facade (the database server),
the scorer service talking to it over HTTP (clickhouse-connect), a real tansu broker. The judge is
the table judge (the fault is in the store, not in judging).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import clickhouse_connect
import pytest

from ragpulse.deploy.broker import free_port
from ragpulse.scorer.pipeline import build_scorer
from testkit.traffic import make_traces, otelcol_records
from tests.scorer.pipeline.conftest import (
    METRICS,
    committed,
    end_offsets,
    produce,
    table_judge,
    wait_for,
)

# Real processes and outages of a few seconds each: the project's 'slow' marker (still run in CI).
pytestmark = pytest.mark.slow

OWNER = "tests.reliability.chdb_owner"


def _start_owner(path: Path, db: str, port: int) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, "-m", OWNER, str(path), db, str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=str(Path(__file__).resolve().parents[2]))
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    assert url.startswith("http://"), proc.stderr.read() if proc.stderr else url
    return proc, url


def _kill(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    proc.wait(10)


def test_clickhouse_killed_and_restarted_loses_nothing_and_commits_nothing_early(
    kafka_broker_module, topic, make_settings, tmp_path
):
    db = f"rag_{uuid.uuid4().hex[:8]}"
    port = free_port()
    data = tmp_path / "chdb"
    owner, url = _start_owner(data, db, port)
    first, second = make_traces(20, seed=31), make_traces(20, seed=32)
    settings = make_settings(
        clickhouse=url, database=db, init_schema=False,
        writer={"flush_interval_s": 0.1,
                "retry": {"initial_backoff_s": 0.05, "max_backoff_s": 0.5, "deadline_s": 1.0}},
    )
    group = settings.consumer.group_id
    svc = None
    try:
        produce(kafka_broker_module.bootstrap, topic, otelcol_records(first))
        svc = build_scorer(settings, judge=table_judge()).start()
        wait_for(lambda: svc.stats()["traces_done"] == 20, what="first batch written")
        wait_for(lambda: sum(committed(kafka_broker_module.bootstrap, group).values()) == 20,
                 what="first batch committed")
        _kill(owner)  # the database server crashes
        produce(kafka_broker_module.bootstrap, topic, otelcol_records(second))
        wait_for(lambda: svc.stats()["traces_scored"] >= 40 and svc.stats()["write_errors"] >= 3,
                 what="second batch scored, its writes failing")
        time.sleep(1.0)  # several commit intervals with every write failing
        assert sum(committed(kafka_broker_module.bootstrap, group).values()) == 20
        assert svc.stats()["traces_done"] == 20
        owner, _ = _start_owner(data, db, port)  # back, same directory and port
        wait_for(lambda: svc.stats()["traces_done"] == 40, timeout_s=90,
                 what="second batch written after the restart")
        ends = end_offsets(kafka_broker_module.bootstrap, topic)
        wait_for(lambda: committed(kafka_broker_module.bootstrap, group) == ends,
                 what="offsets committed to the end")
        write_errors = svc.stats()["write_errors"]
    finally:
        if svc is not None:
            svc.shutdown()
    try:
        client = clickhouse_connect.get_client(host="127.0.0.1", port=port)
        per_trace = client.query(
            f"SELECT trace_id, count() FROM `{db}`.scores FINAL GROUP BY trace_id").result_rows
        raw = client.command(f"SELECT count() FROM `{db}`.scores")
        client.close()
    finally:
        _kill(owner)
    assert {t for t, _ in per_trace} == {t.trace_id for t in first + second}
    assert all(n == len(METRICS) for _, n in per_trace)  # exactly once after deduplication
    print(f"\nclickhouse outage: 40 traces, {write_errors} failed writes retried, raw rows {raw}, "
          f"deduplicated rows {sum(n for _, n in per_trace)}, lost 0")
