"""Traces whose instrumentation recorded no message text: a counted ``content_not_captured``,
with the setting that turns capture on, instead of a bare ``no_question``; and OpenInference's
redaction placeholder is never scored as if it were the question. Spans from the real
instrumentors, with capture switched off the way users switch it off."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from ragpulse.common.schema import CONTENT_NOT_CAPTURED, CONTENT_SETTINGS
from ragpulse.scorer import Score
from ragpulse.scorer.pipeline.prepare import build_preparer
from ragpulse.scorer.pipeline.trace_buffer import AssembledTrace
from ragpulse.scorer.store import rows_from_scores
from ragpulse.scorer.traces import Sampler, extract
from testkit.openai_server import FakeOpenAIServer
from tests.scorer.traces.sdk import Recorder

from . import apps
from .harness import instrumented, traces

GENAI = CONTENT_SETTINGS["gen_ai"]


@pytest.mark.parametrize("capture", [None, "true", "EVENT_ONLY"])
def test_openai_v2_without_span_content(
    rec: Recorder, openai_server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch,
    capture: str | None,
) -> None:
    """Unset (the default), ``true`` (refused by opentelemetry-util-genai: NO_CONTENT) and
    ``EVENT_ONLY`` (text goes to the Logs API) all leave the span without text."""
    if capture is None:
        monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    else:
        monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", capture)
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

    with instrumented(OpenAIInstrumentor(), rec):
        apps.openai_rag(openai_server.base_url)
    (spans,) = traces(rec).values()

    ex = extract(spans)

    assert ex.sample is None and ex.reason == CONTENT_NOT_CAPTURED
    assert ex.detail is not None and GENAI in ex.detail
    assert "TRACELOOP" not in ex.detail and "OPENINFERENCE" not in ex.detail
    assert ex.meta.model == apps.MODEL and ex.meta.prompt_tokens  # the rest is still there


def test_openinference_hidden_inputs_and_outputs(
    rec: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OpenInference writes ``__REDACTED__`` in place of hidden values: that is no question,
    no document and no answer."""
    monkeypatch.setenv("OPENINFERENCE_HIDE_INPUTS", "true")
    monkeypatch.setenv("OPENINFERENCE_HIDE_OUTPUTS", "true")
    from openinference.instrumentation.langchain import LangChainInstrumentor

    with instrumented(LangChainInstrumentor(), rec):
        apps.langchain_rag()
    (spans,) = traces(rec).values()
    assert any(v == "__REDACTED__" for s in spans for v in s.attributes.values())

    ex = extract(spans)

    assert ex.sample is None and ex.reason == CONTENT_NOT_CAPTURED
    assert ex.detail is not None and "OPENINFERENCE_HIDE_INPUTS" in ex.detail


def test_openllmetry_trace_content_false(
    rec: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRACELOOP_TRACE_CONTENT", "false")
    from opentelemetry.instrumentation.langchain import LangchainInstrumentor

    with instrumented(LangchainInstrumentor(), rec):
        apps.langchain_rag()
    (spans,) = traces(rec).values()

    ex = extract(spans)

    assert ex.sample is None and ex.reason == CONTENT_NOT_CAPTURED
    assert ex.detail is not None and CONTENT_SETTINGS["openllmetry"] in ex.detail
    assert GENAI not in ex.detail


def test_null_rows_say_which_setting_to_change(
    rec: Recorder, openai_server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the scorer writes for such a trace: null rows with the reason, and the advice as
    their explanation even when excerpts are off (it is not trace text)."""
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

    with instrumented(OpenAIInstrumentor(), rec):
        apps.openai_rag(openai_server.base_url)
    (spans,) = traces(rec).values()
    prep = build_preparer(Sampler())(AssembledTrace(spans[0].trace_id, spans, [], "complete", True))
    assert prep.keep and prep.sample is None and prep.reason == CONTENT_NOT_CAPTURED
    assert prep.meta is not None
    scores = [Score(metric="faithfulness", value=None, status="null", reason=prep.reason)]

    for limit in (1000, 0):
        (row,) = rows_from_scores(scores, prep.meta, scored_at=datetime.now(UTC),
                                  max_excerpt_chars=limit)
        assert row.reason == CONTENT_NOT_CAPTURED and GENAI in row.explanation
