"""Throughput of decode, extract and sample on a mixed-convention record (not a test: no timing
is ever asserted). Run: ``.venv/bin/python -m tests.scorer.traces.perf [traces]``.

Reports CPU time (``time.process_time``), not wall time: on a shared box the wall clock measures
the neighbours.
"""

from __future__ import annotations

import sys
import time

from ragpulse.scorer.traces import Sampler, SamplingSettings, SpanDecoder, extract, group_by_trace

from .conventions import WRITERS
from .sdk import Recorder, to_record


def main(n_traces: int = 170, rounds: int = 40) -> None:
    names = sorted(WRITERS)
    rec = Recorder()
    for i in range(n_traces):
        WRITERS[names[i % len(names)]](rec)
    spans = rec.finished()
    record = to_record(spans)
    print(f"record: {n_traces} traces, {len(spans)} spans, {len(record) / len(spans):.0f} B/span")

    decoder = SpanDecoder()
    t = time.process_time()
    for _ in range(rounds):
        decoded = decoder.decode(record)
    dt = time.process_time() - t
    print(f"decode:                       {rounds * len(spans) / dt:10,.0f} spans/s (CPU)")

    traces = list(group_by_trace(decoded).values())
    sampler = Sampler(SamplingSettings(default_rate=0.5))
    t = time.process_time()
    for _ in range(rounds):
        for trace in traces:
            sampler.decide(extract(trace), trace)
    dt = time.process_time() - t
    print(f"extract + sample:             {rounds * len(traces) / dt:10,.0f} traces/s (CPU)")

    t = time.process_time()
    for _ in range(rounds):
        for trace in group_by_trace(decoder.decode(record)).values():
            sampler.decide(extract(trace), trace)
    dt = time.process_time() - t
    print(f"decode + group + extract + sample: {rounds * len(traces) / dt:5,.0f} traces/s (CPU)")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:2]))
