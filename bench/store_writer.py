"""Measure the write path: ``.venv/bin/python bench/store_writer.py [--rows N] [--batch N]``.

Builds score rows for synthetic traces (2 metrics per trace), writes them with :class:`ScoreWriter`
into a fresh chDB directory in this process and prints rows/s for row building and for
acknowledged writes. Results go in docs/schema.md.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from datetime import UTC, datetime, timedelta

from ragpulse.scorer import Cost, Interval, Score
from ragpulse.scorer.store import (
    SchemaSettings,
    ScoredTraceMeta,
    ScoreWriter,
    WriterSettings,
    init_schema,
    open_store,
    rows_from_scores,
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--batch", type=int, default=50_000)
    ap.add_argument("--no-dedup", action="store_true", help="skip insert deduplication tokens")
    a = ap.parse_args()

    t0 = datetime(2026, 11, 20, tzinfo=UTC)
    # rows as the fast judge writes them (its judge name and its embedder's model name)
    scored = [
        Score(metric="faithfulness", value=0.8, judge="fast", model="use-multilingual-v3",
              prompt_version="v1",
              counts={"statements": 5, "supported": 4}, interval=Interval(low=0.4, high=0.96),
              cost=Cost(llm_calls=0.5, prompt_tokens=300, completion_tokens=40, latency_ms=20)),
        Score.missing("answer_relevancy", "no_answer", judge="fast", model="use-multilingual-v3"),
    ]
    start = time.perf_counter()
    rows = []
    for i in range(a.rows // 2):
        m = ScoredTraceMeta(trace_id=f"{i:032x}", ts=t0 + timedelta(milliseconds=37 * i),
                      service=f"svc-{i % 5}", environment="prod", model="gpt-x",
                      prompt_version="p3", retriever_version="r2", sampling_rate=0.5,
                      span_id=f"{i:016x}", question_excerpt="What is the refund policy? " * 3,
                      answer_excerpt="Refunds are accepted within 30 days of purchase. " * 4)
        rows += rows_from_scores(scored, m, scored_at=t0)
    build_s = time.perf_counter() - start

    with tempfile.TemporaryDirectory(prefix="ragpulse-bench-") as d:
        local = open_store(f"chdb://{d}")
        init_schema(local, SchemaSettings(database="bench"))
        w = ScoreWriter(local, "bench", WriterSettings(
            batch_rows=a.batch, max_pending_rows=max(a.rows, a.batch), flush_interval_s=0.05,
            deduplicate=not a.no_dedup))
        w.start()
        start = time.perf_counter()
        futures = [w.submit(rows[i:i + a.batch]) for i in range(0, len(rows), a.batch)]
        for f in futures:
            f.result()
        write_s = time.perf_counter() - start
        w.shutdown()
        n = local.command("SELECT count() FROM bench.scores")
        rolled = local.command("SELECT sum(rows) FROM bench.scores_1m")
    print(f"rows={len(rows)} batch={a.batch} dedup={not a.no_dedup}")
    print(f"build rows_from_scores: {len(rows) / build_s:,.0f} rows/s")
    print(f"write (acknowledged):   {len(rows) / write_s:,.0f} rows/s  ({write_s:.2f} s)")
    print(f"stored {n} rows, rollup counted {rolled}")


if __name__ == "__main__":
    main()
