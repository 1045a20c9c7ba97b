"""Generated scores and pipeline-health rows, written through the real row API and writers.

Faithfulness scenarios, one per service, hourly-resolution over 8 days before ``NOW``:

* ``steady``: stationary around 0.85 (noise sd 0.1).
* ``cycle``: a normal daily cycle, 0.85 ± 0.08 by hour of day.
* ``drop``: steady, then 0.55 for the last 2 hours (a real drop).
* ``few``: 2 traces an hour, uniform noise, and 0.2/0.3 in the last hour (noise from few samples).
* ``slide``: a slow linear slide 0.86 → 0.74 over 8 days (no fixed threshold catches it).

``steady``'s answer_relevancy is null for 10 % of traces, for 50 % in the last 30 minutes (the
null-rate rule), and a few context_precision scores are skipped for budget_exhausted in the last
20 minutes (the budget rule); ``cycle`` carries the three context metrics.

``steady`` also gets answer_relevancy (with nulls), judge errors and budget skips, so every
panel has rows; pipeline_health gets collector/scorer counters and a lag that grows at the end.
"""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime, timedelta

from ragpulse.scorer import Interval, Score
from ragpulse.scorer.model import Cost
from ragpulse.scorer.store import (
    PipelineHealthRow,
    SchemaSettings,
    ScoredTraceMeta,
    rows_from_scores,
)
from ragpulse.scorer.store.writer import ScoreWriter, WriterSettings, build_pipeline_health_writer

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
# The data sets sit at fixed dates (the expected query texts and report headers name them), so
# their tables keep rows for ten years: with the shipped 30/90-day TTLs, the rows would be
# dropped on insert once the calendar passes those dates. (Not more: DateTime ends in 2106, and
# a TTL past it wraps to the past and drops every row.)
_TEN_YEARS_DAYS = 3650


def fixed_date_schema(database: str) -> SchemaSettings:
    """The schema settings for a data set dated around :data:`NOW`."""
    return SchemaSettings(database=database, ttl_days=_TEN_YEARS_DAYS,
                          rollup_ttl_days=_TEN_YEARS_DAYS, health_ttl_days=_TEN_YEARS_DAYS)
DAYS = 8
PER_HOUR = 30
SERVICES = ("steady", "cycle", "drop", "few", "slide")


def faithfulness_mean(service: str, t: datetime) -> float:
    age_h = (NOW - t).total_seconds() / 3600
    if service == "cycle":
        return 0.85 + 0.08 * math.sin(2 * math.pi * t.hour / 24)
    if service == "drop":
        return 0.55 if age_h <= 2 else 0.85
    if service == "slide":
        return 0.74 + 0.12 * age_h / (DAYS * 24)
    return 0.85


def _clip(x: float) -> float:
    return min(1.0, max(0.0, x))


def _score(metric: str, value: float, rng: random.Random) -> Score:
    return Score(metric=metric, value=value, judge="local", model="use-v3", prompt_version="v1",
                 interval=Interval(low=_clip(value - 0.2), high=_clip(value + 0.1)),
                 cost=Cost(llm_calls=0.0, prompt_tokens=0, completion_tokens=0,
                           latency_ms=rng.uniform(5, 30)))


def score_rows(seed: int = 7) -> list:
    rng = random.Random(seed)
    rows: list = []
    n = 0
    start = NOW - timedelta(days=DAYS)
    for service in SERVICES:
        per_hour = 2 if service == "few" else PER_HOUR
        for h in range(DAYS * 24):
            hour = start + timedelta(hours=h)
            for k in range(per_hour):
                t = hour + timedelta(seconds=(k + rng.random()) * 3600 / per_hour)
                if t >= NOW:
                    continue
                n += 1
                if service == "few":
                    age_h = (NOW - t).total_seconds() / 3600
                    v = (0.2 if k == 0 else 0.3) if age_h <= 1 else rng.random()
                else:
                    v = _clip(rng.gauss(faithfulness_mean(service, t), 0.1))
                scores = [_score("faithfulness", v, rng)]
                if service == "cycle" and k % 3 == 0:
                    scores += [_score(m, _clip(rng.gauss(0.7, 0.15)), rng) for m in
                               ("context_precision", "context_utilization", "context_relevance")]
                if service == "steady":
                    recent = NOW - t < timedelta(minutes=30)
                    if k % 5 == 2 and NOW - t < timedelta(minutes=20):
                        scores.append(Score.missing("context_precision", "budget_exhausted",
                                                    judge="llm", model="gpt-x"))
                    elif k % 10 == 0 or (recent and k % 2 == 0):
                        scores.append(Score.missing("answer_relevancy", "no_answer", judge="llm",
                                                    model="gpt-x"))
                    elif k % 10 == 1:
                        scores.append(Score.missing("context_precision", "judge_timeout",
                                                    judge="llm", model="gpt-x",
                                                    cost=Cost(llm_calls=1, latency_ms=30000)))
                    else:
                        scores.append(Score(
                            metric="answer_relevancy", value=_clip(rng.gauss(0.8, 0.1)),
                            judge="llm", model="gpt-x", prompt_version="v2",
                            cost=Cost(llm_calls=1.0, prompt_tokens=600, completion_tokens=80,
                                      latency_ms=rng.uniform(300, 900))))
                meta = ScoredTraceMeta(trace_id=f"{n:032x}", ts=t, service=service,
                                 environment="prod" if k % 4 else "staging",
                                 model="gpt-4o" if k % 2 else "llama-3",
                                 prompt_version=f"p{1 + k % 2}", retriever_version="r1",
                                 sampling_rate=0.5 if service == "steady" else 1.0,
                                 span_id=f"{n:016x}", question_excerpt=f"question {n}?",
                                 answer_excerpt=f"answer {n}")
                rows += rows_from_scores(scores, meta, scored_at=t + timedelta(seconds=2))
    return rows


