"""Null rows keep what extraction found: the question and answer of a trace that cannot be
judged (here: a chat without retrieval, ``no_contexts``), redacted like a sample, and a model
name even where the framework's model has none. Spans from the real instrumentors."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from ragpulse.scorer import Score
from ragpulse.scorer.pipeline.prepare import build_preparer
from ragpulse.scorer.pipeline.trace_buffer import AssembledTrace
from ragpulse.scorer.privacy import build_redactor
from ragpulse.scorer.store import rows_from_scores
from ragpulse.scorer.traces import Sampler, Span
from tests.scorer.traces.sdk import Recorder

from . import apps
from .harness import instrumented, traces

QUESTION = "Can you mail the warranty terms to jane.doe@example.com?"
ANSWER = "Yes, the terms were sent to jane.doe@example.com."


def _chat_trace(rec: Recorder) -> list[Span]:
    from openinference.instrumentation.langchain import LangChainInstrumentor

    with instrumented(LangChainInstrumentor(), rec):
        apps.langchain_chat(QUESTION, ANSWER)
    (spans,) = traces(rec).values()
    return spans


def _null_row(spans: list[Span], **preparer: Any) -> Any:
    prep = build_preparer(Sampler(), **preparer)(
        AssembledTrace(spans[0].trace_id, spans, [], "complete", True)
    )
    assert prep.keep and prep.sample is None and prep.reason == "no_contexts"
    assert prep.meta is not None
    score = Score(metric="faithfulness", value=None, status="null", reason=prep.reason)
    (row,) = rows_from_scores([score], prep.meta, scored_at=datetime.now(UTC))
    return row


def test_null_rows_store_the_question_and_answer_found(rec: Recorder) -> None:
    row = _null_row(_chat_trace(rec))

    assert (row.status, row.reason) == ("null", "no_contexts")
    assert (row.question, row.answer) == (QUESTION, ANSWER)
    # FakeListChatModel has no model name: the LLM span's provider stands in
    assert row.model == "fakelistchatmodel"


def test_null_row_excerpts_are_redacted_and_can_be_off(rec: Recorder) -> None:
    spans = _chat_trace(rec)

    redacted = _null_row(spans, redactor=build_redactor())
    off = _null_row(spans, excerpts=False)

    assert "jane.doe@example.com" not in redacted.question + redacted.answer
    assert "[EMAIL_1]" in redacted.question and "[EMAIL_1]" in redacted.answer  # one numbering
    assert (off.question, off.answer) == ("", "")
