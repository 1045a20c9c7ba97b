"""One RAG interaction written the way each instrumentation convention writes it.

Every writer records the SAME question, contexts (rank order) and answer through the real
OpenTelemetry SDK, shaped after the instrumentors' own code (SEMCONV.md cites the sources):
OpenInference (LangChain/LlamaIndex instrumentors), OTel GenAI (new, events, pre-1.37),
OpenLLMetry (new gen_ai messages, legacy flattened), vector-DB ``db.query.result`` events,
TruLens, and traces whose contexts exist only inside the final prompt.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from opentelemetry.trace import SpanKind

from .sdk import Recorder

QUESTION = "What is the boiling point of water at sea level?"
DOCS = (
    "Water boils at 100 °C (212 °F) at standard sea-level pressure.",
    "At higher altitudes the air pressure is lower, so water boils at a lower temperature.",
    "水は海抜0メートルで摂氏100度で沸騰する。",
)
ANSWER = "At sea level water boils at 100 °C (212 °F)."
MODEL = "gpt-4o-mini"
SYSTEM = "You answer questions using only the provided context."
CONTEXT_BLOCK = "\n\n".join(DOCS)
SYSTEM_WITH_CONTEXT = f"{SYSTEM}\n\nContext:\n{CONTEXT_BLOCK}"


def _genai_msgs(*msgs: tuple[str, str], finish: str | None = None) -> str:
    out = []
    for role, text in msgs:
        m = {"role": role, "parts": [{"type": "text", "content": text}]}
        if finish:
            m["finish_reason"] = finish
        out.append(m)
    return json.dumps(out, ensure_ascii=False)


def _oi_docs(prefix: str, docs: tuple[str, ...] | list[str]) -> dict[str, object]:
    attrs: dict[str, object] = {}
    for i, d in enumerate(docs):
        attrs[f"{prefix}.{i}.document.id"] = f"doc-{DOCS.index(d) if d in DOCS else 90 + i}"
        attrs[f"{prefix}.{i}.document.content"] = d
        attrs[f"{prefix}.{i}.document.score"] = 0.9 - i * 0.1
    return attrs


def _oi_llm(rec: Recorder, *, with_template: bool = False) -> None:
    attrs: dict[str, object] = {
        "openinference.span.kind": "LLM",
        "llm.model_name": MODEL,
        "llm.provider": "openai",
        "llm.input_messages.0.message.role": "system",
        "llm.input_messages.0.message.content": SYSTEM_WITH_CONTEXT,
        "llm.input_messages.1.message.role": "user",
        "llm.input_messages.1.message.content": QUESTION,
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": ANSWER,
        "llm.token_count.prompt": 120,
        "llm.token_count.completion": 14,
        "llm.prompt_template.version": "qa-v3",
        "input.value": json.dumps({"messages": [{"role": "user", "content": QUESTION}]}),
        "input.mime_type": "application/json",
    }
    with rec.span("ChatOpenAI", attrs):
        pass


def openinference(rec: Recorder) -> None:
    """LangChain through openinference-instrumentation-langchain."""
    with rec.span(
        "RetrievalQA",
        {
            "openinference.span.kind": "CHAIN",
            "input.value": QUESTION,
            "input.mime_type": "text/plain",
            "output.value": ANSWER,
        },
    ):
        with rec.span(
            "VectorStoreRetriever",
            {
                "openinference.span.kind": "RETRIEVER",
                "input.value": QUESTION,
                **_oi_docs("retrieval.documents", DOCS),
            },
        ):
            pass
        _oi_llm(rec)


def openinference_json_io(rec: Recorder) -> None:
    """LangChain create_retrieval_chain: root I/O are JSON objects (mime application/json)."""
    with rec.span(
        "RunnableSequence",
        {
            "openinference.span.kind": "CHAIN",
            "input.value": json.dumps({"input": QUESTION}),
            "input.mime_type": "application/json",
            "output.value": json.dumps({"input": QUESTION, "answer": ANSWER}, ensure_ascii=False),
            "output.mime_type": "application/json",
        },
    ):
        with rec.span(
            "VectorStoreRetriever",
            {
                "openinference.span.kind": "RETRIEVER",
                "input.value": QUESTION,
                **_oi_docs("retrieval.documents", DOCS),
            },
        ):
            pass
        _oi_llm(rec)


def openinference_reranker(rec: Recorder) -> None:
    """Retriever returns extra candidates; the RERANKER output is what the LLM saw."""
    candidates = [
        "Unrelated: the Eiffel Tower is in Paris.",
        DOCS[2],
        DOCS[0],
        "Noise about tea.",
        DOCS[1],
    ]
    with rec.span(
        "query",
        {"openinference.span.kind": "CHAIN", "input.value": QUESTION, "output.value": ANSWER},
    ):
        with rec.span(
            "retrieve",
            {
                "openinference.span.kind": "RETRIEVER",
                "input.value": QUESTION,
                **_oi_docs("retrieval.documents", candidates),
            },
        ):
            pass
        with rec.span(
            "rerank",
            {
                "openinference.span.kind": "RERANKER",
                "reranker.query": QUESTION,
                "reranker.model_name": "bge-reranker",
                "reranker.top_k": 3,
                **_oi_docs("reranker.input_documents", candidates),
                **_oi_docs("reranker.output_documents", DOCS),
            },
        ):
            pass
        _oi_llm(rec)


def openinference_legacy(rec: Recorder) -> None:
    """Older OpenInference completions: llm.prompts / llm.choices; the root has no output."""
    with rec.span("query", {"openinference.span.kind": "CHAIN", "input.value": QUESTION}):
        with rec.span(
            "retrieve",
            {
                "openinference.span.kind": "RETRIEVER",
                "input.value": QUESTION,
                **_oi_docs("retrieval.documents", DOCS),
            },
        ):
            pass
        with rec.span(
            "OpenAI",
            {
                "openinference.span.kind": "LLM",
                "llm.model_name": MODEL,
                "llm.prompts.0.prompt.text": f"{SYSTEM_WITH_CONTEXT}\n\nQuestion: {QUESTION}",
                "llm.choices.0.completion.text": ANSWER,
            },
        ):
            pass


def _http_root(rec: Recorder):  # type: ignore[no-untyped-def]
    return rec.span(
        "POST /ask", {"http.request.method": "POST", "url.path": "/ask"}, kind=SpanKind.SERVER
    )


def genai_attributes(rec: Recorder) -> None:
    """OTel GenAI (>= 1.37, content opt-in): retrieval span + chat span with JSON messages."""
    with _http_root(rec):
        docs = [
            {"id": f"doc-{i}", "score": 0.9 - i * 0.1, "content": d} for i, d in enumerate(DOCS)
        ]
        with rec.span(
            "retrieval kb",
            {
                "gen_ai.operation.name": "retrieval",
                "gen_ai.data_source.id": "kb",
                "gen_ai.retrieval.query.text": QUESTION,
                "gen_ai.request.top_k": 3,
                "gen_ai.retrieval.documents": json.dumps(docs, ensure_ascii=False),
            },
            kind=SpanKind.CLIENT,
        ):
            pass
        with rec.span(
            f"chat {MODEL}",
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "openai",
                "gen_ai.request.model": MODEL,
                "gen_ai.response.model": MODEL + "-2024-07-18",
                "gen_ai.system_instructions": json.dumps([{"type": "text", "content": SYSTEM}]),
                "gen_ai.input.messages": _genai_msgs(
                    ("user", f"Context:\n{CONTEXT_BLOCK}\n\nQuestion: {QUESTION}")
                ),
                "gen_ai.output.messages": _genai_msgs(("assistant", ANSWER), finish="stop"),
                "gen_ai.usage.input_tokens": 120,
                "gen_ai.usage.output_tokens": 14,
            },
            kind=SpanKind.CLIENT,
        ):
            pass


def genai_events(rec: Recorder) -> None:
    """OTel GenAI content on the ``gen_ai.client.inference.operation.details`` event."""
    with _http_root(rec):
        docs = [{"id": f"doc-{i}", "score": 0.5, "content": d} for i, d in enumerate(DOCS)]
        with rec.span(
            "retrieval kb",
            {
                "gen_ai.operation.name": "retrieval",
                "gen_ai.retrieval.query.text": QUESTION,
                "gen_ai.retrieval.documents": json.dumps(docs, ensure_ascii=False),
            },
            kind=SpanKind.CLIENT,
        ):
            pass
        with rec.span(
            f"chat {MODEL}",
            {"gen_ai.operation.name": "chat", "gen_ai.request.model": MODEL},
            kind=SpanKind.CLIENT,
        ) as s:
            rec.event(
                s,
                "gen_ai.client.inference.operation.details",
                {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.input.messages": _genai_msgs(("system", SYSTEM), ("user", QUESTION)),
                    "gen_ai.output.messages": _genai_msgs(("assistant", ANSWER), finish="stop"),
                },
            )


def genai_legacy_attributes(rec: Recorder) -> None:
    """Pre-1.37 GenAI: ``gen_ai.system`` and the deprecated ``gen_ai.prompt``/``gen_ai.completion``."""
    with _http_root(rec):
        docs = [
            {"id": f"doc-{i}", "content": d} for i, d in enumerate(DOCS)
        ]  # no score: langchain genai
        with rec.span(
            "retrieval",
            {
                "gen_ai.operation.name": "retrieval",
                "gen_ai.retrieval.query.text": QUESTION,
                "gen_ai.retrieval.documents": json.dumps(docs, ensure_ascii=False),
            },
        ):
            pass
        with rec.span(
            f"chat {MODEL}",
            {
                "gen_ai.system": "openai",
                "gen_ai.request.model": MODEL,
                "gen_ai.prompt": json.dumps(
                    [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]
                ),
                "gen_ai.completion": json.dumps(
                    [{"role": "assistant", "content": ANSWER}], ensure_ascii=False
                ),
                "gen_ai.usage.prompt_tokens": 120,
                "gen_ai.usage.completion_tokens": 14,
            },
        ):
            pass


def genai_legacy_events(rec: Recorder) -> None:
    """Pre-1.37 GenAI events on the span: gen_ai.system.message / gen_ai.user.message / gen_ai.choice."""
    with _http_root(rec):
        docs = [{"id": f"doc-{i}", "content": d} for i, d in enumerate(DOCS)]
        with rec.span(
            "retrieval",
            {
                "gen_ai.operation.name": "retrieval",
                "gen_ai.retrieval.query.text": QUESTION,
                "gen_ai.retrieval.documents": json.dumps(docs, ensure_ascii=False),
            },
        ):
            pass
        with rec.span(
            f"chat {MODEL}",
            {
                "gen_ai.system": "openai",
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": MODEL,
            },
        ) as s:
            rec.event(s, "gen_ai.system.message", {"gen_ai.system": "openai", "content": SYSTEM})
            rec.event(s, "gen_ai.user.message", {"gen_ai.system": "openai", "content": QUESTION})
            rec.event(
                s,
                "gen_ai.choice",
                {
                    "gen_ai.system": "openai",
                    "index": 0,
                    "finish_reason": "stop",
                    "message": json.dumps(
                        {"role": "assistant", "content": ANSWER}, ensure_ascii=False
                    ),
                },
            )


def _traceloop_retriever(rec: Recorder) -> None:
    out = {
        "documents": [
            {"page_content": d, "metadata": {"source": f"kb/{i}.md"}} for i, d in enumerate(DOCS)
        ],
        "count": len(DOCS),
    }
    with rec.span(
        "vector_db_retrieve VectorStoreRetriever",
        {
            "traceloop.span.kind": "task",
            "traceloop.entity.name": "VectorStoreRetriever",
            "gen_ai.operation.name": "vector_db_retrieve",
            "traceloop.entity.input": json.dumps({"query": QUESTION, "tags": [], "metadata": {}}),
            "traceloop.entity.output": json.dumps(out, ensure_ascii=False),
        },
    ):
        pass


def openllmetry(rec: Recorder) -> None:
    """OpenLLMetry after the 2026 gen_ai migration: workflow root, vector_db_retrieve task, gen_ai messages."""
    with rec.span(
        "rag_pipeline.workflow",
        {
            "traceloop.span.kind": "workflow",
            "traceloop.workflow.name": "rag_pipeline",
            "traceloop.entity.name": "rag_pipeline",
            "traceloop.entity.version": 2,
            "traceloop.entity.input": json.dumps({"args": [QUESTION], "kwargs": {}}),
            "traceloop.entity.output": json.dumps(ANSWER, ensure_ascii=False),
        },
    ):
        _traceloop_retriever(rec)
        with rec.span(
            "openai.chat",
            {
                "llm.request.type": "chat",
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "openai",
                "gen_ai.request.model": MODEL,
                "gen_ai.input.messages": _genai_msgs(
                    ("system", SYSTEM_WITH_CONTEXT), ("user", QUESTION)
                ),
                "gen_ai.output.messages": _genai_msgs(("assistant", ANSWER), finish="stop"),
                "gen_ai.usage.input_tokens": 120,
                "gen_ai.usage.output_tokens": 14,
            },
            kind=SpanKind.CLIENT,
        ):
            pass


def openllmetry_legacy(rec: Recorder) -> None:
    """OpenLLMetry's flattened gen_ai.prompt.<i>/gen_ai.completion.<i>; the workflow has no output."""
    with rec.span(
        "rag_pipeline.workflow",
        {
            "traceloop.span.kind": "workflow",
            "traceloop.workflow.name": "rag_pipeline",
            "traceloop.entity.input": json.dumps({"args": [], "kwargs": {"question": QUESTION}}),
        },
    ):
        _traceloop_retriever(rec)
        with rec.span(
            "openai.chat",
            {
                "llm.request.type": "chat",
                "gen_ai.system": "openai",
                "gen_ai.request.model": MODEL,
                "gen_ai.prompt.0.role": "system",
                "gen_ai.prompt.0.content": SYSTEM_WITH_CONTEXT,
                "gen_ai.prompt.1.role": "user",
                "gen_ai.prompt.1.content": QUESTION,
                "gen_ai.completion.0.role": "assistant",
                "gen_ai.completion.0.content": ANSWER,
                "gen_ai.completion.0.finish_reason": "stop",
                "gen_ai.usage.prompt_tokens": 120,
                "gen_ai.usage.completion_tokens": 14,
                "llm.usage.total_tokens": 134,
            },
            kind=SpanKind.CLIENT,
        ):
            pass


