"""Row types: what one score (or one health counter) looks like on its way to ClickHouse.

:func:`rows_from_scores` turns the metric engine's :class:`~ragpulse.scorer.Score` objects plus the
trace's metadata into :class:`ScoreRow` values; :func:`columns_of` turns rows into the
column-oriented lists clickhouse-connect inserts fastest (INFRA §2.1).

Text is made safe here, once: lone surrogates (what ``surrogateescape`` makes of invalid UTF-8)
become U+FFFD, ``bytes`` are decoded with replacement, and excerpts are cut to a character budget,
so an insert never fails on a hostile string.
"""

from __future__ import annotations

import math
import re
from operator import attrgetter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from datetime import datetime, timezone
from typing import Any

from ..model import Score
from .schema import HEALTH_COLUMNS, SCORE_COLUMNS

__all__ = [
    "HealthRow",
    "ScoreRow",
    "TraceMeta",
    "columns_of",
    "rows_from_scores",
    "safe_text",
]

DEFAULT_EXCERPT_CHARS = 1000
_HEX = re.compile(r"[0-9a-f]+")


def safe_text(value: Any, limit: int | None = None) -> str:
    """``value`` as a str that encodes to valid UTF-8, cut to ``limit`` characters (None: no cut).

    ``None`` becomes ``""``; ``bytes`` are decoded as UTF-8 with replacement; lone surrogates
    become U+FFFD. Cutting never splits a surrogate pair because Python strs hold code points.
    """
    if value is None:
        return ""
    if type(value) is str and value.isascii():  # the common case: nothing to repair
        return value if limit is None or len(value) <= limit else value[:limit]
    if isinstance(value, (bytes, bytearray, memoryview)):
        s = bytes(value).decode("utf-8", "replace")
    else:
        s = str(value)
        try:
            s.encode("utf-8")
        except UnicodeEncodeError:
            # Round-trip through UTF-16 with surrogatepass turns each lone surrogate into U+FFFD
            # and keeps every valid character (pairs never occur inside a Python str).
            s = s.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if limit is not None and len(s) > limit:
        s = s[:limit]
    return s


def _utc(ts: datetime) -> datetime:
    if ts.tzinfo is None:
        raise ValueError(f"timestamp {ts!r} has no timezone: pass an aware datetime (UTC)")
    return ts.astimezone(timezone.utc)


def _hex_id(value: Any, length: int, what: str) -> str:
    if isinstance(value, (bytes, bytearray)):
        value = bytes(value).hex()
    s = str(value or "").strip().lower()
    if what == "trace_id" and not s:
        raise ValueError("trace_id is required")
    if s and (len(s) != length or not _HEX.fullmatch(s)):
        raise ValueError(f"{what} {value!r} must be {length} hex characters")
    return s


@dataclass(frozen=True, slots=True)
class TraceMeta:
    """What the scorer knows about the trace behind a set of scores.

    ``ts`` is the trace's end time taken from its spans: it is part of the table's sorting key, so
    it must come out the same when the trace is replayed (never use the wall clock here).
    ``question_excerpt``/``answer_excerpt`` are ``None`` when the privacy setting disables them.
    """

    trace_id: str | bytes
    ts: datetime
    service: str
    environment: str = ""
    model: str = ""
    prompt_version: str = ""
    retriever_version: str = ""
    sampling_rate: float = 1.0
    span_id: str | bytes = ""
    question_excerpt: str | None = None
    answer_excerpt: str | None = None

    def __post_init__(self) -> None:
        rate = self.sampling_rate
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or math.isnan(rate) \
                or not 0.0 < rate <= 1.0:
            raise ValueError(f"sampling_rate {rate!r} must be in (0, 1]")


@dataclass(frozen=True, slots=True)
class ScoreRow:
    """One row of ``scores``; field order is the insert column order (checked at import)."""

    trace_id: str
    span_id: str
    ts: datetime
    scored_at: datetime
    service: str
    environment: str
    model: str
    prompt_version: str
    retriever_version: str
    metric: str
    value: float | None
    status: str
    reason: str
    interval_low: float | None
    interval_high: float | None
    judge: str
    judge_model: str
    judge_prompt_version: str
    llm_calls: float
    prompt_tokens: float
    completion_tokens: float
    judge_latency_ms: float
    sampling_rate: float
    counts: dict[str, int]
    question: str
    answer: str
    explanation: str
    version: int


@dataclass(frozen=True, slots=True)
class HealthRow:
    """One row of ``pipeline_health``: a counter's increase within ``minute`` or a gauge's value."""

    minute: datetime
    component: str
    instance: str
    name: str
    label: str
    kind: str
    value: float
    written_at: datetime


