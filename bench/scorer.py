"""Scorer overhead without the judge: decode, assemble, extract, sample, evaluate (free judge),
write to chDB and commit, in traces per second, on a real tansu broker and real chDB.

    .venv/bin/python bench/scorer.py --traces 20000 --format otelcol
    .venv/bin/python bench/scorer.py --traces 20000 --format rotel --write-docs

Traces are pre-produced (3 spans each, OpenInference, ~1.3 KB per trace) so only the scorer is
timed: from its first consumed record to the moment every trace's rows were acknowledged by
chDB and every offset committed. The judge is a real ``Judge`` that answers every fact at once
(no model, no cost), so what is measured is the pipeline itself; the metric arithmetic and the
five score rows per trace are included. Target (issue 3): >= 2,000 traces/s.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.scorer.pipeline.traffic builds the records

from ragpulse.collector.kafka import KafkaSettings, ensure_topic
from ragpulse.deploy.broker import TansuBroker
from ragpulse.scorer import Fact
from ragpulse.scorer.judges.base import Needs
from ragpulse.scorer.model import Finding, Sample
from ragpulse.scorer.pipeline import ScorerSettings, build_scorer
from ragpulse.scorer.store import (
    SchemaSettings,
    ScoreWriter,
    WriterSettings,
    init_schema,
    open_store,
)

from tests.scorer.pipeline.traffic import make_traces, otelcol_records, rotel_records

SECTION = "## Scorer overhead"


class FreeJudge:
    """Answers every fact instantly with fixed evidence: the judge costs nothing."""

    name = "free"
    model = "none"

    async def gather(self, sample: Sample, needs: Needs) -> dict[Fact, Finding]:
        n = len(sample.contexts)
        values: dict[Fact, Any] = {
            Fact.STATEMENTS: ["s1", "s2"],
            Fact.STATEMENT_SUPPORT: [1, 0],
            Fact.QUESTION_SIMILARITY: {
                "questions": ["q"],
                "similarities": [0.9],
                "noncommittal": False,
            },
            Fact.CONTEXT_USEFUL: [1] * n,
            Fact.CONTEXT_USED: [1] * n,
            Fact.CONTEXT_RATINGS: [2, 1],
        }
        return {f: Finding(f, values[f]) for f in needs.facts if f in values}

    async def aclose(self) -> None:
        return None


def produce(bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes]]) -> float:
    from kafka import KafkaProducer

    p = KafkaProducer(
        bootstrap_servers=bootstrap,
        compression_type="lz4",
        acks="all",
        linger_ms=20,
        batch_size=512 * 1024,
        max_request_size=16 * 1024 * 1024,
    )
    t0 = time.perf_counter()
    for i, (key, value) in enumerate(records):
        p.send(topic, key=key, value=value, partition=None if key else i % 3)
    p.flush(120)
    p.close(5)
    return time.perf_counter() - t0


def run(n: int, fmt: str, per_record: int) -> dict[str, Any]:
    traces = make_traces(n, seed=int(time.time()) & 0xFFFF)
    records = otelcol_records(traces) if fmt == "otelcol" else rotel_records(traces, per_record)
    size = sum(len(v) for _, v in records)
    with TansuBroker() as broker, tempfile.TemporaryDirectory() as tmp:
        topic = f"bench_{uuid.uuid4().hex[:6]}"
        kafka = KafkaSettings(
            bootstrap_servers=broker.bootstrap, topic=topic, dlq_topic=f"{topic}.dlq"
        )
        ensure_topic(kafka, 3)
        produce_s = produce(broker.bootstrap, topic, records)
        client = open_store(f"chdb://{tmp}/chdb")
        init_schema(client, SchemaSettings(database="rag"))
        writer = ScoreWriter(
            client,
            "rag",
            WriterSettings(batch_rows=20_000, flush_interval_s=0.2, max_pending_rows=200_000),
        )
        writer.start()
        settings = ScorerSettings(
            kafka=kafka,
            database="rag",
            consumer={
                "group_id": "bench",
                "session_timeout_ms": 6000,
                "heartbeat_interval_ms": 2000,
                "max_poll_records": 2000,
            },
            assembly={"grace_s": 0.2, "max_wait_s": 10.0},
            evaluate={"max_in_flight": 4096},
        )
        svc = build_scorer(settings, judge=FreeJudge(), writer=writer)
        cpu0 = time.process_time()
        svc.start()
        t_first = None
        while True:
            st = svc.stats()
            now = time.perf_counter()
            if t_first is None and st["records_consumed"] > 0:
                t_first = now
            if st["traces_done"] >= n and st["traces_in_flight"] == 0:
                break
            time.sleep(0.02)
        t_done = time.perf_counter()
        cpu = time.process_time() - cpu0
        svc.shutdown()
        writer.shutdown(30)
        st = svc.stats()
        rows = client.query("SELECT count() FROM rag.scores").result_rows[0][0]
        client.close()
    assert t_first is not None
    elapsed = t_done - t_first
    return {
        "format": fmt,
        "traces": n,
        "records": len(records),
        "bytes": size,
        "elapsed_s": elapsed,
        "traces_per_s": n / elapsed,
        "rows": rows,
        "rows_written_stat": st["rows_written"],
        "cpu_s": cpu,
        "produce_s": produce_s,
        "grace_s": settings.assembly.grace_s,
    }


def stage_breakdown(n: int = 3000) -> dict[str, float]:
    """CPU microseconds per trace of each stage, run in-line on one thread (no Kafka, no chDB):
    where the scorer's CPU goes. Process CPU time, so other processes' load matters less."""
    import asyncio

    from ragpulse.scorer.evaluator import Evaluator
    from ragpulse.scorer.pipeline.assembly import AssembledTrace, TraceAssembler
    from ragpulse.scorer.pipeline.prepare import build_preparer
    from ragpulse.scorer.store.rows import columns_of, rows_from_scores
    from ragpulse.scorer.traces.decode import SpanDecoder, group_by_trace
    from ragpulse.scorer.traces.sampling import Sampler

    records = otelcol_records(make_traces(n, seed=99))
    decoder, evaluator = SpanDecoder(), Evaluator(FreeJudge())
    prepare = build_preparer(Sampler())
    assembler: TraceAssembler[Any] = TraceAssembler()
    out: dict[str, float] = {}

    def timed(name: str, fn: Any) -> Any:
        t0 = time.process_time()
        result = fn()
        out[name] = (time.process_time() - t0) / n * 1e6
        return result

    groups = timed(
        "decode", lambda: [g for _, v in records for g in group_by_trace(decoder.decode(v)).items()]
    )
    timed(
        "assemble", lambda: [assembler.add(t, spans) for t, spans in groups] and assembler.drain()
    )
    preps = timed(
        "extract + sample",
        lambda: [prepare(AssembledTrace(t, spans, [], "complete", True)) for t, spans in groups],
    )

    async def evaluate_all() -> list[Any]:
        return [await evaluator.evaluate(p.sample) for p in preps]

    results = timed("evaluate (free judge, 5 metrics)", lambda: asyncio.run(evaluate_all()))
    rows = timed(
        "score rows",
        lambda: [
            r
            for p, res in zip(preps, results, strict=True)
            for r in rows_from_scores(res.scores, p.meta)
        ],
    )
    timed("columns for insert", lambda: columns_of(rows))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--traces", type=int, default=20_000)
    ap.add_argument("--format", choices=["otelcol", "rotel", "both"], default="both")
    ap.add_argument("--per-record", type=int, default=100, help="traces per rotel record")
    ap.add_argument(
        "--write-docs", action="store_true", help=f"replace '{SECTION}' in docs/benchmarks.md"
    )
    a = ap.parse_args()
    load = os.getloadavg()
    results = [
        run(a.traces, f, a.per_record)
        for f in (["otelcol", "rotel"] if a.format == "both" else [a.format])
    ]
    load_after = os.getloadavg()
    stages = stage_breakdown()
    for name, us in stages.items():
        print(f"  {name:36s} {us:7.0f} us CPU per trace")
    for r in results:
        print(
            f"{r['format']:8s} {r['traces']} traces in {r['records']} records "
            f"({r['bytes'] / 1e6:.1f} MB): {r['elapsed_s']:.2f} s -> "
            f"{r['traces_per_s']:,.0f} traces/s; {r['rows']} rows in chDB; "
            f"process CPU {r['cpu_s']:.1f} s"
        )
    print(f"load average before {load[0]:.2f}, after {load_after[0]:.2f} on {os.cpu_count()} cores")
    if a.write_docs:
        write_docs(results, a, load, load_after, stages)


def write_docs(
    results: list[dict[str, Any]],
    a: argparse.Namespace,
    load: tuple[float, ...],
    load_after: tuple[float, ...],
    stages: dict[str, float],
) -> None:
    cmd = f".venv/bin/python bench/scorer.py --traces {a.traces} --format {a.format}"
    lines = [
        SECTION,
        "",
        "Scorer overhead without the judge (issue 3 target: >= 2,000 traces/s): decode, assemble, "
        "extract, sample, evaluate with a judge that answers instantly (five default metrics, so "
        "five score rows per trace), write to chDB, commit offsets. Real tansu broker, real chDB, "
        "records pre-produced; timed from the first consumed record to the last acknowledged "
        "row.",
        "",
        f"Command: `{cmd}` ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"{platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} cores).",
        "",
        "| records | traces | records on topic | time (s) | traces/s | rows in chDB "
        "| process CPU (s) | traces per CPU-second |",
        "|---|---|---|---|---|---|---|---|",
    ]
    best = max(r["traces"] / r["cpu_s"] for r in results)
    fastest = max(r["traces_per_s"] for r in results)
    verdict = (
        f"{'meets' if fastest >= 2000 else 'does NOT meet'} the 2,000 traces/s target on this "
        f"run ({fastest:,.0f} traces/s). The pipeline is CPU-bound at about {1e6 / best:,.0f} us "
        f"of CPU per trace, so one free core would carry at most about {best:,.0f} traces/s. Its "
        "Python stages share one GIL, so a second core helps only through a second `ragpulse "
        "scorer` in the same consumer group (partitions split between them), which needs a "
        "ClickHouse server or the HTTP facade because a chDB directory has one owner. Most of the "
        "CPU is in extraction, the metric engine and row building (table below), not in the "
        "consumer, assembly or commit bookkeeping."
    )
    for r in results:
        shape = (
            "otelcol: one keyed record per trace"
            if r["format"] == "otelcol"
            else f"rotel: {a.per_record} traces per unkeyed record"
        )
        lines.append(
            f"| {shape} | {r['traces']:,} | {r['records']:,} | {r['elapsed_s']:.2f} | "
            f"**{r['traces_per_s']:,.0f}** | {r['rows']:,} | {r['cpu_s']:.1f} | "
            f"{r['traces'] / r['cpu_s']:,.0f} |"
        )
    lines += [
        "",
        f"Machine load: load average {load[0]:.1f} before and {load_after[0]:.1f} after on "
        f"{os.cpu_count()} cores shared with other engineers' test runs, so the wall-clock rates "
        "are lower bounds; the process CPU column counts the benchmark process (scorer threads, "
        "the in-process chDB engine's inserts and merges, the waiting loop), not the broker.",
        "",
        f"Verdict: {verdict}",
        "",
        "Where the CPU goes (``stage_breakdown`` in the script: each stage in-line on one thread, "
        "3,000 traces, process CPU time, so less sensitive to the shared machine):",
        "",
        "| stage | CPU per trace (us) |",
        "|---|---|",
        *(f"| {name} | {us:.0f} |" for name, us in stages.items()),
        f"| **sum** | **{sum(stages.values()):.0f}** "
        f"(= {1e6 / sum(stages.values()):,.0f} traces/s on one "
        "free core, before Kafka fetch, threads and the chDB insert) |",
        "",
    ]
    path = ROOT / "docs" / "benchmarks.md"
    text = path.read_text() if path.exists() else "# Benchmarks\n\n"
    start = text.find(SECTION)
    if start == -1:
        text = text.rstrip("\n") + "\n\n" + "\n".join(lines)
    else:
        nxt = text.find("\n## ", start + len(SECTION))
        text = text[:start] + "\n".join(lines) + ("\n" + text[nxt + 1 :] if nxt != -1 else "")
    path.write_text(text)
    print(f"wrote {SECTION!r} to {path}")


if __name__ == "__main__":
    main()
