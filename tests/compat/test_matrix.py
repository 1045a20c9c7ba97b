"""One test per cell of the compatibility matrix (docs/instrumentation.md): framework x
instrumentor, each a real app run in-process under the real instrumentor, its spans encoded to
OTLP protobuf and decoded by the scorer, and the trace's (question, contexts, answer) equal to
what the app itself asked, retrieved and got back.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import pytest

from ragpulse.scorer.traces import extract
from testkit.openai_server import FakeOpenAIServer
from tests.scorer.traces.sdk import Recorder

from . import apps
from .apps import MODEL, Seen
from .harness import instrumented, root, traces


@dataclass(frozen=True)
class Cell:
    """One framework x instrumentor: how to run it and what its query trace must show."""

    instrumentor: str
    """``module:Class`` of the instrumentor."""
    app: Callable[[str], Seen]
    """Runs the app; gets the fake OpenAI server's base URL (unused by fake-model apps)."""
    conventions: set[str]
    """Conventions the trace shows: only the instrumentor under test wrote it."""
    sources: Mapping[str, str]
    """Where question, contexts and answer came from: the intended path, not a lucky fallback."""
    model: str
    root: str = ""
    """Name prefix of the query trace's root, when the app makes other traces (indexing)."""
    env: Mapping[str, str] = field(default_factory=dict)
    """The settings the cell needs (docs/instrumentation.md says the same)."""


def _llamaindex(_: str) -> Seen:
    return apps.llamaindex_query(apps.llamaindex_index())


OI_ROOT_IO = {"question": "root:input.value", "contexts": "retrieval.documents",
              "answer": "root:output.value"}

CELLS = {
    "llamaindex-openinference": Cell(
        "openinference.instrumentation.llama_index:LlamaIndexInstrumentor", _llamaindex,
        {"openinference"}, OI_ROOT_IO,
        model="MockLLM",  # llm.model_name is "unknown": the class name stands in
        root="RetrieverQueryEngine"),
    "llamaindex-openllmetry": Cell(
        "opentelemetry.instrumentation.llamaindex:LlamaIndexInstrumentor", _llamaindex,
        {"openllmetry", "gen_ai"},
        {"question": "root:traceloop.entity.input", "contexts": "traceloop.entity.output",
         "answer": "root:traceloop.entity.output"},
        model="MockLLM",  # no model attribute at all: the class name stands in
        root="RetrieverQueryEngine"),
    "langchain-openinference": Cell(
        "openinference.instrumentation.langchain:LangChainInstrumentor",
        lambda _: apps.langchain_rag(), {"openinference"}, OI_ROOT_IO,
        model="fakelistchatmodel"),  # no model name: llm.provider stands in
    "langchain-openllmetry": Cell(
        "opentelemetry.instrumentation.langchain:LangchainInstrumentor",
        lambda _: apps.langchain_rag(), {"openllmetry", "gen_ai"},
        {"question": "retrieval:query", "contexts": "traceloop.entity.output",
         "answer": "llm:gen_ai.output.messages"},
        model="fakelistchatmodel"),  # gen_ai.request.model "unknown": LangChain's ls_provider
    "haystack-openinference": Cell(
        "openinference.instrumentation.haystack:HaystackInstrumentor", apps.haystack_rag,
        {"openinference"},
        {"question": "retrieval:query", "contexts": "retrieval.documents",
         "answer": "llm:llm.output_messages"},
        model=MODEL,
        # Haystack pings its telemetry service on every pipeline run unless off at import.
        env={"HAYSTACK_TELEMETRY_ENABLED": "False"}),
    "openai-openinference": Cell(
        "openinference.instrumentation.openai:OpenAIInstrumentor", apps.openai_rag,
        {"openinference"},
        {"question": "llm:llm.input_messages", "contexts": "prompt:llm.input_messages",
         "answer": "llm:llm.output_messages"},
        model=MODEL),
    "openai-genai_v2": Cell(
        "opentelemetry.instrumentation.openai_v2:OpenAIInstrumentor", apps.openai_rag,
        {"gen_ai"},
        {"question": "llm:gen_ai.input.messages", "contexts": "prompt:gen_ai.input.messages",
         "answer": "llm:gen_ai.output.messages"},
        model=MODEL,
        # openai-v2 records no message content by default, and 2.4b0 takes only
        # NO_CONTENT | SPAN_ONLY | EVENT_ONLY | SPAN_AND_EVENT here (not "true").
        env={"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY"}),
}


@pytest.mark.parametrize("name", CELLS)
def test_cell(
    name: str, rec: Recorder, openai_server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    cell = CELLS[name]
    for k, v in cell.env.items():
        monkeypatch.setenv(k, v)
    module, cls = cell.instrumentor.split(":")
    instrumentor = getattr(importlib.import_module(module), cls)()

    with instrumented(instrumentor, rec):
        seen = cell.app(openai_server.base_url)

    found = [t for t in traces(rec).values() if root(t).name.startswith(cell.root)]
    assert len(found) == 1, [root(t).name for t in traces(rec).values()]
    ex = extract(found[0])
    assert ex.sample is not None, (ex.reason, ex.meta.sources)
    assert ex.sample.question == seen.question
    assert ex.sample.contexts == seen.contexts and seen.contexts
    assert ex.sample.answer == seen.answer and seen.answer
    assert set(ex.meta.conventions) == cell.conventions
    assert {k: ex.meta.sources[k] for k in cell.sources} == dict(cell.sources)
    assert ex.meta.model == cell.model
    assert ex.meta.service == "compat-app"
