"""Kill ``ragpulse scorer`` mid-stream (SIGKILL), restart it: no score lost, none counted twice.

The scorer runs as a real subprocess with the real LocalJudge, owning its own chDB directory
(chDB allows one owning process per directory, so the rows are read afterwards by another
subprocess). Records are committed only after their rows were acknowledged, so the restart
replays what was written but not committed; the ReplacingMergeTree key makes those rows replace
the first ones, which ``FINAL`` shows.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading

import pytest

from testkit.traffic import make_traces, otelcol_records
from tests.infra_chdb import query_chdb_dir

from .conftest import committed, end_offsets, produce, wait_for

pytestmark = pytest.mark.slow

N_TRACES = 60
METRICS = "faithfulness,answer_relevancy,context_precision"


class ScorerProcess:
    """``python -m ragpulse.deploy.cli scorer ...`` with its stderr status lines collected."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ragpulse.deploy.cli", "scorer", *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=env,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            self.lines.append(raw.decode("utf-8", "replace").rstrip())

    def rows_written(self) -> int:
        for line in reversed(self.lines):
            m = re.search(r"; rows (\d+), ", line)
            if m:
                return int(m.group(1))
        return 0

    def stop(self, sig: int) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(60)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self._reader.join(5)

    def output(self) -> str:
        return "\n".join(self.lines[-30:])


def scorer_env(extra: dict[str, str]) -> dict[str, str]:
    """This environment without the developer's ``RAGPULSE_*`` settings, with short group
    sessions (a tansu group join in about a second), plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGPULSE_")}
    env["RAGPULSE_CONSUMER__SESSION_TIMEOUT_MS"] = "2000"
    env["RAGPULSE_CONSUMER__HEARTBEAT_INTERVAL_MS"] = "500"
    env.update(extra)
    return env


def scorer_args(bootstrap: str, topic: str, data: object, group: str) -> list[str]:
    """``ragpulse scorer`` flags: the local judge on METRICS, a short grace, frequent status."""
    return ["--kafka", bootstrap, "--topic", topic, "--clickhouse", f"chdb://{data}",
            "--group", group, "--judge", "local", "--metrics", METRICS, "--grace", "0.2",
            "--status-interval", "0.2"]


def test_sigkill_mid_stream_then_restart_loses_nothing_and_double_counts_nothing(
    kafka_broker_module, topic, tmp_path
):
    bootstrap = kafka_broker_module.bootstrap
    traces = make_traces(N_TRACES, seed=21, unscorable_every=10)
    produce(bootstrap, topic, otelcol_records(traces))
    total = end_offsets(bootstrap, topic)
    group = "kill-restart"
    data = tmp_path / "chdb"
    env = scorer_env(
        {
            # Commit seldom, write often: at the kill, rows are written whose offsets are not yet
            # committed, so the restart must replay them.
            "RAGPULSE_CONSUMER__COMMIT_INTERVAL_S": "1.5",
            "RAGPULSE_WRITER__FLUSH_INTERVAL_S": "0.1",
            "RAGPULSE_WRITER__BATCH_ROWS": "60",
            "RAGPULSE_EVALUATE__MAX_IN_FLIGHT": "16",
        }
    )
    args = scorer_args(bootstrap, topic, data, group)

    first = ScorerProcess(args, env)
    try:
        wait_for(
            lambda: first.rows_written() > 0 or first.proc.poll() is not None,
            timeout_s=120,
            what="the first rows",
        )
        assert first.proc.poll() is None, first.output()
    finally:
        first.stop(signal.SIGKILL)
    at_kill = committed(bootstrap, group)
    assert sum(at_kill.values()) < sum(total.values()), "killed too late: everything was committed"

    second = ScorerProcess(args, env)
    try:
        wait_for(
            lambda: committed(bootstrap, group) == total or second.proc.poll() is not None,
            timeout_s=180,
            what="the restarted scorer to commit every record",
        )
        assert second.proc.poll() is None, second.output()
    finally:
        rc = second.stop(signal.SIGTERM)
    assert rc == 0, second.output()

    metrics = METRICS.split(",")
    final = query_chdb_dir(
        data,
        "SELECT count(), uniqExact(trace_id, metric), uniqExact(trace_id) FROM rag.scores FINAL",
    )
    assert final == [[N_TRACES * len(metrics), N_TRACES * len(metrics), N_TRACES]]
    by_status = dict(
        query_chdb_dir(data, "SELECT status, count() FROM rag.scores FINAL GROUP BY status")
    )
    assert by_status.get("null") == (N_TRACES // 10) * len(metrics)  # the unscorable ones
    got_ids = {r[0] for r in query_chdb_dir(data, "SELECT DISTINCT trace_id FROM rag.scores")}
    assert got_ids == {t.trace_id for t in traces}
