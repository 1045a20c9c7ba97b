"""Convention shapes that tests/scorer/traces/conventions.py hand-writes, emitted here by the real
package that writes them in the wild (pinned in pyproject's ``compat`` extra), from a real app
run in-process: the OTel GenAI event modes of ``opentelemetry-instrumentation-openai-v2``, and
OpenInference's multimodal message parts and legacy ``llm.prompts``/``llm.choices``.

docs/instrumentation.md ("Conventions and the packages they were tested against") lists which
shapes are tested this way and which are not, with the reason.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor

from ragpulse.common.schema import CONTENT_NOT_CAPTURED
from ragpulse.scorer.traces import extract
from testkit.openai_server import FakeOpenAIServer
from tests.scorer.traces.sdk import Recorder

from . import apps
from .apps import ANSWER, DOCS, MODEL, QUESTION, SYSTEM
from .harness import instrumented, traces, uninstrument

PIXEL = ("data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
         "+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")


@contextmanager
def _openai_v2(rec: Recorder, logs: InMemoryLogRecordExporter) -> Iterator[None]:
    """openai-v2 for ``rec``'s tracer provider and a logger provider exporting into ``logs``:
    the GenAI event modes write their events through the Logs API."""
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=rec.provider, logger_provider=logger_provider)
    try:
        yield
    finally:
        instrumentor.uninstrument()
        logger_provider.shutdown()


def _events(logs: InMemoryLogRecordExporter) -> list[Any]:
    return [r.log_record for r in logs.get_finished_logs()]


def _event_name(record: Any) -> str | None:
    return getattr(record, "event_name", None) or (record.attributes or {}).get("event.name")


def _assert_sample_is(ex: Any, seen: Any) -> None:
    """The trace gave a sample, and it is the question, contexts and answer the app used."""
    assert ex.sample is not None, (ex.reason, ex.meta.sources)
    assert (ex.sample.question, tuple(ex.sample.contexts), ex.sample.answer) == (
        seen.question, seen.contexts, seen.answer)


def test_openai_v2_span_and_event(rec: Recorder, openai_server: FakeOpenAIServer,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """``SPAN_AND_EVENT``: the span carries the messages (what ragpulse reads) and the
    ``gen_ai.client.inference.operation.details`` event goes to the Logs API, in the same
    trace, with the same messages."""
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_AND_EVENT")
    logs = InMemoryLogRecordExporter()
    with _openai_v2(rec, logs):
        seen = apps.openai_rag(openai_server.base_url)
    (spans,) = traces(rec).values()

    ex = extract(spans)

    _assert_sample_is(ex, seen)
    assert ex.meta.sources["answer"] == "llm:gen_ai.output.messages"
    (event,) = [r for r in _events(logs)
                if _event_name(r) == "gen_ai.client.inference.operation.details"]
    assert format(event.trace_id, "032x") == spans[0].trace_id
    assert ANSWER in json.dumps(dict(event.attributes or {}), default=str)


def test_openai_v2_event_only_leaves_the_span_without_text(
        rec: Recorder, openai_server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """``EVENT_ONLY``: the text exists only in the log event, which ragpulse does not consume
    (it reads traces): the trace is ``content_not_captured``, not scored from nothing."""
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "EVENT_ONLY")
    logs = InMemoryLogRecordExporter()
    with _openai_v2(rec, logs):
        apps.openai_rag(openai_server.base_url)
    (spans,) = traces(rec).values()

    assert not any(e.name.startswith("gen_ai.") for s in spans for e in s.events)
    events = [r for r in _events(logs)
              if _event_name(r) == "gen_ai.client.inference.operation.details"]
    assert len(events) == 1 and QUESTION in json.dumps(dict(events[0].attributes or {}),
                                                       default=str)
    ex = extract(spans)
    assert ex.sample is None and ex.reason == CONTENT_NOT_CAPTURED


def test_openinference_multimodal_message_parts(rec: Recorder,
                                                openai_server: FakeOpenAIServer) -> None:
    """A user message of content parts (text and an image), as vision apps send it:
    openinference-instrumentation-openai writes ``message.contents.<j>.message_content.*``."""
    import openai
    from openinference.instrumentation.openai import OpenAIInstrumentor

    hits = DOCS[:2]
    messages = [
        {"role": "system", "content": SYSTEM + "\n\nContext:\n" + "\n\n".join(hits)},
        {"role": "user", "content": [{"type": "text", "text": QUESTION},
                                     {"type": "image_url", "image_url": {"url": PIXEL}}]},
    ]
    with instrumented(OpenAIInstrumentor(), rec):
        client = openai.OpenAI(base_url=openai_server.base_url, api_key="sk-test", max_retries=0)
        try:
            reply = client.chat.completions.create(model=MODEL, messages=messages)  # type: ignore[arg-type]
        finally:
            client.close()
    (spans,) = traces(rec).values()
    assert any(".message.contents.0.message_content.text" in k
               for s in spans for k in s.attributes)

    ex = extract(spans)

    assert ex.sample is not None, (ex.reason, ex.meta.sources)
    assert ex.sample.question == QUESTION
    assert tuple(ex.sample.contexts) == hits
    assert ex.sample.answer == reply.choices[0].message.content == ANSWER
    assert dict(ex.meta.sources) == {"question": "llm:llm.input_messages",
                                     "contexts": "prompt:llm.input_messages",
                                     "answer": "llm:llm.output_messages"}


class _CompletionsServer:
    """The legacy ``/v1/completions`` endpoint on loopback (the project's fake OpenAI server
    speaks chat completions only): every completion is ANSWER."""

    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                out = json.dumps({
                    "id": "cmpl-1", "object": "text_completion", "created": 1, "model": body["model"],
                    "choices": [{"text": ANSWER, "index": 0, "finish_reason": "stop",
                                 "logprobs": None}],
                    "usage": {"prompt_tokens": 40, "completion_tokens": 12, "total_tokens": 52},
                }).encode()
                self.send_response(200 if self.path.endswith("/completions") else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> _CompletionsServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


def test_openinference_legacy_completions(rec: Recorder) -> None:
    """The legacy completions API (``client.completions.create`` with one prompt string):
    openinference-instrumentation-openai writes ``llm.prompts``/``llm.choices``, and the LLM
    span is the trace's root."""
    import openai
    from openinference.instrumentation.openai import OpenAIInstrumentor

    hits = DOCS[:2]
    prompt = (SYSTEM + "\n\nContext:\n" + "\n\n".join(hits) + f"\n\nQuestion: {QUESTION}\nAnswer:")
    with _CompletionsServer() as srv, instrumented(OpenAIInstrumentor(), rec):
        client = openai.OpenAI(base_url=srv.base_url, api_key="sk-test", max_retries=0)
        try:
            reply = client.completions.create(model="gpt-3.5-turbo-instruct", prompt=prompt)
        finally:
            client.close()
    (spans,) = traces(rec).values()
    attrs = spans[0].attributes
    assert attrs["llm.prompts.0.prompt.text"] == prompt
    assert attrs["llm.choices.0.completion.text"] == ANSWER

    ex = extract(spans)

    assert ex.sample is not None, (ex.reason, ex.meta.sources)
    assert ex.sample.question == QUESTION
    assert tuple(ex.sample.contexts) == hits
    assert ex.sample.answer == reply.choices[0].text == ANSWER
    assert dict(ex.meta.sources) == {"question": "prompt:llm.prompts",
                                     "contexts": "prompt:llm.prompts", "answer": "llm:llm.choices"}