def db_query_result_events(rec: Recorder) -> None:
    """A vector-DB client span (OpenLLMetry chroma) with one db.query.result event per document."""
    with _http_root(rec):
        with rec.span(
            "chroma.query",
            {"db.system": "chroma", "db.operation": "query", "db.vector.query.top_k": 3},
            kind=SpanKind.CLIENT,
        ) as s:
            for i, d in enumerate(DOCS):
                rec.event(
                    s,
                    "db.query.result",
                    {
                        "db.query.result.id": f"doc-{i}",
                        "db.query.result.distance": 0.1 * i,
                        "db.query.result.document": d,
                    },
                )
        with rec.span(
            "openai.chat",
            {
                "llm.request.type": "chat",
                "gen_ai.system": "openai",
                "gen_ai.request.model": MODEL,
                "gen_ai.prompt.0.role": "system",
                "gen_ai.prompt.0.content": SYSTEM_WITH_CONTEXT,
                "gen_ai.prompt.1.role": "user",
                "gen_ai.prompt.1.content": QUESTION,
                "gen_ai.completion.0.role": "assistant",
                "gen_ai.completion.0.content": ANSWER,
            },
            kind=SpanKind.CLIENT,
        ):
            pass


def trulens(rec: Recorder) -> None:
    with (
        rec.span(
            "record_root",
            {
                "ai.observability.span_type": "record_root",
                "ai.observability.record_root.input": QUESTION,
                "ai.observability.record_root.output": ANSWER,
            },
        ),
        rec.span(
            "retrieve",
            {
                "ai.observability.span_type": "retrieval",
                "ai.observability.retrieval.query_text": QUESTION,
                "ai.observability.retrieval.retrieved_contexts": list(DOCS),
            },
        ),
    ):
        pass