# The dataclasses and the schema must agree, or every insert would fail at run time.
# (A raise, not an assert: it must hold under python -O too.)
if tuple(f.name for f in fields(ScoreRow)) != tuple(c.name for c in SCORE_COLUMNS):
    raise ImportError("ScoreRow fields drifted from schema.SCORES")
if tuple(f.name for f in fields(HealthRow)) != tuple(c.name for c in HEALTH_COLUMNS):
    raise ImportError("HealthRow fields drifted from schema.PIPELINE_HEALTH")


def _finite(x: float) -> float:
    return float(x) if x is not None and math.isfinite(x) else 0.0


_LABEL_CACHE_MAX = 4096
_label_cache: dict[Any, str] = {}


def _label(value: Any) -> str:
    """``safe_text(value, 256)`` memoized: metric, judge, model, reason and count names repeat on
    every row, so they are made safe once. The cache is bounded (cleared when full) and holds
    only hashable inputs; a race between threads at worst computes a value twice (dict operations
    are atomic under the GIL), so this is thread-safe."""
    try:
        return _label_cache[value]
    except KeyError:
        pass
    except TypeError:  # unhashable: nothing to cache
        return safe_text(value, 256)
    out = safe_text(value, 256)
    if len(_label_cache) >= _LABEL_CACHE_MAX:
        _label_cache.clear()
    _label_cache[value] = out
    return out


_U32 = 2**32 - 1


def rows_from_scores(
    scores: Iterable[Score],
    meta: TraceMeta,
    *,
    scored_at: datetime | None = None,
    max_excerpt_chars: int | None = DEFAULT_EXCERPT_CHARS,
) -> list[ScoreRow]:
    """One :class:`ScoreRow` per score of one trace.

    ``scored_at`` (default: now, UTC) also sets ``version`` (its epoch milliseconds), so a trace
    scored again later replaces its earlier rows. Raises ``ValueError`` for a malformed trace id,
    a naive timestamp, or a sampling rate outside (0, 1]. Pure; thread-safe.
    """
    scored_at = _utc(scored_at or datetime.now(timezone.utc))
    # Truncate to ms: the column is DateTime64(3); the version must match what is stored.
    scored_at = scored_at.replace(microsecond=scored_at.microsecond // 1000 * 1000)
    version = int(scored_at.timestamp() * 1000)
    trace_id = _hex_id(meta.trace_id, 32, "trace_id")
    span_id = _hex_id(meta.span_id, 16, "span_id")
    ts = _utc(meta.ts)
    service = safe_text(meta.service, 256)
    environment = safe_text(meta.environment, 256)
    model = safe_text(meta.model, 256)
    prompt_version = safe_text(meta.prompt_version, 256)
    retriever_version = safe_text(meta.retriever_version, 256)
    question = safe_text(meta.question_excerpt, max_excerpt_chars)
    answer = safe_text(meta.answer_excerpt, max_excerpt_chars)
    sampling_rate = float(meta.sampling_rate)
    label = _label
    out: list[ScoreRow] = []
    for s in scores:
        iv = s.interval
        cost = s.cost
        value = s.value
        explanation = s.explanation
        # Positional, in field order (checked against the schema at import): a row per score is
        # the scorer's hottest allocation, and keyword passing costs a third of it.
        out.append(ScoreRow(
            trace_id,
            span_id,
            ts,
            scored_at,
            service,
            environment,
            model,
            prompt_version,
            retriever_version,
            label(s.metric),
            None if value is None else float(value),
            s.status,
            label(s.reason),
            None if iv is None else float(iv.low),
            None if iv is None else float(iv.high),
            label(s.judge),
            label(s.model),
            label(s.prompt_version),
            _finite(cost.llm_calls),
            _finite(cost.prompt_tokens),
            _finite(cost.completion_tokens),
            _finite(cost.latency_ms),
            sampling_rate,
            {label(k): max(0, min(int(v), _U32)) for k, v in s.counts.items()},
            question,
            answer,
            "" if explanation is None else safe_text(explanation, max_excerpt_chars),
            version,
        ))
    return out


def columns_of(rows: Sequence[ScoreRow] | Sequence[HealthRow]) -> list[list[Any]]:
    """Transpose rows into per-column lists (clickhouse-connect ``column_oriented=True``)."""
    if not rows:
        return []
    # attrgetter per field, not dataclasses.astuple: astuple deep-copies every dict and list.
    return [list(map(attrgetter(f.name), rows)) for f in fields(rows[0])]
