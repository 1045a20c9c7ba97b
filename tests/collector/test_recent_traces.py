"""The RAG filter's memory of trace ids seen with a RAG span (late root spans are kept when their
trace is remembered): the last ``remember_traces`` ids always, bounded memory, thread-safe."""

from __future__ import annotations

import threading

from ragpulse.collector.ingest import _RecentTraces


def _ids(start: int, n: int) -> list[bytes]:
    return [b"%032x" % i for i in range(start, start + n)]


def test_the_last_capacity_ids_are_always_remembered_and_at_most_twice_held() -> None:
    recent = _RecentTraces(100)
    seen: list[bytes] = []
    for start in range(0, 5_000, 7):  # requests of 7 RAG traces
        batch = _ids(start, 7)
        recent.remember_and_match(batch, [])
        seen += batch
        assert all(key in recent for key in seen[-100:])
        assert len(recent) <= 2 * 100 + 7
    assert _ids(0, 1)[0] not in recent  # long forgotten
    assert recent.remember_and_match([], seen[-100:] + _ids(10_000, 5)) == set(seen[-100:])


def test_a_trace_seen_again_is_remembered_anew() -> None:
    recent = _RecentTraces(10)
    recent.remember_and_match(_ids(0, 1), [])
    for start in range(1, 200, 5):
        recent.remember_and_match(_ids(start, 5) + _ids(0, 1), [])  # trace 0 keeps coming back
    assert _ids(0, 1)[0] in recent


def test_zero_capacity_remembers_nothing() -> None:
    recent = _RecentTraces(0)
    assert recent.remember_and_match(_ids(0, 3), _ids(0, 3)) == set()
    assert len(recent) == 0


def test_concurrent_requests_lose_no_recent_id() -> None:
    recent = _RecentTraces(10_000)

    def feed(offset: int) -> None:
        for start in range(offset, offset + 2_000, 20):
            recent.remember_and_match(_ids(start, 20), [])

    threads = [threading.Thread(target=feed, args=(i * 100_000,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # 8,000 ids in all, under the capacity: every one is remembered.
    assert all(key in recent for i in range(4) for key in _ids(i * 100_000, 2_000))