def prompt_fallback_variables(rec: Recorder) -> None:
    """OpenInference with retrieval content hidden: contexts only in llm.prompt_template.variables."""
    with rec.span(
        "query",
        {"openinference.span.kind": "CHAIN", "input.value": QUESTION, "output.value": ANSWER},
    ):
        with rec.span(
            "retrieve",
            {
                "openinference.span.kind": "RETRIEVER",
                "retrieval.documents.0.document.id": "doc-0",
                "retrieval.documents.0.document.score": 0.9,
            },
        ):
            pass
        with rec.span(
            "llm",
            {
                "openinference.span.kind": "LLM",
                "llm.model_name": MODEL,
                "llm.prompt_template.template": "Context:\n{context}\n\nQuestion: {question}",
                "llm.prompt_template.variables": json.dumps(
                    {"context": CONTEXT_BLOCK, "question": QUESTION}, ensure_ascii=False
                ),
                "llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.content": ANSWER,
            },
        ):
            pass


def prompt_fallback_message(rec: Recorder) -> None:
    """GenAI retrieval documents carrying only {id, score} (the schema's required fields): the
    contexts sit in the system instructions, the question is the user message."""
    with _http_root(rec):
        docs = [{"id": f"doc-{i}", "score": 0.9 - i * 0.1} for i in range(len(DOCS))]
        with rec.span(
            "retrieval kb",
            {"gen_ai.operation.name": "retrieval", "gen_ai.retrieval.documents": json.dumps(docs)},
        ):
            pass
        with rec.span(
            f"chat {MODEL}",
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": MODEL,
                "gen_ai.system_instructions": json.dumps(
                    [{"type": "text", "content": SYSTEM_WITH_CONTEXT}], ensure_ascii=False
                ),
                "gen_ai.input.messages": _genai_msgs(("user", QUESTION)),
                "gen_ai.output.messages": _genai_msgs(("assistant", ANSWER)),
            },
        ):
            pass