# -- OpenLIT ------------------------------------------------------------------------------------


@contextmanager
def _openlit(instrumentor_cls: Any, rec: Recorder) -> Iterator[None]:
    """One OpenLIT instrumentor with content capture on, as ``openlit.init()`` sets it up, for
    ``rec``'s provider. OpenLIT 1.45 takes its tracer from the global provider
    (``trace.get_tracer(__name__)`` in ``_instrument``); handing it ``rec``'s tracer there is
    what a global ``trace.set_tracer_provider(rec.provider)`` would do, without making this
    test process's global provider permanent (the API sets it once per process)."""
    from openlit._config import OpenlitConfig
    from opentelemetry import trace

    OpenlitConfig()  # openlit.init() creates the config singleton the instrumentors read
    instrumentor = instrumentor_cls()
    global_get_tracer = trace.get_tracer
    trace.get_tracer = lambda name, *a, **k: rec.provider.get_tracer(name, *a, **k)
    try:
        instrumentor.instrument(environment="test", application_name="compat-app",
                                capture_message_content=True, disable_metrics=True,
                                pricing_info={})
    finally:
        trace.get_tracer = global_get_tracer
    try:
        yield
    finally:
        uninstrument(instrumentor)


def test_openlit_openai(rec: Recorder, openai_server: FakeOpenAIServer) -> None:
    from openlit.instrumentation.openai import OpenAIInstrumentor

    with _openlit(OpenAIInstrumentor, rec):
        seen = apps.openai_rag(openai_server.base_url)
    (spans,) = traces(rec).values()

    ex = extract(spans)

    _assert_sample_is(ex, seen)
    assert dict(ex.meta.sources) == {"question": "llm:gen_ai.input.messages",
                                     "contexts": "prompt:gen_ai.input.messages",
                                     "answer": "llm:gen_ai.output.messages"}
    assert ex.meta.model == MODEL


