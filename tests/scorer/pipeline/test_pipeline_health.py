"""``pipeline_health`` rows of one ``ragpulse scorer`` process come from one writer.

Every flush of the writer is one insert whose rows share a ``written_at``; a flush writes every
counter and gauge the scorer declares (``ragpulse.scorer.pipeline.telemetry``), plus the counters
split by reason. A second writer in the process (say, one the health endpoint starts) would write
its own subset of names under the same keys, and a minute would show whichever flushed last; a
flush missing a declared name reveals it. The scorer runs as a real subprocess (the CLI wires the health endpoint) on a real tansu
broker, with its own chDB directory, read afterwards by another subprocess.
"""

from __future__ import annotations

import signal

import pytest

from testkit.traffic import make_traces, otelcol_records
from tests.infra_chdb import query_chdb_dir

from .conftest import produce, wait_for
from .test_kill_restart import ScorerProcess, scorer_args, scorer_env

pytestmark = pytest.mark.slow


def test_one_scorer_process_writes_pipeline_health_rows_once(kafka_broker_module, topic, tmp_path):
    traces = make_traces(10, seed=41, unscorable_every=5)
    produce(kafka_broker_module.bootstrap, topic, otelcol_records(traces))
    data = tmp_path / "chdb"
    env = scorer_env(
        {
            "RAGPULSE_INSTANCE": "scorer-under-test",
            # Flush often: several flushes land before the rows are read.
            "RAGPULSE_PIPELINE_HEALTH_INTERVAL_S": "0.3",
        }
    )
    args = scorer_args(kafka_broker_module.bootstrap, topic, data, "health-rows")
    proc = ScorerProcess(args, env)
    try:
        wait_for(lambda: proc.rows_written() == 30 or proc.proc.poll() is not None,
                 timeout_s=120, what="every trace written")
        assert proc.proc.poll() is None, proc.output()
    finally:
        rc = proc.stop(signal.SIGTERM)
    assert rc == 0, proc.output()

    rows = query_chdb_dir(
        data,
        "SELECT toString(written_at), name, label FROM rag.pipeline_health "
        "WHERE component = 'scorer' AND instance = 'scorer-under-test'",
    )
    flushes: dict[str, set[tuple[str, str]]] = {}
    for written_at, name, label in rows:
        flushes.setdefault(written_at, set()).add((name, label))
    assert flushes, "no pipeline_health rows"
    # Names every flush writes, whichever writer: a counter, a gauge, the writer's counters.
    always = {("records_consumed", ""), ("consumer_lag", ""), ("writer_rows_written", "")}
    partial = {at: sorted(always - names) for at, names in flushes.items() if always - names}
    assert not partial, f"flushes missing declared names (a second writer): {partial}"
    # The breakdown by reason is written by the same flushes as the totals.
    last = flushes[max(flushes)]
    assert ("traces_unscorable", "no_contexts") in last and ("traces_unscorable", "") in last