def prompt_fallback_llamaindex(rec: Recorder) -> None:
    """A bare LLM span (no root chain, no retriever span) with LlamaIndex's default QA template filled."""
    prompt = (
        "Context information is below.\n---------------------\n"
        f"{CONTEXT_BLOCK}\n---------------------\n"
        "Given the context information and not prior knowledge, answer the query.\n"
        f"Query: {QUESTION}\nAnswer: "
    )
    with rec.span(
        "OpenAI.chat",
        {
            "openinference.span.kind": "LLM",
            "llm.model_name": MODEL,
            "llm.input_messages.0.message.role": "user",
            "llm.input_messages.0.message.content": prompt,
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": ANSWER,
        },
    ):
        pass


def openinference_multimodal(rec: Recorder) -> None:
    """OpenInference LLM messages as content parts (message.contents.<j>.message_content.*)."""
    with rec.span(
        "query",
        {"openinference.span.kind": "CHAIN", "input.value": QUESTION},
    ):
        with rec.span(
            "retrieve",
            {"openinference.span.kind": "RETRIEVER", **_oi_docs("retrieval.documents", DOCS)},
        ):
            pass
        p = "llm.output_messages.0.message."
        with rec.span(
            "llm",
            {
                "openinference.span.kind": "LLM",
                "llm.model_name": MODEL,
                "llm.input_messages.0.message.role": "user",
                "llm.input_messages.0.message.contents.0.message_content.type": "text",
                "llm.input_messages.0.message.contents.0.message_content.text": QUESTION,
                "llm.input_messages.0.message.contents.1.message_content.type": "image",
                "llm.input_messages.0.message.contents.1.message_content.image.image.url": "x.png",
                p + "role": "assistant",
                p + "contents.0.message_content.type": "text",
                p + "contents.0.message_content.text": ANSWER,
            },
        ):
            pass


