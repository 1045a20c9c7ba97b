"""The parts of the end-to-end benchmark (bench/e2e.py) with logic of their own: percentiles,
the latency-growth slope and the keeps-up verdict, the /proc process-tree and RSS reading (on a
real child process), the status-line parser (against the real ``ragpulse up`` status line) and
where the docs section is written. The benchmark itself needs the whole stack and minutes of
traffic; it is run by hand (docs/benchmarks.md, "End-to-end latency")."""

from __future__ import annotations

import importlib.util
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _load_e2e():
    spec = importlib.util.spec_from_file_location("ragpulse_bench_e2e", REPO / "bench" / "e2e.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses resolve their module by name
    spec.loader.exec_module(mod)
    return mod


e2e = _load_e2e()


def test_percentile_interpolates_between_ranks_like_numpy() -> None:
    xs = [5.0, 1.0, 3.0, 2.0, 4.0]
    assert e2e.percentile(xs, 0) == 1.0
    assert e2e.percentile(xs, 50) == 3.0
    assert e2e.percentile(xs, 100) == 5.0
    assert e2e.percentile(xs, 90) == pytest.approx(4.6)  # numpy.percentile(xs, 90)
    assert e2e.percentile([2.0], 99) == 2.0
    assert math.isnan(e2e.percentile([], 50))
    with pytest.raises(ValueError):
        e2e.percentile(xs, 101)


def test_summarize() -> None:
    s = e2e.summarize([float(i) for i in range(1, 101)])
    assert s["count"] == 100
    assert s["p50"] == pytest.approx(50.5)
    assert s["p99"] == pytest.approx(99.01)
    assert s["max"] == 100.0 and s["mean"] == pytest.approx(50.5)
    assert math.isnan(e2e.summarize([])["p50"])


def test_slope() -> None:
    assert e2e.slope([0, 1, 2, 3], [1.0, 1.5, 2.0, 2.5]) == pytest.approx(0.5)
    assert e2e.slope([0, 1, 2], [3.0, 3.0, 3.0]) == 0.0
    assert math.isnan(e2e.slope([1], [1.0]))
    assert math.isnan(e2e.slope([2, 2], [1.0, 5.0]))
    with pytest.raises(ValueError):
        e2e.slope([0, 1], [1.0])


def _run(**over: object) -> dict:
    r = {"settings": {"duration_s": 120.0}, "latency_slope": 0.001, "missing": 0,
         "scored_visible": 900, "drain_s": 3.5, "latency_from_root_end_s": {"p99": 4.0}}
    r.update(over)
    return r


def test_keeps_up_verdict() -> None:
    assert e2e.keeps_up(_run())
    assert not e2e.keeps_up(_run(missing=1))  # a sampled trace never got its rows
    assert not e2e.keeps_up(_run(latency_slope=0.05))  # +6 s over the window: a backlog
    assert not e2e.keeps_up(_run(drain_s=9.0))  # a queue worked off after sending stopped
    assert not e2e.keeps_up(_run(scored_visible=0, latency_slope=math.nan))


def test_process_tree_and_rss_of_a_real_child() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        deadline = time.monotonic() + 10
        while child.pid not in e2e.process_tree(os.getpid()) and time.monotonic() < deadline:
            time.sleep(0.05)
        tree = e2e.process_tree(os.getpid())
        assert tree[0] == os.getpid() and child.pid in tree
        assert e2e.process_tree(child.pid) == [child.pid]
        assert e2e.rss_bytes(child.pid) > 1_000_000  # a Python interpreter: several MB
        assert e2e.cpu_seconds(os.getpid()) > 0.0
    finally:
        child.kill()
        child.wait()
    assert child.pid not in e2e.process_tree(os.getpid())
    assert e2e.rss_bytes(child.pid) == 0  # gone: 0, no exception
    assert e2e.process_tree(child.pid) == []


def test_parse_status_reads_the_real_status_line() -> None:
    from ragpulse.deploy.statusline import status_line

    line = status_line({"collector.spans_received": 3114, "scorer.traces_assembled": 1038,
                        "scorer.traces_sampled": 153, "scorer.traces_sampled_out": 885,
                        "scorer.traces_scored": 150, "scorer.traces_unscorable": 1,
                        "scorer.traces_unscorable.no_contexts": 1,
                        "scorer.rows_written": 750, "scorer.consumer_lag": 7,
                        "scorer.evaluate_errors": 2}, 21.4)
    assert e2e.parse_status(line) == {"t": 21, "spans": 3114, "assembled": 1038, "sampled": 153,
                                      "scored": 150, "rows": 750, "lag": 7, "errors": 2}
    assert e2e.parse_status("draining: scoring what was accepted ...") is None


def test_write_docs_inserts_after_scorer_overhead_then_replaces(tmp_path: Path) -> None:
    doc = tmp_path / "benchmarks.md"
    doc.write_text("# Benchmarks\n\n## Scorer overhead\n\nold\n\n## Cost per sample\n\ncost\n")
    e2e.write_docs([e2e.SECTION, "", "first", ""], doc)
    text = doc.read_text()
    assert text == ("# Benchmarks\n\n## Scorer overhead\n\nold\n\n## End-to-end latency\n\n"
                    "first\n\n## Cost per sample\n\ncost\n")
    e2e.write_docs([e2e.SECTION, "", "second", ""], doc)
    assert doc.read_text() == text.replace("first", "second")


def test_settings_validate() -> None:
    with pytest.raises(ValueError):
        e2e.BenchSettings(sampling_rate=0)
    with pytest.raises(ValueError):
        e2e.BenchSettings(duration_s=10, window_s=20)
    s = e2e.BenchSettings()
    with pytest.raises(ValueError):  # frozen
        s.rate = 10  # type: ignore[misc]
