"""The assembler's late-span window shares its per-trace entries (fewer objects for the garbage
collector to walk) without changing what is late and what a revoke forgets."""

from __future__ import annotations

from ragpulse.scorer.pipeline import AssemblySettings, OffsetTracker, TraceAssembler

from .spans import Clock, S


def _emit_all(n: int, partitions: int) -> tuple[TraceAssembler[S], Clock, OffsetTracker]:
    clock = Clock()
    a: TraceAssembler[S] = TraceAssembler(AssemblySettings(grace_s=1.0), clock=clock)
    ot = OffsetTracker()
    for i in range(n):
        ref = ot.track("t", i % partitions, i)
        a.add(f"{i:032x}", [S(f"{i:032x}", "root")], ref)
    clock.t += 2
    assert len(a.pop_ready()) == n
    return a, clock, ot


def test_emitted_entries_are_shared_per_partition_set() -> None:
    a, _, _ = _emit_all(300, 3)
    entries = {id(e) for e in a._emitted.values()}
    assert len(a._emitted) == 300 and len(entries) == 3


def test_shared_entries_keep_late_detection_and_forget_per_partition() -> None:
    a, _, ot = _emit_all(30, 3)
    late = f"{4:032x}"  # partition 1
    assert a.add(late, [S(late, "child", "root")], ot.track("t", 1, 99)) is False
    assert a.counters["spans_late"] == 1
    a.forget([("t", 1)])
    # Partition 1's traces are forgotten (they will be read again); the others' stay late.
    assert a.add(late, [S(late, "root")], ot.track("t", 1, 100)) is True
    other = f"{3:032x}"  # partition 0
    assert a.add(other, [S(other, "child", "root")], ot.track("t", 0, 101)) is False
    assert all(parts != frozenset({("t", 1)}) for _, parts in a._emitted.values())


def test_rescore_keeps_each_traces_own_spans() -> None:
    clock = Clock()
    a: TraceAssembler[S] = TraceAssembler(
        AssemblySettings(grace_s=1.0, late_spans="rescore"), clock=clock
    )
    ot = OffsetTracker()
    for i in range(3):
        a.add(f"{i:032x}", [S(f"{i:032x}", "root")], ot.track("t", 0, i))
    clock.t += 2
    a.pop_ready()
    kept = [spans for spans, _ in a._emitted.values()]
    assert [s[0].trace_id for s in kept] == [f"{i:032x}" for i in range(3)]
