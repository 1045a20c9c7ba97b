"""``ragpulse up``'s status line adds up after a root-less flood (issue 38).

Its "in progress" is the remainder of the traces assembled after every outcome; a flood trace
evicted with nothing to score is counted ``traces_expired_incomplete`` (issue 17), which was not
among the outcomes, so after a flood of 195,000 root-less traces the line showed 195,000 "in
progress" forever. Here the real assembler and prepare step take a root-less flood on a
hand-moved clock, and their counters go through ``status_line`` as ``up`` names them.
"""

from __future__ import annotations

from typing import Any

from ragpulse.deploy.embedded import status_line
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