def openlit_events(rec: Recorder) -> None:
    """OpenLIT: gen_ai.retrieval.* on the retriever (content, no score) and the pre-1.37 content
    events gen_ai.content.prompt / gen_ai.content.completion on the chat span."""
    with _http_root(rec):
        docs = [{"content": d, "id": f"doc-{i}"} for i, d in enumerate(DOCS)]
        with rec.span(
            "langchain.retrieve",
            {
                "gen_ai.operation.name": "retrieve",
                "gen_ai.retrieval.query.text": QUESTION,
                "gen_ai.retrieval.documents": json.dumps(docs, ensure_ascii=False),
            },
        ):
            pass
        with rec.span(
            f"chat {MODEL}", {"gen_ai.operation.name": "chat", "gen_ai.request.model": MODEL}
        ) as s:
            rec.event(s, "gen_ai.content.prompt", {"gen_ai.prompt": f"user: {QUESTION}"})
            rec.event(s, "gen_ai.content.completion", {"gen_ai.completion": ANSWER})


def confident(rec: Recorder) -> None:
    """Confident AI (deepeval) trace attributes."""
    with rec.span(
        "llm_app",
        {
            "confident.span.type": "agent",
            "confident.trace.input": QUESTION,
            "confident.trace.output": ANSWER,
        },
    ):
        with rec.span(
            "retriever",
            {"confident.span.type": "retriever", "confident.span.retrieval_context": list(DOCS)},
        ):
            pass
        with rec.span("llm", {"confident.span.type": "llm", "gen_ai.request.model": MODEL}):
            pass


