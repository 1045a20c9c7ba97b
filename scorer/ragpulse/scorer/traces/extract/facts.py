"""The row metadata of a trace beyond its text: model, versions, session and user, tokens, user
feedback, the conventions seen. Attribute keys come from :mod:`.sources`' row-metadata tables.
Pure and thread-safe.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Protocol

from ragpulse import common
from ragpulse.common import conventions_in

from ..span import AttrValue, Span
from .families import key_info
from .sources import MODEL, PROVIDER, Source
from .values import as_number, as_text


class _Call(Protocol):
    span: Span


def first_attr(spans: Sequence[Span], table: Sequence[Source]) -> str | None:
    """The first row's key (in table order) found on any span (in order) or its resource, read
    by the row's converter."""
    for row in table:
        key, conv = row.name, row.read
        for s in spans:
            # Span.attr inlined, and absent keys (the usual case) never reach ``conv``: every
            # converter maps None to None. Called for several keys x every span of every trace.
            v = s.attributes.get(key)
            if v is None:
                v = s.resource.get(key)
                if v is None:
                    continue
            v = conv(v)
            if v is not None:
                return v
    return None


_SCORE_KEYS = (common.FEEDBACK_SCORE, "user.feedback.score", "feedback.score")
_LABEL_KEYS = (common.FEEDBACK_LABEL, "user.feedback.label", "feedback.label")
_COMMENT_KEYS = (common.FEEDBACK_COMMENT, "user.feedback.comment", "feedback.comment")
_FEEDBACK_SPAN_KEYS = frozenset(_SCORE_KEYS + _LABEL_KEYS + _COMMENT_KEYS)
_FEEDBACK_EVENT_KEYS = _FEEDBACK_SPAN_KEYS | {"score", "value", "label", "comment"}
_FEEDBACK_EVENTS = frozenset((common.FEEDBACK_EVENT, "user.feedback", "feedback"))


def _read_feedback(
    attrs: Mapping[str, AttrValue], bare: bool
) -> tuple[float | None, str | None, str | None]:
    """Score, label and comment from span attributes, or (``bare``) a feedback event's."""
    sk = _SCORE_KEYS + (("score", "value") if bare else ())
    lk = _LABEL_KEYS + (("label",) if bare else ())
    ck = _COMMENT_KEYS + (("comment",) if bare else ())
    score = next((n for k in sk if (n := as_number(attrs.get(k))) is not None), None)
    label = next((t for k in lk if (t := as_text(attrs.get(k))) is not None), None)
    comment = next((t for k in ck if (t := as_text(attrs.get(k))) is not None), None)
    return score, label, comment


def feedback(spans: Sequence[Span]) -> tuple[float | None, str | None, str | None]:
    """The latest user feedback in the trace, from attributes or ``ragpulse.feedback`` events."""
    best: tuple[int, float | None, str | None, str | None] | None = None
    for s in spans:
        # Most spans carry no feedback at all: one C-level disjointness test skips the lookups.
        if not s.attributes.keys().isdisjoint(_FEEDBACK_SPAN_KEYS):
            score, label, comment = _read_feedback(s.attributes, False)
            if (score is not None or label is not None) and (best is None or s.end_ns >= best[0]):
                best = (s.end_ns, score, label, comment)
        for e in s.events:
            if e.name in _FEEDBACK_EVENTS and not e.attributes.keys().isdisjoint(
                _FEEDBACK_EVENT_KEYS
            ):
                score, label, comment = _read_feedback(e.attributes, True)
                if (score is not None or label is not None) and (
                    best is None or e.time_ns >= best[0]
                ):
                    best = (e.time_ns, score, label, comment)
    return (best[1], best[2], best[3]) if best else (None, None, None)


def token_sum(calls: Sequence[_Call], table: Sequence[Source]) -> int | None:
    """The token counts of the LLM calls summed, each call's first key of ``table`` that holds a
    number; ``None`` when no call has one."""
    total = None
    for c in calls:
        for row in table:
            n = row.read(c.span.attributes.get(row.name))
            if n is not None:
                total = (total or 0) + n
                break
    return total


def trace_conventions(
    spans: Sequence[Span], attr_conventions: Sequence[frozenset[str]] | None = None
) -> tuple[str, ...]:
    """The ids of the conventions the trace's attribute keys and event names show
    (:func:`ragpulse.common.conventions_in`). ``attr_conventions``: each span's conventions from
    its attribute keys (:func:`.families.key_info`), in order, when already known."""
    found: set[str] = set()
    for i, s in enumerate(spans):
        found |= (
            attr_conventions[i] if attr_conventions is not None else key_info(s.attributes)[1]
        )
        if s.events:
            found |= conventions_in(e.name for e in s.events)
    return tuple(sorted(found))


# The LLM class a span is named after: "MockLLM.predict", "FakeListChatModel.chat".
_CLASS_NAME = re.compile(r"[A-Z][A-Za-z0-9_]*(?=[.\s]|$)")


def model_of(llm_spans: Sequence[Span], ordered: Sequence[Span]) -> str:
    """The row's model: a model attribute of the final LLM span, then of the other LLM spans
    (or, without any, of any span); else the LLM spans' provider; else the final LLM span's
    class, as instrumentations name spans after it (``MockLLM.predict``, ``MockLLM.task``).
    ``""`` when none of these exists."""
    found = first_attr(llm_spans or ordered, MODEL)
    if found is None and llm_spans:
        found = first_attr(llm_spans, PROVIDER)
        if found is None:
            name = as_text(llm_spans[0].attributes.get("traceloop.entity.name")) or llm_spans[0].name
            m = _CLASS_NAME.match(name)
            found = m.group(0) if m else None
    return found or ""
