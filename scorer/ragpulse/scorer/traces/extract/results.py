"""What extraction returns: its settings, the facts of a trace, and the outcome for one trace."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ...model import Sample

NEGATIVE_FEEDBACK_LABELS = frozenset(
    {
        "negative",
        "thumbs_down",
        "thumbsdown",
        "thumbs-down",
        "down",
        "bad",
        "dislike",
        "incorrect",
        "unhelpful",
        "wrong",
        "-1",
        "👎",
    }
)
_NEGATIVE_FEEDBACK_BELOW = 0.5


class ExtractionSettings(BaseModel):
    """What counts as a scorable trace."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    require_contexts: bool = Field(
        True, description="a trace without any context is not a RAG interaction: no sample"
    )
    prompt_fallback: bool = Field(
        True,
        description="recover contexts from the final LLM prompt when retrieval spans have none",
    )
    max_contexts: int = Field(64, ge=1, description="contexts kept per trace, in rank order")


@dataclass(frozen=True, slots=True)
class TraceFacts:
    """What the spans of one trace say about it: where it ran, what produced it, how it went
    (the store turns it into a :class:`ragpulse.scorer.store.ScoredTraceMeta`)."""

    trace_id: str
    service: str = ""
    environment: str = ""
    model: str = ""
    prompt_version: str | None = None
    retriever_version: str | None = None
    start_ns: int = 0
    end_ns: int = 0
    span_count: int = 0
    error: bool = False
    error_message: str = ""
    feedback_score: float | None = None
    feedback_label: str | None = None
    feedback_comment: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    session_id: str | None = None
    user_id: str | None = None
    conventions: tuple[str, ...] = ()
    sources: Mapping[str, str] = field(default_factory=dict)

    @property
    def negative_feedback(self) -> bool:
        """A score below 0.5 (scores are 0..1, 1 = good) or a negative label."""
        if self.feedback_score is not None and self.feedback_score < _NEGATIVE_FEEDBACK_BELOW:
            return True
        return bool(self.feedback_label) and self.feedback_label.lower() in NEGATIVE_FEEDBACK_LABELS

    def as_dict(self) -> dict[str, Any]:
        return {
            "trace_id": self.trace_id,
            "service": self.service,
            "environment": self.environment,
            "model": self.model,
            "prompt_version": self.prompt_version,
            "retriever_version": self.retriever_version,
            "start_ns": self.start_ns,
            "end_ns": self.end_ns,
            "span_count": self.span_count,
            "error": self.error,
            "error_message": self.error_message,
            "feedback_score": self.feedback_score,
            "feedback_label": self.feedback_label,
            "feedback_comment": self.feedback_comment,
            "negative_feedback": self.negative_feedback,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "session_id": self.session_id,
            "user_id": self.user_id,
            "conventions": list(self.conventions),
            "sources": dict(self.sources),
        }


@dataclass(frozen=True, slots=True)
class Extraction:
    """The outcome for one trace: a sample, or ``None`` with a ``reason``; metadata either way.

    ``reason`` is one of ``no_spans``, ``no_question``, ``no_answer``, ``no_contexts`` (the last
    three also are :class:`ragpulse.scorer.Reason` values), ``content_not_captured`` (LLM
    spans without any message text) or ``not_rag`` (no question, no answer, no LLM call: not a
    RAG query at all; see :mod:`ragpulse.common.schema`). ``detail`` says what to do about it, for
    the null rows' explanation (``None`` when there is nothing to add). ``question`` and
    ``answer`` are what was found (stripped), also when there is no sample.
    """

    trace_id: str
    sample: Sample | None
    reason: str | None
    meta: TraceFacts
    detail: str | None = None
    question: str | None = None
    answer: str | None = None

    @property
    def ok(self) -> bool:
        return self.sample is not None