def openllmetry_llamaindex(rec: Recorder) -> None:
    """OpenLLMetry on a LlamaIndex query engine, for real: opentelemetry-instrumentation-llamaindex
    (the compat extra's pin) instruments ``index.as_query_engine().query(QUESTION)``. It writes
    no operation name on the retriever's ``VectorIndexRetriever.task`` span, and its
    ``traceloop.entity.output`` is a list of strings, each a JSON-encoded ``NodeWithScore``.

    The app's own embedding ranks DOCS in order (DOCS[i] sits i/4 rad from every query) and its
    LLM answers ANSWER; the index is built before instrumenting, so the query is the only trace.
    """
    import math

    from llama_index.core import Document, VectorStoreIndex
    from llama_index.core.embeddings import BaseEmbedding
    from llama_index.core.llms import CompletionResponse, CustomLLM, LLMMetadata
    from llama_index.core.llms.callbacks import llm_completion_callback
    from opentelemetry.instrumentation.llamaindex import LlamaIndexInstrumentor

    from tests.compat.harness import instrumented

    class RankedEmbedding(BaseEmbedding):
        def _vector(self, text: str) -> list[float]:
            a = DOCS.index(text) / 4 if text in DOCS else 0.0
            return [math.cos(a), math.sin(a)]

        def _get_text_embedding(self, text: str) -> list[float]:
            return self._vector(text)

        def _get_query_embedding(self, query: str) -> list[float]:
            return self._vector(query)

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return self._vector(query)

    class FixedLLM(CustomLLM):
        @property
        def metadata(self) -> LLMMetadata:
            return LLMMetadata(model_name=MODEL)

        @llm_completion_callback()
        def complete(self, prompt: str, formatted: bool = False, **kwargs: object) -> CompletionResponse:
            return CompletionResponse(text=ANSWER)

        @llm_completion_callback()
        def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: object):  # type: ignore[no-untyped-def]
            yield CompletionResponse(text=ANSWER, delta=ANSWER)

    index = VectorStoreIndex.from_documents(
        [Document(text=d) for d in DOCS], embed_model=RankedEmbedding()
    )
    engine = index.as_query_engine(llm=FixedLLM(), similarity_top_k=len(DOCS))
    with instrumented(LlamaIndexInstrumentor(), rec):
        engine.query(QUESTION)


