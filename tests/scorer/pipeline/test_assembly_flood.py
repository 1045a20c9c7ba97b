"""Issue 17: a flood of traces whose root never arrives (10,000 a second for 20 s).

Before: the flood (10,000 a second for 20 s; here 6 s) filled the assembly buffer, so complete traces were evicted (or waited behind
the flood), and every flood trace became a null row per metric (about a million rows). Now the
flood evicts its own traces (``max_incomplete_per_service``, and root-less traces first under
the global bound), a complete trace leaves when its grace period has passed, and a flood trace
with nothing to score is counted (``traces_expired_incomplete``), never written.

Everything runs on a hand-moved clock: the assertions are about what was emitted when in
simulated time, never about how fast this machine is.
"""

from __future__ import annotations

from typing import Any

from ragpulse.scorer.pipeline.prepare import PrepareStep, build_preparer
from ragpulse.scorer.pipeline.steps import MessageRejected, Step
from ragpulse.scorer.pipeline.trace_buffer import AssembledTrace, AssemblySettings, TraceAssembler
from ragpulse.scorer.traces.sampling import Sampler, SamplingSettings
from ragpulse.scorer.traces.span import Span

from .spans import Clock

RATE = 10_000  # flood traces a second
TICK_S = 0.01  # the consumer's poll interval in simulated time
FLOOD_S = 6.0  # 60,000 flood traces: the issue flooded for 20 s; 6 keep the test short
GRACE_S = 2.0


def _resource(service: str) -> dict[str, Any]:
    return {"service.name": service}


def flood_trace(i: int) -> list[Span]:
    """An LLM call whose root (in another, unexported service) never arrives: nothing to score."""
    return [Span(f"f{i:031x}", f"{i:016x}", "ffffffffffffffff", "llm", attributes={
        "openinference.span.kind": "LLM", "llm.model_name": "gpt-4o-mini",
    }, resource=_resource("flood"))]


def complete_trace(i: int, service: str) -> list[Span]:
    """A RAG query with its root: question, contexts and answer."""
    tid = f"c{i:031x}"
    res = _resource(service)
    root = Span(tid, f"{i:015x}a", None, "rag.query", attributes={
        "openinference.span.kind": "CHAIN", "input.value": f"question {i}?",
        "output.value": f"answer {i}",
    }, resource=res)
    retrieve = Span(tid, f"{i:015x}b", root.span_id, "retrieve", attributes={
        "openinference.span.kind": "RETRIEVER", "input.value": f"question {i}?",
        "retrieval.documents.0.document.content": f"document {i}",
    }, resource=res)
    return [retrieve, root]


class Recorder(Step[Any]):
    """The next step: takes everything, remembers what and when."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.got: list[tuple[float, Any]] = []

    def submit(self, message: Any) -> None:
        self.got.append((self.clock.t, message))


def _settings() -> AssemblySettings:
    return AssemblySettings(grace_s=GRACE_S, max_wait_s=30.0, max_traces=5_000,
                            max_incomplete_per_service=1_000)


def _run_flood(assembler: TraceAssembler[Span], clock: Clock, hand_on: Any) -> dict[str, float]:
    """Feed the flood and, once a simulated second, a complete trace of another service and one
    of the flooding service; poll every tick. Returns complete trace id -> time it was sent."""
    sent: dict[str, float] = {}
    start = clock.t
    per_tick = int(RATE * TICK_S)
    n = 0
    tick = 0
    while clock.t - start < FLOOD_S + GRACE_S + 1:
        if clock.t - start < FLOOD_S:
            for _ in range(per_tick):
                spans = flood_trace(n)
                assembler.add(spans[0].trace_id, spans)
                n += 1
            if tick % 100 == 50:  # every simulated second, mid-flood
                for service in ("shop", "flood"):
                    spans = complete_trace(tick * 2 + (service == "flood"), service)
                    assembler.add(spans[0].trace_id, spans)
                    sent[spans[0].trace_id] = clock.t
        hand_on(assembler.pop_ready())
        assert assembler.traces_buffered <= 1_000 + 2 * (GRACE_S + 1)  # the flood's bound + rooted
        tick += 1
        clock.t = start + tick * TICK_S
    assert n == RATE * FLOOD_S
    return sent


def test_complete_traces_leave_at_their_grace_while_a_rootless_flood_goes_on() -> None:
    clock = Clock()
    assembler: TraceAssembler[Span] = TraceAssembler(_settings(), clock=clock)
    emitted: dict[str, tuple[float, AssembledTrace[Span]]] = {}

    def hand_on(traces: list[AssembledTrace[Span]]) -> None:
        for t in traces:
            emitted[t.trace_id] = (clock.t, t)

    sent = _run_flood(assembler, clock, hand_on)
    assert len(sent) == 2 * int(FLOOD_S)
    for trace_id, at in sent.items():
        when, trace = emitted[trace_id]
        assert trace.cause == "complete" and len(trace.spans) == 2, trace_id
        # emitted at the first poll once the grace period has passed, not later
        assert at + GRACE_S <= when <= at + GRACE_S + TICK_S + 1e-9, (trace_id, when - at)
    flood = [t for _, t in emitted.values() if t.trace_id.startswith("f")]
    assert all(t.cause == "evicted" and not t.has_root for t in flood)
    assert len(flood) == RATE * FLOOD_S - assembler.traces_buffered
    assert assembler.counters["traces_evicted"] == len(flood)
    # every trace handed on counts as assembled, the evicted ones too
    assert assembler.counters["traces_assembled"] == len(sent) + len(flood)


def test_a_rootless_flood_writes_no_rows_and_delays_no_complete_trace() -> None:
    clock = Clock()
    assembler: TraceAssembler[Span] = TraceAssembler(_settings(), clock=clock)
    evaluate, done = Recorder(clock), Recorder(clock)
    prepare = PrepareStep(
        build_preparer(Sampler(SamplingSettings())), evaluate, done,
        drop_evicted=False,
    )

    def hand_on(traces: list[AssembledTrace[Span]]) -> None:
        for t in traces:
            prepare.submit(t)
        try:
            prepare.poll()
        except MessageRejected:  # the recorder takes everything: never
            raise AssertionError("prepare held traces back") from None

    sent = _run_flood(assembler, clock, hand_on)
    # Only the complete traces reach evaluate (where rows are made), each at its grace.
    scored = {m.work.trace_id: at for at, m in evaluate.got}
    assert set(scored) == set(sent)
    assert all(sent[t] + GRACE_S <= at <= sent[t] + GRACE_S + TICK_S + 1e-9 for t, at in scored.items())
    assert all(m.decision.sample is not None for _, m in evaluate.got)
    # The flood: counted, its records released straight to commit, not one row.
    flood = RATE * FLOOD_S - assembler.traces_buffered
    assert prepare.stats()["traces_expired_incomplete"] == flood
    assert len(done.got) == flood