def health_rows() -> list[PipelineHealthRow]:
    out: list[PipelineHealthRow] = []
    written = NOW
    for m in range(120, 0, -1):
        minute = NOW - timedelta(minutes=m)
        def c(component: str, name: str, value: float, label: str = "",
              minute: datetime = minute) -> None:
            out.append(PipelineHealthRow(minute, component, "host:1", name, label, "counter", value, written))
        c("collector", "spans_received", 300)
        c("collector", "spans_accepted", 295)
        c("collector", "spans_refused", 5)
        c("scorer", "traces_assembled", 60)
        c("scorer", "traces_evicted", 1)
        c("scorer", "traces_scored", 59)
        c("scorer", "spans_consumed", 295)
        # Like the scorer's PipelineHealthRecorder: a total (label '') and its breakdown by reason.
        c("scorer", "traces_unscorable", 3)
        c("scorer", "traces_unscorable", 2, "no_contexts")
        c("scorer", "traces_unscorable", 1, "no_answer")
        c("scorer", "records_dead_lettered", 1 if m % 30 == 0 else 0)
        c("scorer", "records_dead_lettered", 1 if m % 30 == 0 else 0, "undecodable")
        c("scorer", "write_errors", 1 if m % 45 == 0 else 0)
        lag = 20.0 if m > 15 else 20.0 + (16 - m) * 50.0  # grows ~50/min in the last 15 minutes
        out.append(PipelineHealthRow(minute, "scorer", "host:1", "consumer_lag", "", "gauge", lag, written))
        out.append(PipelineHealthRow(minute, "scorer", "host:1", "commit_lag", "", "gauge", lag + 5, written))
    return out


WRITE_SETTINGS = WriterSettings(batch_rows=50_000, max_pending_rows=200_000)


def labelled_rows(services: list[str], n: int, value: float, step_s: int = 20) -> list:
    """``n`` traces, one faithfulness score each (``value``), the newest now and one every
    ``step_s`` seconds before, their services cycling through ``services`` (labels go through
    the scorer's own row builder, so its cleaning applies)."""
    now = datetime.now(UTC)
    rows: list = []
    for i in range(n):
        meta = ScoredTraceMeta(trace_id=f"{i:032x}", ts=now - timedelta(seconds=step_s * i),
                               service=services[i % len(services)], environment="prod",
                               model="m", prompt_version="p", retriever_version="r",
                               sampling_rate=1.0, span_id=f"{i:016x}")
        rows += rows_from_scores([Score(metric="faithfulness", value=value, judge="local")], meta)
    return rows


def write_score_rows(client, database: str, rows: list) -> None:
    """Write score rows through a real ScoreWriter, 50,000 at a time, and wait for them."""
    w = ScoreWriter(client, database, WRITE_SETTINGS)
    w.start()
    try:
        for i in range(0, len(rows), 50_000):
            w.write(rows[i:i + 50_000], timeout_s=120)
    finally:
        w.shutdown()


def fill(client, database: str) -> int:
    """Write everything through ScoreWriter / the health writer; returns the score row count."""
    rows = score_rows()
    write_score_rows(client, database, rows)
    hw = build_pipeline_health_writer(client, database, WRITE_SETTINGS)
    hw.start()
    try:
        hw.write(health_rows(), timeout_s=60)
    finally:
        hw.shutdown()
    return len(rows)
