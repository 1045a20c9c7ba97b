"""One test per cell of the compatibility matrix (docs/instrumentation.md): framework x
instrumentor, each a real app run in-process under the real instrumentor, its spans encoded to
OTLP protobuf and decoded by the scorer, and the trace's (question, contexts, answer) equal to
what the app itself asked, retrieved and got back.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from ragpulse.scorer.traces import Span, extract
from tests.fakes.openai_server import FakeOpenAIServer
from tests.scorer.traces.sdk import Recorder

from . import apps
from .apps import MODEL, Seen
from .harness import instrumented, root, traces


def assert_scored(
    spans: list[Span],
    seen: Seen,
    *,
    conventions: set[str],
    sources: Mapping[str, str],
    model: str,
) -> None:
    """The trace yields exactly what the app saw, by the intended path (``sources``: where each
    part came from), and only the instrumentor under test wrote it (``conventions``)."""
    ex = extract(spans)
    assert ex.sample is not None, (ex.reason, ex.meta.sources)
    assert ex.sample.question == seen.question
    assert ex.sample.contexts == seen.contexts and seen.contexts
    assert ex.sample.answer == seen.answer and seen.answer
    assert set(ex.meta.conventions) == conventions
    assert {k: ex.meta.sources[k] for k in sources} == dict(sources)
    assert ex.meta.model == model
    assert ex.meta.service == "compat-app"


def query_trace(rec: Recorder, root_prefix: str) -> list[Span]:
    """The one trace whose root span's name starts with ``root_prefix``."""
    found = [t for t in traces(rec).values() if root(t).name.startswith(root_prefix)]
    assert len(found) == 1, [root(t).name for t in traces(rec).values()]
    return found[0]


def test_llamaindex_openinference(rec: Recorder) -> None:
    from openinference.instrumentation.llama_index import LlamaIndexInstrumentor

    with instrumented(LlamaIndexInstrumentor(), rec):
        seen = apps.llamaindex_query(apps.llamaindex_index())
    assert_scored(
        query_trace(rec, "RetrieverQueryEngine"),
        seen,
        conventions={"openinference"},
        sources={"question": "root:input.value", "contexts": "retrieval.documents",
                 "answer": "root:output.value"},
        model="MockLLM",  # llm.model_name is "unknown": the class name stands in
    )


def test_llamaindex_openllmetry(rec: Recorder) -> None:
    from opentelemetry.instrumentation.llamaindex import LlamaIndexInstrumentor

    with instrumented(LlamaIndexInstrumentor(), rec):
        seen = apps.llamaindex_query(apps.llamaindex_index())
    assert_scored(
        query_trace(rec, "RetrieverQueryEngine"),
        seen,
        conventions={"openllmetry", "gen_ai"},
        sources={"question": "root:traceloop.entity.input", "contexts": "traceloop.entity.output",
                 "answer": "root:traceloop.entity.output"},
        model="MockLLM",  # no model attribute at all: the class name stands in
    )


def test_langchain_openinference(rec: Recorder) -> None:
    from openinference.instrumentation.langchain import LangChainInstrumentor

    with instrumented(LangChainInstrumentor(), rec):
        seen = apps.langchain_rag()
    (spans,) = traces(rec).values()
    assert_scored(
        spans,
        seen,
        conventions={"openinference"},
        sources={"question": "root:input.value", "contexts": "retrieval.documents",
                 "answer": "root:output.value"},
        model="fakelistchatmodel",  # no model name: llm.provider stands in
    )


def test_langchain_openllmetry(rec: Recorder) -> None:
    from opentelemetry.instrumentation.langchain import LangchainInstrumentor

    with instrumented(LangchainInstrumentor(), rec):
        seen = apps.langchain_rag()
    (spans,) = traces(rec).values()
    assert_scored(
        spans,
        seen,
        conventions={"openllmetry", "gen_ai"},
        sources={"question": "retrieval:query", "contexts": "traceloop.entity.output",
                 "answer": "llm:gen_ai.output.messages"},
        model="fakelistchatmodel",  # gen_ai.request.model "unknown": LangChain's ls_provider
    )


def test_haystack_openinference(
    rec: Recorder, openai_server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Haystack pings its telemetry service on every pipeline run unless this is off at import.
    monkeypatch.setenv("HAYSTACK_TELEMETRY_ENABLED", "False")
    from openinference.instrumentation.haystack import HaystackInstrumentor

    with instrumented(HaystackInstrumentor(), rec):
        seen = apps.haystack_rag(openai_server.base_url)
    (spans,) = traces(rec).values()
    assert_scored(
        spans,
        seen,
        conventions={"openinference"},
        sources={"question": "retrieval:query", "contexts": "retrieval.documents",
                 "answer": "llm:llm.output_messages"},
        model=MODEL,
    )


def test_openai_openinference(rec: Recorder, openai_server: FakeOpenAIServer) -> None:
    from openinference.instrumentation.openai import OpenAIInstrumentor

    with instrumented(OpenAIInstrumentor(), rec):
        seen = apps.openai_rag(openai_server.base_url)
    (spans,) = traces(rec).values()
    assert_scored(
        spans,
        seen,
        conventions={"openinference"},
        sources={"question": "llm:llm.input_messages", "contexts": "prompt:llm.input_messages",
                 "answer": "llm:llm.output_messages"},
        model=MODEL,
    )


def test_openai_genai_v2(
    rec: Recorder, openai_server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The one setting this cell needs: opentelemetry-instrumentation-openai-v2 records no
    # message content by default, and 2.4b0 takes only these values (not "true").
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY")
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

    with instrumented(OpenAIInstrumentor(), rec):
        seen = apps.openai_rag(openai_server.base_url)
    (spans,) = traces(rec).values()
    assert_scored(
        spans,
        seen,
        conventions={"gen_ai"},
        sources={"question": "llm:gen_ai.input.messages",
                 "contexts": "prompt:gen_ai.input.messages",
                 "answer": "llm:gen_ai.output.messages"},
        model=MODEL,
    )