def test_openlit_langchain_in_a_request_span(rec: Recorder) -> None:
    """The LangChain RAG tutorial chain inside the app's request span (what a web framework's
    instrumentation, which ``openlit.init()`` also installs, makes): one trace, contexts from
    the retrieval span's ``gen_ai.retrieval.documents`` (content, no score)."""
    from openlit.instrumentation.langchain import LangChainInstrumentor

    with _openlit(LangChainInstrumentor, rec), rec.tracer.start_as_current_span("POST /ask"):
        seen = apps.langchain_rag()
    (spans,) = traces(rec).values()
    retrieval = next(s for s in spans if s.attributes.get("gen_ai.operation.name") == "retrieval")
    docs = json.loads(str(retrieval.attributes["gen_ai.retrieval.documents"]))
    assert [d["content"] for d in docs] == list(seen.contexts) and "score" not in docs[0]

    ex = extract(spans)

    _assert_sample_is(ex, seen)
    assert dict(ex.meta.sources) == {"question": "retrieval:query",
                                     "contexts": "gen_ai.retrieval.documents",
                                     "answer": "llm:gen_ai.output.messages"}


def test_openlit_langchain_bare_chain_splits_the_trace(rec: Recorder) -> None:
    """Without a parent span, OpenLIT 1.45 makes no span for the LCEL chain itself
    (``RunnableSequence`` is skipped as plumbing), so the retriever and the chat model are two
    traces: the chat trace is scored (contexts from its prompt), the retrieval-only trace is a
    ``no_answer`` null row. docs/instrumentation.md says so."""
    from openlit.instrumentation.langchain import LangChainInstrumentor

    with _openlit(LangChainInstrumentor, rec):
        seen = apps.langchain_rag()
    by_root = {next(s for s in t if s.parent_span_id is None).name: t
               for t in traces(rec).values()}
    assert sorted(by_root) == ["chat FakeListChatModel", "retrieval VectorStoreRetriever"]

    chat = extract(by_root["chat FakeListChatModel"])
    assert chat.sample is not None, (chat.reason, chat.meta.sources)
    assert (chat.sample.question, tuple(chat.sample.contexts), chat.sample.answer) == (
        seen.question, seen.contexts, seen.answer)
    assert chat.meta.sources["contexts"] == "prompt:gen_ai.input.messages"
    retrieval = extract(by_root["retrieval VectorStoreRetriever"])
    assert retrieval.sample is None and retrieval.reason == "no_answer"


# -- OpenLLMetry's openai instrumentor ------------------------------------------------------------


