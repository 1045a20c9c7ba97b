"""``ragpulse up``'s status line adds up after a root-less flood (issue 38).

Its "in progress" is the remainder of the traces assembled after every outcome; a flood trace
evicted with nothing to score is counted ``traces_expired_incomplete`` (issue 17), which was not
among the outcomes, so after a flood of 195,000 root-less traces the line showed 195,000 "in
progress" forever. Here the real assembler and prepare step take a root-less flood on a
hand-moved clock, and their counters go through ``status_line`` as ``up`` names them.
"""

from __future__ import annotations

import re
from types import SimpleNamespace
from typing import Any

from ragpulse.deploy.statusline import status_line
from ragpulse.scorer.pipeline.prepare import PrepareStep, build_preparer
from ragpulse.scorer.pipeline.trace_buffer import AssemblySettings, TraceAssembler
from ragpulse.scorer.traces.sampling import Sampler, SamplingSettings
from ragpulse.scorer.traces.span import Span
from tests.scorer.pipeline.spans import Clock
from tests.scorer.pipeline.test_assembly_flood import Recorder, complete_trace, flood_trace


def test_a_rootless_flood_is_an_outcome_not_in_progress() -> None:
    clock = Clock()
    assembler: TraceAssembler[Span] = TraceAssembler(
        AssemblySettings(grace_s=2.0, max_wait_s=30.0, max_traces=5_000,
                         max_incomplete_per_service=1_000), clock=clock)
    evaluate = Recorder(clock)
    prepare = PrepareStep(build_preparer(Sampler(SamplingSettings())), evaluate, Recorder(clock),
                          drop_evicted=False)
    for i in range(3_000):
        spans = flood_trace(i)
        assembler.add(spans[0].trace_id, spans)
    spans = complete_trace(0, "shop")
    assembler.add(spans[0].trace_id, spans)
    clock.t += 3.0  # past the complete trace's grace
    for trace in assembler.pop_ready():
        prepare.submit(trace)
    prepare.poll()
    stats: dict[str, Any] = {f"scorer.{k}": v for k, v in
                             {**assembler.counters, **prepare.stats()}.items()}
    stats["scorer.traces_scored"] = len(evaluate.got)  # what the evaluate step would count
    assert stats["scorer.traces_expired_incomplete"] == 2_000  # the flood's own bound evicted them
    line = status_line(stats, 10)
    assert "traces assembled 2001 = " in line, line
    assert "expired incomplete 2000" in line and "scored 1" in line, line
    assert "in progress 0;" in line, line


class _Scorer:
    """A running scorer as the status line reads it: ``stats()`` and ``labelled_counters()``."""

    def __init__(self, stats: dict[str, int], unscorable: dict[str, int]) -> None:
        self._stats, self._unscorable = stats, unscorable

    def stats(self) -> dict[str, int]:
        return dict(self._stats)

    def labelled_counters(self) -> dict[str, dict[str, int]]:
        return {"traces_unscorable": dict(self._unscorable)}


def test_up_and_scorer_say_the_same_of_the_same_stats(tmp_path) -> None:
    """Issue 43 item 3: `up` (its stack's stats) and `scorer` (its scorer's, through
    ``scorer_stats`` as the command reads them) print one line definition, so the same counters
    read the same after each one's head (spans received / records consumed)."""
    from ragpulse.deploy.embedded import Embedded, EmbeddedSettings
    from ragpulse.deploy.statusline import scorer_stats
    from ragpulse.scorer.pipeline.telemetry import declared

    # every declared counter and gauge, each its own value, so a counter read twice or under
    # another name shows
    stats = {name: i + 1 for i, name in enumerate((*declared("counter"), *declared("gauge")))}
    stats["traces_assembled"] = 10_000
    scorer = _Scorer(stats, {"no_contexts": 2, "no_answer": 1})
    stack = Embedded(EmbeddedSettings(data_dir=tmp_path, min_free_bytes=0))
    stack.scorer = scorer
    stack.collector = SimpleNamespace(stats=lambda: {"spans_received": 31, "spans_refused": 0,
                                                     "spans_failed": 0})
    up_line = status_line(stack.stats(), 12)
    scorer_line = status_line(scorer_stats(scorer), 12)
    assert up_line.startswith("[    12s] spans received 31, traces assembled 10000 = "), up_line
    head = f"[    12s] records consumed {stats['records_consumed']}, "
    assert scorer_line.startswith(head), scorer_line
    assert up_line.split(", ", 1)[1] == scorer_line.split(", ", 1)[1]
    assert "unscorable" in up_line and "(no_contexts 2, no_answer 1)" in up_line
    assert "paused (backpressure)" in up_line  # the gauge is non-zero here
    # the collector's refused and lost spans are errors of `up` too
    stack.collector = SimpleNamespace(stats=lambda: {"spans_received": 31, "spans_refused": 4,
                                                     "spans_failed": 1})
    errors = int(re.search(r"errors (\d+)", scorer_line).group(1))
    assert f"errors {errors + 5}," in status_line(stack.stats(), 12)


def test_errors_add_each_declared_error_counter_once() -> None:
    from ragpulse.collector.telemetry import COUNTERS as COLLECTOR
    from ragpulse.deploy.statusline import ERRORS
    from ragpulse.scorer.pipeline.telemetry import COUNTERS as SCORER

    declared = {**{f"collector.{k}": v for k, v in COLLECTOR.items()},
                **{f"scorer.{k}": v for k, v in SCORER.items()}}
    for name in ERRORS:
        assert name in declared, f"{name} is no declared counter"
        assert status_line({name: 1, "collector.spans_received": 0}, 0).endswith(", errors 1"), name
    # every scorer counter named *_errors is one of them
    assert {f"scorer.{k}" for k in SCORER if k.endswith("_errors")} <= set(ERRORS)
