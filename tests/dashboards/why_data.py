"""Stored traffic for the drop decomposition: ten minutes before :data:`END`, two traces a
second (as ``make demo`` sends), written through the real ScoreWriter.

* The first five minutes (the baseline): three services, one third of the traffic each; the
  English services ``support-bot`` and ``docs-search`` answer with prompt ``v1`` or ``v2`` half
  the time each, and every prompt answers alike (faithfulness about 0.86).
* The last five minutes (now): prompt ``v2`` turns unfaithful (a third of its answers score
  about 0.1), and ``faq-ja``, which scores lower than the others (about 0.70) but does not
  change, doubles its traffic (half of all of it now): a segment that only grows.
* A model ``tiny-llm`` with three traces in each window, scored 0.95 in the baseline and 0.0
  now: the segment whose own mean fell the most, on far too few traces to say anything.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from ragpulse.scorer import Interval, Score
from ragpulse.scorer.model import Cost
from ragpulse.scorer.store import ScoredTraceMeta, rows_from_scores

END = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
START = END - timedelta(minutes=10)
MID = END - timedelta(minutes=5)
PER_SECOND = 2


def _score(value: float) -> Score:
    return Score(metric="faithfulness", value=value, judge="fast", model="support-lr@5",
                 prompt_version="v1", interval=Interval(low=max(0.0, value - 0.2),
                                                        high=min(1.0, value + 0.1)),
                 cost=Cost(llm_calls=0.0, prompt_tokens=0, completion_tokens=0, latency_ms=5.0))


def _value(rng: random.Random, mean: float) -> float:
    return min(1.0, max(0.0, rng.gauss(mean, 0.08)))


def why_rows(seed: int = 11) -> list:
    """The score rows of the story above (one faithfulness row per trace)."""
    rng = random.Random(seed)
    rows: list = []
    n = 0
    for k in range(10 * 60 * PER_SECOND):
        ts = START + timedelta(seconds=k / PER_SECOND)
        recent = ts >= MID
        service = rng.choices(("support-bot", "docs-search", "faq-ja"),
                              weights=(1, 1, 2) if recent else (1, 1, 1))[0]
        prompt = rng.choice(("v1", "v2")) if service != "faq-ja" else "ja-v1"
        if service == "faq-ja":
            value = _value(rng, 0.70)
        elif prompt == "v2" and recent and rng.random() < 1 / 3:
            value = _value(rng, 0.10)
        else:
            value = _value(rng, 0.86)
        n += 1
        meta = ScoredTraceMeta(trace_id=f"{n:032x}", ts=ts, service=service,
                               environment="production",
                               model=rng.choice(("gpt-4o-mini", "llama-3.1-8b")),
                               prompt_version=prompt,
                               retriever_version="bm25-v1" if service == "faq-ja"
                               else rng.choice(("dense-v3", "dense-v4")))
        rows += rows_from_scores([_score(value)], meta, scored_at=ts + timedelta(seconds=2))
    for i in range(6):
        n += 1
        recent = i >= 3
        meta = ScoredTraceMeta(trace_id=f"{n:032x}",
                               ts=(END if recent else MID) - timedelta(seconds=50 - 10 * i),
                               service="support-bot", environment="production",
                               model="tiny-llm", prompt_version="v1",
                               retriever_version="dense-v3")
        rows += rows_from_scores([_score(0.0 if recent else 0.95)], meta, scored_at=END)
    return rows


ROUTES = ("/v1/ask", "/v1/search", "/v1/faq")


def route_rows(seed: int = 12) -> list:
    """Segments the scorer reads from spans (``scores.segments``): one service, one prompt and
    one retriever throughout, three ``http.route`` values a third of the traffic each. In the
    last five minutes ``/v1/search`` turns unfaithful (a third of its answers score about
    0.1), while ``/v1/faq`` (about 0.70, unchanged) doubles its traffic: it only grows.
    Every route answers in English or Japanese alike (language explains nothing). The first 30 rows have no segments (written before the
    scorer set any): they are in each segment dimension's ``''`` segment."""
    rng = random.Random(seed)
    rows: list = []
    for k in range(10 * 60 * PER_SECOND):
        ts = START + timedelta(seconds=k / PER_SECOND)
        recent = ts >= MID
        route = rng.choices(ROUTES, weights=(1, 1, 2) if recent else (1, 1, 1))[0]
        if route == "/v1/faq":
            value = _value(rng, 0.70)
        elif route == "/v1/search" and recent and rng.random() < 1 / 3:
            value = _value(rng, 0.10)
        else:
            value = _value(rng, 0.86)
        segments = {} if k < 30 else {
            "language": rng.choice(("en", "ja")), "http.route": route,
            "app.doc_source": rng.choice(("wiki", "kb"))}
        meta = ScoredTraceMeta(trace_id=f"{k + 1:032x}", ts=ts, service="support-bot",
                               environment="production", model=rng.choice(("m-a", "m-b")),
                               prompt_version="v1", retriever_version="dense-v3",
                               segments=segments)
        rows += rows_from_scores([_score(value)], meta, scored_at=ts + timedelta(seconds=2))
    return rows
