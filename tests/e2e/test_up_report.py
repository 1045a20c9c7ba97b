"""What `ragpulse report` and `ragpulse status` show after a real `ragpulse up` ran and drained
(issue 42, items 6 and 7), on the real command in a child process and the real report and
status commands on its chDB directory afterwards.

* The collector's span counters reach ``pipeline_health`` under `up` too: the "Spans received /
  accepted / refused" panel was always empty there, since only the scorer wrote rows.
* "Assembled" has one definition: the report drew ``traces_assembled`` below ``traces_scored``
  after a drain (690 against 694), because the counter left out the traces the drain handed
  on, while the status line's "assembled" was the sum of five counters."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.test_up_operator import STATUS, Up
from tests.infra_chdb import query_chdb_dir
from tests.reliability.otlp_post import post_traces
from tests.security.corpus import rag_spans, request, trace_id

pytestmark = pytest.mark.slow

TRACES = 5
SPANS_PER_TRACE = 3  # rag_spans: the CHAIN root, a RETRIEVER and an LLM span


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ragpulse.deploy.cli", *args],
                          capture_output=True, text=True, timeout=300, check=False)


def _panel(html: str, key: str) -> str:
    m = re.search(rf'<section class="panel[^"]*" data-panel="{re.escape(key)}">(.*?)</section>',
                  html, re.S)
    assert m, key
    return m.group(1)


def _totals(panel: str) -> dict[str, int]:
    """The legend's series totals (``name<b class="total"> N</b>``)."""
    return {name: int(n) for name, n in
            re.findall(r'</i>([a-z_]+)<b class="total"> (\d+)</b>', panel)}


def test_the_report_after_a_drain_shows_the_collector_and_one_assembled(tmp_path: Path) -> None:
    data = tmp_path / "data"
    # A grace longer than the test takes to Ctrl-C (under max_wait_s, 30): every trace is still in the assembler at Ctrl-C, and the
    # drain hands all of them on (traces_drained), as in the run.
    up = Up(data, extra=("--judge", "fast", "--sampling-rate", "1", "--grace", "25"))
    try:
        up.read_until(r"Ctrl-C drains", 120)
        now = time.time_ns()
        tids = [trace_id(f"report-{i}") for i in range(TRACES)]
        status, _ = post_traces("127.0.0.1", up.ports["http"], request(
            *(rag_spans(t, start=now - (10 - i) * 10**9) for i, t in enumerate(tids)))
            .SerializeToString())
        assert status == 200, status
        up.read_until(rf"spans received {TRACES * SPANS_PER_TRACE}, traces assembled 0 ", 60)
        time.sleep(1.0)
        up.proc.send_signal(signal.SIGINT)
        assert up.proc.wait(timeout=120) == 0, up.read_rest()[-3000:]
        out = up.read_rest()
    finally:
        up.close()
    # The table: the collector's rows are there, and assembled covers what was scored.
    health = dict(query_chdb_dir(
        data / "chdb", "SELECT component || '.' || name, sum(value) FROM rag.pipeline_health "
                       "FINAL WHERE kind = 'counter' AND label = '' GROUP BY 1"))
    assert health.get("collector.spans_received") == TRACES * SPANS_PER_TRACE, health
    assert health["scorer.traces_assembled"] == health["scorer.traces_scored"] == TRACES, health

    # The report and status read them (through no facade: `up` has exited).
    report = tmp_path / "report.html"
    res = _cli("report", "--data-dir", str(data), "--since", "1h", "--out", str(report))
    assert res.returncode == 0, res.stdout + res.stderr
    html = report.read_text(encoding="utf-8")
    spans = _panel(html, "health_spans")
    got = _totals(spans)
    assert got.get("spans_received") == got.get("spans_accepted") == TRACES * SPANS_PER_TRACE, \
        spans
    assert not re.search(r"no data: [^<]*spans_received", spans), spans
    traces = _totals(_panel(html, "health_traces"))
    assert traces.get("traces_assembled") == traces.get("traces_scored") == TRACES, traces
    # `up`'s last status line counts them the same way.
    last = [m for m in STATUS.finditer(out)][-1]
    assert int(last.group(1)) == TRACES and f"scored {TRACES}" in last.group(2), last.group(0)
    st = _cli("status", "--data-dir", str(data), "--since", "1h")
    assert st.returncode in (0, 3), st.stdout + st.stderr
    assert re.search(rf"faithfulness\s*│\s*corpus-app\s*│\s*[\d.]+\s*│\s*{TRACES}\s*│", st.stdout), \
        st.stdout
