"""Row types: what one score (or one health counter) looks like on its way to ClickHouse.

:func:`rows_from_scores` turns the metric engine's :class:`~ragpulse.scorer.Score` objects plus the
trace's metadata into :class:`ScoreRow` values; :func:`columns_of` turns rows into the
column-oriented lists clickhouse-connect inserts without a per-row conversion.

Text is made safe here, once: lone surrogates (what ``surrogateescape`` makes of invalid UTF-8)
become U+FFFD, ``bytes`` are decoded with replacement, and excerpts are cut to a character budget,
so an insert never fails on a hostile string.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from operator import attrgetter
from typing import Any, NamedTuple

from ragpulse.common.schema import HEALTH_COLUMNS, SCORE_COLUMNS

from ..model import ZERO_COST as _ZERO_COST
from ..model import Score, Unsupported

__all__ = [
    "DEFAULT_EVIDENCE_CHARS",
    "DEFAULT_MAX_UNSUPPORTED",
    "PipelineHealthRow",
    "ScoreRow",
    "ScoredTraceMeta",
    "columns_of",
    "rows_from_scores",
    "safe_label",
    "safe_text",
    "unsupported_column",
    "without_controls",
    "without_format",
]

DEFAULT_EXCERPT_CHARS = 1000
DEFAULT_MAX_UNSUPPORTED = 3
"""Unsupported statements stored per faithfulness row (``write.max_unsupported``)."""
DEFAULT_EVIDENCE_CHARS = 400
"""Characters kept of each unsupported statement and of its passage (``write.max_evidence_chars``)."""
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


# C0 and C1 control characters and DEL: a terminal acts on them (ESC starts a hyperlink, a
# screen clear, a window title), so a label never stores them.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# Unicode format characters (bidi overrides and isolates such as U+202E, zero-width spaces and
# joiners, the BOM) and the line and paragraph separators U+2028, U+2029: invisible, yet a bidi
# terminal or a browser reorders or breaks the text around them, so "\u202etset-pohs" prints as
# "shop-test" and a service name can pass for another.
_FORMAT = frozenset({"Cf", "Zl", "Zp"})


def without_format(text: str) -> str:
    """``text`` without Unicode format characters (category Cf) and line or paragraph
    separators (Zl, Zp). Linear; a printable text is returned as it is."""
    if text.isprintable():  # none of them is printable: the common case
        return text
    return "".join(ch for ch in text if unicodedata.category(ch) not in _FORMAT)


def without_controls(text: str) -> str:
    """``text`` with every C0/C1 control character and DEL replaced by U+FFFD, and without
    format and separator characters (:func:`without_format`): what a terminal may print."""
    return without_format(_CONTROL.sub("\ufffd", text))


def safe_label(value: Any, limit: int = 256) -> str:
    """A label from a span (service, environment, model, prompt and retriever version) as
    stored: :func:`safe_text` cut to ``limit``, control characters replaced by U+FFFD, format and
    separator characters (bidi overrides, zero-width characters, U+2028) removed and the
    backslash by U+FF3C (＼, which looks the same). Dashboards put label values into SQL through
    Grafana's ``${var:singlequote}``, which escapes ``'`` but not ``\\``: a value ending in a
    backslash would end the literal early (``x\\') OR 1=1 --``) and a sender could rewrite a
    viewer's panel. Without a backslash the literal is exact."""
    s = safe_text(value, limit)
    if s.isprintable() and "\\" not in s:  # the common case
        return s
    return without_controls(s).replace("\\", "\uff3c")


def _utc(ts: datetime) -> datetime:
    if ts.tzinfo is None:
        raise ValueError(f"timestamp {ts!r} has no timezone: pass an aware datetime (UTC)")
    return ts.astimezone(UTC)


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
class ScoredTraceMeta:
    """What the scorer knows about the trace behind a set of scores.

    ``ts`` is the trace's end time taken from its spans: it is part of the table's sorting key, so
    it must come out the same when the trace is replayed (never use the wall clock here).
    ``question_excerpt``/``answer_excerpt`` are ``None`` when the privacy setting disables them.
    ``unscorable_detail`` is the scorer's own advice for a trace without a sample (e.g. which
    setting records message content); it becomes the explanation of the trace's null rows and
    never holds trace text. ``segments`` are the row's further dimensions (language, configured
    span attributes: ``ragpulse.scorer.pipeline.segments``), stored as given but made safe.
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
    unscorable_detail: str = ""
    segments: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        rate = self.sampling_rate
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or math.isnan(rate) \
                or not 0.0 < rate <= 1.0:
            raise ValueError(f"sampling_rate {rate!r} must be in (0, 1]")


class ScoreRow(NamedTuple):
    """One row of ``scores``; field order is the insert column order (checked at import).

    A named tuple, not a frozen dataclass: the scorer builds five per trace, and a frozen
    dataclass's ``__init__`` (one ``object.__setattr__`` per field, 29 fields) cost about 5 us
    per row against under 1 us for the tuple. Tuples of immutable values also drop out of the
    garbage collector's tracking after their first collection, so rows waiting for an insert do
    not slow every full collection down. Immutable like the dataclass was; construct it
    positionally or by keyword, list its fields with ``ScoreRow._fields``.
    """

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
    unsupported: list[tuple[str, int, str, float | None]]
    segments: dict[str, str]
    version: int


@dataclass(frozen=True, slots=True)
class PipelineHealthRow:
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
if ScoreRow._fields != tuple(c.name for c in SCORE_COLUMNS):
    raise ImportError("ScoreRow fields drifted from schema.SCORES")
if tuple(f.name for f in fields(PipelineHealthRow)) != tuple(c.name for c in HEALTH_COLUMNS):
    raise ImportError("PipelineHealthRow fields drifted from schema.PIPELINE_HEALTH")


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
_new_row = tuple.__new__  # ScoreRow(...) without the Python-level __new__ frame


def _counts(counts: dict[str, int]) -> dict[str, int]:
    """A score's counts as the ``Map(..., UInt32)`` column takes them: safe names, clamped."""
    return {_label(k): max(0, min(int(v), _U32)) for k, v in counts.items()}


_I32 = 2**31 - 1


def _cut(text: Any, limit: int) -> str:
    """:func:`safe_text` of ``text`` within ``limit`` characters, a cut marked with "…"."""
    s = safe_text(text)
    return s if len(s) <= limit else s[: max(0, limit - 1)] + "\u2026"


def unsupported_column(unsupported: Sequence[Unsupported], max_statements: int,
                       max_chars: int) -> list[tuple[str, int, str, float | None]]:
    """A score's unsupported statements as the ``unsupported`` column stores them: the first
    ``max_statements`` (the metric orders them lowest support first), each statement and
    passage made safe (:func:`safe_text`) and cut to ``max_chars`` characters (a cut ends in
    "…"), the context index within Int32 (-1: none), the support rounded and finite or NULL.
    Empty when either bound is 0 (excerpts off)."""
    if max_statements <= 0 or max_chars <= 0:
        return []
    out = []
    for u in unsupported[:max_statements]:
        p = u.support
        support = (round(float(p), 4)
                   if p is not None and math.isfinite(p) and 0.0 <= p <= 1.0 else None)
        ctx = int(u.context) if -1 <= int(u.context) <= _I32 else -1
        out.append((_cut(u.statement, max_chars), ctx,
                    _cut(u.passage, max_chars) if ctx >= 0 else "", support))
    return out


def rows_from_scores(
    scores: Iterable[Score],
    meta: ScoredTraceMeta,
    *,
    scored_at: datetime | None = None,
    max_excerpt_chars: int | None = DEFAULT_EXCERPT_CHARS,
    max_unsupported: int = DEFAULT_MAX_UNSUPPORTED,
    max_evidence_chars: int = DEFAULT_EVIDENCE_CHARS,
) -> list[ScoreRow]:
    """One :class:`ScoreRow` per score of one trace.

    Excerpts of trace text (question, answer, the judge's explanation, the unsupported
    statements and their passages) are cut to ``max_excerpt_chars`` (``None``: no cut; 0: none
    stored, what the privacy switch passes). A faithfulness score keeps its first
    ``max_unsupported`` unsupported statements, each statement and passage cut to
    ``max_evidence_chars`` (and never beyond ``max_excerpt_chars``):
    :func:`unsupported_column`.

    ``scored_at`` (default: now, UTC) also sets ``version`` (its epoch milliseconds), so a trace
    scored again later replaces its earlier rows. Raises ``ValueError`` for a malformed trace id,
    a naive timestamp, or a sampling rate outside (0, 1]. Pure; thread-safe.

    Long because: the row is written out positionally, one line per column (30), inside the
    scorer's hottest row loop, where a helper call per score would cost more than it reads.
    """
    scored_at = _utc(scored_at or datetime.now(UTC))
    # Truncate to ms: the column is DateTime64(3); the version must match what is stored.
    scored_at = scored_at.replace(microsecond=scored_at.microsecond // 1000 * 1000)
    version = int(scored_at.timestamp() * 1000)
    trace_id = _hex_id(meta.trace_id, 32, "trace_id")
    span_id = _hex_id(meta.span_id, 16, "span_id")
    ts = _utc(meta.ts)
    service = safe_label(meta.service)
    environment = safe_label(meta.environment)
    model = safe_label(meta.model)
    prompt_version = safe_label(meta.prompt_version)
    retriever_version = safe_label(meta.retriever_version)
    question = safe_text(meta.question_excerpt, max_excerpt_chars)
    evidence_chars = (max_evidence_chars if max_excerpt_chars is None
                      else min(max_evidence_chars, max_excerpt_chars))
    answer = safe_text(meta.answer_excerpt, max_excerpt_chars)
    sampling_rate = float(meta.sampling_rate)
    # Not an excerpt (no trace text): kept when excerpts are off, cut like an explanation.
    detail = safe_text(meta.unscorable_detail, DEFAULT_EXCERPT_CHARS)
    segments = {safe_label(k): safe_label(v) for k, v in meta.segments.items()}
    # The loop below is the scorer's hottest row code (five scores per trace): label lookups hit
    # the cache directly (a Score's label fields are always hashable: str or None), the shared
    # zero cost and empty counts skip their conversions, and rows are built as plain tuples.
    cache = _label_cache
    label = _label
    zero = _ZERO_COST
    out: list[ScoreRow] = []
    append = out.append
    for s in scores:
        iv = s.interval
        cost = s.cost
        value = s.value
        explanation = s.explanation
        metric, reason, judge, judge_model, judge_pv = (
            s.metric, s.reason, s.judge, s.model, s.prompt_version
        )
        if cost is zero:
            llm_calls = prompt_tokens = completion_tokens = latency_ms = 0.0
        else:
            llm_calls = _finite(cost.llm_calls)
            prompt_tokens = _finite(cost.prompt_tokens)
            completion_tokens = _finite(cost.completion_tokens)
            latency_ms = _finite(cost.latency_ms)
        counts = s.counts
        # Positional, in field order (checked against the schema at import).
        append(_new_row(ScoreRow, (
            trace_id,
            span_id,
            ts,
            scored_at,
            service,
            environment,
            model,
            prompt_version,
            retriever_version,
            cache.get(metric) or label(metric),
            None if value is None else float(value),
            s.status,
            cache.get(reason) or label(reason),
            None if iv is None else float(iv.low),
            None if iv is None else float(iv.high),
            cache.get(judge) or label(judge),
            cache.get(judge_model) or label(judge_model),
            cache.get(judge_pv) or label(judge_pv),
            llm_calls,
            prompt_tokens,
            completion_tokens,
            latency_ms,
            sampling_rate,
            _counts(counts) if counts else {},
            question,
            answer,
            (detail if s.status == "null" else "") if explanation is None
            else safe_text(explanation, max_excerpt_chars),
            unsupported_column(s.unsupported, max_unsupported, evidence_chars)
            if s.unsupported else [],
            segments,
            version,
        )))
    return out


def columns_of(rows: Sequence[ScoreRow] | Sequence[PipelineHealthRow]) -> list[list[Any]]:
    """Transpose rows into per-column lists (clickhouse-connect ``column_oriented=True``)."""
    if not rows:
        return []
    if isinstance(rows[0], tuple):  # ScoreRow: a C-level transpose
        return [list(c) for c in zip(*rows)]
    # attrgetter per field, not dataclasses.astuple: astuple deep-copies every dict and list.
    return [list(map(attrgetter(f.name), rows)) for f in fields(rows[0])]