@pytest.mark.parametrize("use_attributes", [True, False])
def test_openllmetry_openai(rec: Recorder, openai_server: FakeOpenAIServer,
                            use_attributes: bool) -> None:
    """opentelemetry-instrumentation-openai 0.62.4 writes ``gen_ai.input``/``output.messages``
    by default; ``use_attributes=False`` sends the text to log events instead, which leaves the
    span without text (``content_not_captured``)."""
    from opentelemetry.instrumentation.openai import OpenAIInstrumentor

    with instrumented(OpenAIInstrumentor(use_attributes=use_attributes), rec):
        seen = apps.openai_rag(openai_server.base_url)
    (spans,) = traces(rec).values()

    ex = extract(spans)

    if not use_attributes:
        assert ex.sample is None and ex.reason == CONTENT_NOT_CAPTURED
        return
    _assert_sample_is(ex, seen)
    assert ex.meta.sources["answer"] == "llm:gen_ai.output.messages"


# -- OpenLLMetry's legacy flattened attributes (the cohere instrumentor) ----------------------------


class _CohereServer(_CompletionsServer):
    """Cohere's v2 chat endpoint on loopback (``POST /v2/chat``): every reply is ANSWER."""

    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["Content-Length"]))
                out = json.dumps({
                    "id": "c-1", "finish_reason": "COMPLETE",
                    "message": {"role": "assistant", "content": [{"type": "text", "text": ANSWER}]},
                    "usage": {"billed_units": {"input_tokens": 40, "output_tokens": 12},
                              "tokens": {"input_tokens": 40, "output_tokens": 12}},
                }).encode()
                self.send_response(200 if self.path == "/v2/chat" else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)


def test_openllmetry_legacy_flattened_prompts(rec: Recorder) -> None:
    """opentelemetry-instrumentation-cohere 0.62.4 has not moved to ``gen_ai.input.messages``:
    it writes ``gen_ai.prompt.<i>.role/content`` and ``gen_ai.completion.<i>.content`` (here a
    JSON list of content parts, as Cohere's v2 message holds them)."""
    import cohere
    from opentelemetry.instrumentation.cohere import CohereInstrumentor

    hits = DOCS[:2]
    messages = [{"role": "system", "content": SYSTEM + "\n\nContext:\n" + "\n\n".join(hits)},
                {"role": "user", "content": QUESTION}]
    with _CohereServer() as srv, instrumented(CohereInstrumentor(), rec):
        client = cohere.ClientV2(api_key="test", base_url=srv.base_url)
        reply = client.chat(model="command-r", messages=messages)  # type: ignore[arg-type]
    (spans,) = traces(rec).values()
    attrs = spans[0].attributes
    assert attrs["gen_ai.prompt.1.content"] == QUESTION and "gen_ai.input.messages" not in attrs

    ex = extract(spans)

    assert ex.sample is not None, (ex.reason, ex.meta.sources)
    assert (ex.sample.question, tuple(ex.sample.contexts)) == (QUESTION, hits)
    assert ex.sample.answer == reply.message.content[0].text == ANSWER  # type: ignore[index,union-attr]
    assert dict(ex.meta.sources) == {"question": "llm:gen_ai.prompt.<i>",
                                     "contexts": "prompt:gen_ai.prompt.<i>",
                                     "answer": "llm:gen_ai.completion.<i>"}
    assert ex.meta.model == "command-r"


def test_openlit_haystack_records_no_text(rec: Recorder, openai_server: FakeOpenAIServer,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """OpenLIT 1.45.0's Haystack instrumentor on haystack-ai 3.4.1 makes the retrieval, chat and
    workflow spans but writes no text on them, content capture on or not: the trace is
    ``content_not_captured`` (docs/instrumentation.md lists it)."""
    monkeypatch.setenv("HAYSTACK_TELEMETRY_ENABLED", "False")
    from openlit.instrumentation.haystack import HaystackInstrumentor

    with _openlit(HaystackInstrumentor, rec), rec.tracer.start_as_current_span("POST /ask"):
        seen = apps.haystack_rag(openai_server.base_url)
    (spans,) = traces(rec).values()
    assert seen.answer == ANSWER and {"retrieval", "chat"} <= {
        s.attributes.get("gen_ai.operation.name") for s in spans}

    ex = extract(spans)

    assert ex.sample is None and ex.reason == CONTENT_NOT_CAPTURED