WRITERS: dict[str, Callable[[Recorder], None]] = {
    f.__name__: f
    for f in (
        openinference,
        openinference_json_io,
        openinference_reranker,
        openinference_legacy,
        genai_attributes,
        genai_events,
        genai_legacy_attributes,
        genai_legacy_events,
        openllmetry,
        openllmetry_legacy,
        openllmetry_llamaindex,
        db_query_result_events,
        trulens,
        openinference_multimodal,
        openlit_events,
        confident,
        prompt_fallback_variables,
        prompt_fallback_message,
        prompt_fallback_llamaindex,
    )
}

# the row's model where it is not MODEL: TruLens spans name none; OpenLLMetry records no model
# for a LlamaIndex LLM driven through complete(), so the LLM span's class name stands in
MODELS: dict[str, str] = {"trulens": "", "openllmetry_llamaindex": "FixedLLM"}

# where each writer's text must come from: proves the intended path was taken, not a lucky fallback
EXPECTED_SOURCES: dict[str, dict[str, str]] = {
    "openllmetry_llamaindex": {
        "question": "root:traceloop.entity.input",
        "contexts": "traceloop.entity.output",
        "answer": "root:traceloop.entity.output",
    },
    "openinference_multimodal": {"answer": "llm:llm.output_messages"},
    "openlit_events": {
        "question": "retrieval:query",
        "answer": "llm:event:gen_ai.content.completion",
    },
    "confident": {
        "question": "root:confident.trace.input",
        "contexts": "confident.span.retrieval_context",
        "answer": "root:confident.trace.output",
    },
    "openinference": {
        "question": "root:input.value",
        "contexts": "retrieval.documents",
        "answer": "root:output.value",
    },
    "openinference_json_io": {
        "question": "root:input.value",
        "contexts": "retrieval.documents",
        "answer": "root:output.value",
    },
    "openinference_reranker": {"contexts": "reranker.output_documents"},
    "openinference_legacy": {"answer": "llm:llm.choices"},
    "genai_attributes": {
        "question": "retrieval:query",
        "contexts": "gen_ai.retrieval.documents",
        "answer": "llm:gen_ai.output.messages",
    },
    "genai_events": {"answer": "llm:event:gen_ai.client.inference.operation.details"},
    "genai_legacy_attributes": {"answer": "llm:gen_ai.completion"},
    "genai_legacy_events": {"answer": "llm:event:gen_ai.choice"},
    "openllmetry": {
        "question": "root:traceloop.entity.input",
        "contexts": "traceloop.entity.output",
        "answer": "root:traceloop.entity.output",
    },
    "openllmetry_legacy": {
        "question": "root:traceloop.entity.input",
        "answer": "llm:gen_ai.completion.<i>",
    },
    "db_query_result_events": {
        "question": "llm:gen_ai.prompt.<i>",
        "contexts": "event:db.query.result",
    },
    "trulens": {
        "question": "root:ai.observability.record_root.input",
        "contexts": "ai.observability.retrieval.retrieved_contexts",
    },
    "prompt_fallback_variables": {"contexts": "prompt:llm.prompt_template.variables"},
    "prompt_fallback_message": {
        "contexts": "prompt:gen_ai.input.messages",
        "question": "llm:gen_ai.input.messages",
    },
    "prompt_fallback_llamaindex": {
        "contexts": "prompt:llm.input_messages",
        "question": "prompt:llm.input_messages",
        "answer": "llm:llm.output_messages",
    },
}
