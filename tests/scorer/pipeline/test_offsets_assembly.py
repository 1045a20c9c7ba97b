"""Offset low watermarks and trace assembly, with a fake clock (no broker, no sleeps)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ragpulse.scorer.pipeline import AssemblySettings, OffsetTracker, TraceAssembler

from .spans import Clock, S


def child(t: str, n: int = 1) -> S:
    return S(t, f"c{n}", "root")


def root(t: str) -> S:
    return S(t, "root", None)


# -- offsets ---------------------------------------------------------------------------------


def test_low_watermark_waits_for_the_oldest_unfinished_record():
    ot = OffsetTracker()
    refs = [ot.track("t", 0, o) for o in range(5)]
    for r in refs:
        ot.hold(r)
        ot.seal(r)
    assert ot.committable() == {}  # nothing is done: the resume position is not committed again
    ot.release([refs[1], refs[2]])  # later records done, the first is not
    assert ot.committable() == {}
    ot.release([refs[0]])
    assert ot.committable() == {("t", 0): 3}
    ot.mark_committed({("t", 0): 3})
    assert ot.committable() == {}
    ot.release([refs[3], refs[4]])
    assert ot.committable() == {("t", 0): 5}


def test_a_record_with_many_traces_is_done_when_all_are_released():
    ot = OffsetTracker()
    r = ot.track("t", 1, 10)
    ot.hold(r, 3)
    ot.seal(r)
    ot.release([r])
    ot.release([r])
    assert ot.committable() == {}
    ot.release([r])
    assert ot.committable() == {("t", 1): 11}


def test_an_unsealed_record_is_never_done():
    ot = OffsetTracker()
    r = ot.track("t", 0, 0)
    assert ot.committable() == {}
    ot.seal(r)  # no trace held it (empty record): done
    assert ot.committable() == {("t", 0): 1}


def test_references_from_a_revoked_assignment_do_not_touch_the_new_one():
    ot = OffsetTracker()
    old = ot.track("t", 0, 5)
    ot.hold(old)
    ot.seal(old)
    ot.revoke("t", 0)
    ot.assign("t", 0)
    new = ot.track("t", 0, 5)
    ot.hold(new)
    ot.seal(new)
    ot.release([old])  # the old trace finished late
    assert ot.committable() == {}
    ot.release([new])
    assert ot.committable() == {("t", 0): 6}


def test_partitions_are_independent():
    ot = OffsetTracker()
    a = ot.track("t", 0, 7)
    b = ot.track("t", 1, 3)
    for r in (a, b):
        ot.hold(r)
        ot.seal(r)
    ot.release([b])
    assert ot.committable() == {("t", 1): 4}


# -- assembly --------------------------------------------------------------------------------


def make(clock: Clock, **kw) -> TraceAssembler:
    return TraceAssembler(
        AssemblySettings(**{"grace_s": 2.0, "max_wait_s": 10.0, **kw}), clock=clock
    )


def test_complete_after_root_plus_grace_and_stragglers_join():
    clock = Clock()
    a = make(clock)
    ot = OffsetTracker()
    r1, r2 = ot.track("t", 0, 0), ot.track("t", 0, 1)
    assert a.add("a" * 32, [child("a" * 32)], r1)
    assert a.add("a" * 32, [root("a" * 32)], r2)
    clock.t += 1.9
    assert a.pop_ready() == []
    assert a.add("a" * 32, [child("a" * 32, 2)], r2) is False  # same record: held once
    clock.t += 0.2
    (t,) = a.pop_ready()
    assert t.cause == "complete" and t.has_root and len(t.spans) == 3
    assert t.refs == [r1, r2]
    assert a.counters["traces_assembled"] == 1 and a.traces_buffered == 0 and a.spans_buffered == 0


def test_without_root_a_trace_times_out_after_max_wait():
    clock = Clock()
    a = make(clock)
    a.add("b" * 32, [child("b" * 32)])
    clock.t += 9.9
    assert a.pop_ready() == []
    clock.t += 0.2
    (t,) = a.pop_ready()
    assert t.cause == "timeout" and not t.has_root
    assert a.counters["traces_timed_out"] == 1


def test_late_spans_are_counted_and_ignored_by_default():
    clock = Clock()
    a = make(clock)
    tid = "c" * 32
    a.add(tid, [root(tid)])
    clock.t += 3
    assert len(a.pop_ready()) == 1
    assert a.add(tid, [child(tid), child(tid, 2)], object()) is False  # type: ignore[arg-type]
    assert a.counters["spans_late"] == 2
    assert a.traces_buffered == 0


def test_late_spans_reopen_the_trace_with_rescore():
    clock = Clock()
    a = make(clock, late_spans="rescore")
    tid = "d" * 32
    a.add(tid, [root(tid)])
    clock.t += 3
    (first,) = a.pop_ready()
    assert a.add(tid, [child(tid)], None) is False
    clock.t += 1
    assert a.pop_ready() == []  # the reopened trace waits for a new grace period
    clock.t += 1.5
    (again,) = a.pop_ready()
    assert again.cause == "rescore" and len(again.spans) == 2 and again.has_root
    assert a.counters["traces_rescored"] == 1 and a.counters["spans_late"] == 1


def test_eviction_by_trace_count_and_by_span_count_is_counted_oldest_first():
    clock = Clock()
    a = make(clock, max_traces=2, max_spans=100)
    for i in range(3):
        a.add(f"{i:032x}", [child(f"{i:032x}")])
    (ev,) = a.pop_ready()
    assert ev.cause == "evicted" and ev.trace_id == f"{0:032x}"
    b = make(clock, max_traces=100, max_spans=3)
    b.add("e" * 32, [child("e" * 32, i) for i in range(2)])
    b.add("f" * 32, [child("f" * 32, i) for i in range(2)])
    (ev,) = b.pop_ready()
    assert ev.trace_id == "e" * 32 and b.spans_buffered == 2
    assert a.counters["traces_evicted"] == 1 and b.counters["traces_evicted"] == 1


def test_every_trace_handed_on_counts_as_assembled_whatever_the_cause():
    """Issue 42, item 7: `traces_assembled` counted complete traces only, so after a drain the
    report drew fewer traces assembled than scored (690 against 694), while `up`'s status line
    summed five counters. Now it counts every emission; the cause counters are parts of it."""
    clock = Clock()
    a = make(clock, max_traces=2, late_spans="rescore")
    a.add("a" * 32, [root("a" * 32)])
    clock.t += 3
    emitted = a.pop_ready()  # complete
    a.add("a" * 32, [child("a" * 32)])  # late: reopened, re-scored after a new grace
    a.add("b" * 32, [child("b" * 32)])
    a.add("c" * 32, [child("c" * 32)])  # three buffered: the oldest without a root is evicted
    clock.t += 3
    emitted += a.pop_ready()  # evicted b, re-scored a
    clock.t += 8
    emitted += a.pop_ready()  # c has had no root for max_wait_s: timed out
    a.add("e" * 32, [root("e" * 32)])
    emitted += a.drain()  # shutdown before e's grace: drained
    c = a.counters
    assert sorted(t.cause for t in emitted) == ["complete", "drain", "evicted", "rescore",
                                                "timeout"], emitted
    assert c["traces_assembled"] == len(emitted) == 5, c
    assert (c["traces_evicted"], c["traces_rescored"], c["traces_timed_out"],
            c["traces_drained"]) == (1, 1, 1, 1), c


def test_drain_emits_everything_and_forget_removes_revoked_partitions():
    clock = Clock()
    a = make(clock)
    ot = OffsetTracker()
    r0, r1 = ot.track("t", 0, 0), ot.track("t", 1, 0)
    a.add("1" * 32, [child("1" * 32)], r0)
    a.add("2" * 32, [child("2" * 32)], r1)
    gone = a.forget([("t", 0)])
    assert [t.trace_id for t in gone] == ["1" * 32]
    drained = a.drain()
    assert [t.trace_id for t in drained] == ["2" * 32] and drained[0].cause == "drain"
    assert a.traces_buffered == 0 and a.spans_buffered == 0


def test_settings_validate():
    with pytest.raises(ValidationError, match="grace_s"):
        AssemblySettings(grace_s=30, max_wait_s=10)
    with pytest.raises(ValidationError):
        AssemblySettings(max_traces=0)


def test_forget_also_forgets_emitted_traces_of_revoked_partitions():
    # After a revoke, records of the partition are read again; their traces must assemble anew,
    # not be mistaken for late spans of the traces emitted before the revoke.
    clock = Clock()
    a = make(clock)
    ot = OffsetTracker()
    r0, r1 = ot.track("t", 0, 0), ot.track("t", 1, 0)
    a.add("1" * 32, [root("1" * 32)], r0)
    a.add("2" * 32, [root("2" * 32)], r1)
    clock.t += 3
    assert len(a.pop_ready()) == 2
    a.forget([("t", 0)])
    assert a.add("1" * 32, [root("1" * 32)], r0) is True  # assembles again
    assert a.add("2" * 32, [root("2" * 32)], r1) is False  # still late: partition 1 was kept
    assert a.counters["spans_late"] == 1
