"""Real client wrappers for writer tests: they forward to a real ClickHouse client and inject
failures or hold inserts, so the writer's behaviour is checked against real acknowledgements."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, time, timedelta
from typing import Any

from ragpulse.scorer import Interval, Score
from ragpulse.scorer.model import Cost
from ragpulse.scorer.store import (
    ScoredTraceMeta,
    ScoreRow,
    ScoreWriter,
    WriterSettings,
    rows_from_scores,
)

# Noon UTC yesterday, fixed for the process: rows at a fixed date would be deleted on insert
# once it is older than the tables' TTL (scores 90 days, pipeline_health 30; issue 17).
T0 = datetime.combine(datetime.now(UTC).date() - timedelta(days=1), time(12), tzinfo=UTC)


class FlakyClient:
    """Fails the first ``failures`` inserts with ``error``, then forwards to ``client``."""

    def __init__(self, client: Any, failures: int, error: BaseException) -> None:
        self.client, self.failures, self.error = client, failures, error
        self.calls = 0
        self.batch_sizes: list[int] = []

    def insert(self, table: str, data: Any, **kw: Any) -> Any:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        self.batch_sizes.append(len(data[0]) if data else 0)
        return self.client.insert(table, data, **kw)


class GatedClient:
    """Holds every insert until ``gate`` is set, then forwards; records batch sizes."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.batch_sizes: list[int] = []

    def insert(self, table: str, data: Any, **kw: Any) -> Any:
        self.entered.set()
        self.gate.wait(30)
        self.batch_sizes.append(len(data[0]) if data else 0)
        return self.client.insert(table, data, **kw)


def trace_id(i: int) -> str:
    return f"{i:032x}"


def meta(i: int, *, service: str = "svc", ts: datetime = T0, rate: float = 1.0, **kw: Any) -> ScoredTraceMeta:
    return ScoredTraceMeta(trace_id=trace_id(i), ts=ts, service=service, environment="prod",
                     model="gpt-x", prompt_version="p1", retriever_version="r1",
                     sampling_rate=rate, span_id=f"{i:016x}", **kw)


def scores(value: float | None = 0.75) -> list[Score]:
    ok = Score(metric="faithfulness", value=value, judge="local", model="m", prompt_version="v1",
               counts={"statements": 4, "supported": 3}, interval=Interval(low=0.3, high=0.95),
               cost=Cost(llm_calls=0.5, prompt_tokens=100, completion_tokens=20, latency_ms=12.5),
               explanation="3 of 4 statements supported") if value is not None else \
        Score.missing("faithfulness", "no_statements", judge="local", model="m")
    return [ok, Score.missing("answer_relevancy", "no_answer", judge="local", model="m")]


def rows(n_traces: int, *, start: int = 0, scored_at: datetime | None = None,
         ts: datetime = T0, **kw: Any) -> list[ScoreRow]:
    at = scored_at or T0 + timedelta(minutes=5)
    out: list[ScoreRow] = []
    for i in range(start, start + n_traces):
        out += rows_from_scores(scores(), meta(i, ts=ts, **kw), scored_at=at)
    return out


def write_rows(client: Any, db: str, rs: list, timeout_s: float = 30) -> None:
    """``rs`` through a real :class:`ScoreWriter` into ``db``, acknowledged before it returns."""
    w = ScoreWriter(client, db, WriterSettings(flush_interval_s=0.05))
    w.start()
    try:
        w.write(rs, timeout_s=timeout_s)
    finally:
        w.shutdown()
