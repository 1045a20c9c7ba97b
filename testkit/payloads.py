"""Realistic OTLP trace requests built with the real protobuf classes (tests and bench/collector.py).

A RAG trace looks like what an instrumented FastAPI + LangChain app exports: an HTTP SERVER root
span from the web framework's scope, then OpenInference CHAIN, EMBEDDING, RETRIEVER (five
documents of a few hundred characters), RERANKER and LLM spans, plus a plain database span.
About 600 bytes per span on average, as measured for real SDK output (INFRA.md 4.3).
"""

from __future__ import annotations

import random
import time

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

WORDS = (
    "the retrieval augmented generation pipeline returns passages about invoices refunds shipping "
    "warranty policy customer account billing cycle subscription plan upgrade downgrade renewal "
    "東京 配送 返金 保証 請求書 アカウント"
).split()


_DAY_NS = 86_400 * 10**9
T0 = (time.time_ns() // _DAY_NS - 1) * _DAY_NS
"""Spans start at midnight UTC yesterday: inside the receiver's retention (otlp.max_span_age_days,
90 days) whenever the tests run, and the same value for a whole run."""


def _kv(key: str, value: object) -> KeyValue:
    if isinstance(value, bool):
        return KeyValue(key=key, value=AnyValue(bool_value=value))
    if isinstance(value, int):
        return KeyValue(key=key, value=AnyValue(int_value=value))
    if isinstance(value, float):
        return KeyValue(key=key, value=AnyValue(double_value=value))
    return KeyValue(key=key, value=AnyValue(string_value=str(value)))


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def _span(rng, trace_id, parent, name, kind, t0, attrs) -> Span:
    span = Span(
        trace_id=trace_id,
        span_id=rng.randbytes(8),
        parent_span_id=parent,
        name=name,
        kind=kind,
        start_time_unix_nano=t0,
        end_time_unix_nano=t0 + rng.randrange(1_000_000, 900_000_000),
    )
    span.attributes.extend(_kv(k, v) for k, v in attrs.items())
    return span


def rag_trace(rng: random.Random, t0: int = T0, *,
              words: int = 45) -> tuple[bytes, Span, list[Span], list[Span]]:
    """(trace id, HTTP root span, RAG spans, plain DB spans) of one RAG request; retrieved
    documents have ``words`` words each, the answer a little more."""
    tid = rng.randbytes(16)
    root = _span(rng, tid, b"", "POST /ask", Span.SPAN_KIND_SERVER, t0, {
        "http.request.method": "POST", "url.path": "/ask", "http.response.status_code": 200,
        "server.address": "rag-api.internal", "user_agent.original": "python-requests/2.32",
    })
    question = _text(rng, 12) + "?"
    chain = _span(rng, tid, root.span_id, "RetrievalQA", Span.SPAN_KIND_INTERNAL, t0 + 1000, {
        "openinference.span.kind": "CHAIN", "input.value": question, "output.value": _text(rng, words - 5),
    })
    emb = _span(rng, tid, chain.span_id, "embed", Span.SPAN_KIND_CLIENT, t0 + 2000, {
        "openinference.span.kind": "EMBEDDING", "embedding.model_name": "text-embedding-3-small",
        "embedding.embeddings.0.embedding.text": question,
    })
    retr_attrs: dict[str, object] = {"openinference.span.kind": "RETRIEVER", "input.value": question}
    for i in range(5):
        retr_attrs[f"retrieval.documents.{i}.document.id"] = f"doc-{rng.randrange(10**6)}"
        retr_attrs[f"retrieval.documents.{i}.document.content"] = _text(rng, words)
        retr_attrs[f"retrieval.documents.{i}.document.score"] = round(rng.random(), 4)
    retr = _span(rng, tid, chain.span_id, "retrieve", Span.SPAN_KIND_CLIENT, t0 + 3000, retr_attrs)
    rerank = _span(rng, tid, chain.span_id, "rerank", Span.SPAN_KIND_INTERNAL, t0 + 4000, {
        "openinference.span.kind": "RERANKER", "reranker.model_name": "bge-reranker-v2-m3",
        "reranker.top_k": 3,
    })
    llm = _span(rng, tid, chain.span_id, "ChatOpenAI", Span.SPAN_KIND_CLIENT, t0 + 5000, {
        "openinference.span.kind": "LLM", "llm.model_name": "gpt-4o-mini", "llm.provider": "openai",
        "llm.input_messages.0.message.role": "system",
        "llm.input_messages.0.message.content": "Answer from the context only.",
        "llm.input_messages.1.message.role": "user",
        "llm.input_messages.1.message.content": question,
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": _text(rng, words + 5),
        "llm.token_count.prompt": rng.randrange(300, 2000), "llm.token_count.completion": rng.randrange(20, 300),
    })
    db = _span(rng, tid, root.span_id, "SELECT users", Span.SPAN_KIND_CLIENT, t0 + 6000, {
        "db.system.name": "postgresql", "db.query.text": "SELECT id, plan FROM users WHERE id = $1",
    })
    return tid, root, [chain, emb, retr, rerank, llm], [db]


def plain_trace(rng: random.Random, t0: int = T0) -> tuple[bytes, list[Span]]:
    """A non-RAG trace: an HTTP request with two database calls."""
    tid = rng.randbytes(16)
    root = _span(rng, tid, b"", "GET /health", Span.SPAN_KIND_SERVER, t0, {
        "http.request.method": "GET", "url.path": "/health", "http.response.status_code": 200,
    })
    kids = [
        _span(rng, tid, root.span_id, "SELECT 1", Span.SPAN_KIND_CLIENT, t0 + 10, {
            "db.system.name": "postgresql", "db.query.text": "SELECT 1"}),
        _span(rng, tid, root.span_id, "GET", Span.SPAN_KIND_CLIENT, t0 + 20, {
            "http.request.method": "GET", "url.full": "http://cache.internal/ping"}),
    ]
    return tid, [root, *kids]


def rag_request(
    n_traces: int, seed: int = 0, *, plain_every: int = 0, services: int = 2,
    rag_only: bool = False, words: int = 45,
) -> ExportTraceServiceRequest:
    """A request with ``n_traces`` traces spread over ``services`` resources, SDK-shaped.

    Every ``plain_every``-th trace is a non-RAG one (0: none). Spans of one trace are spread
    over two scopes (the web framework's and the RAG instrumentation's) of one resource;
    ``rag_only`` keeps the five RAG spans of each trace (no HTTP root, no database span).
    ``words``: words per retrieved document.
    """
    rng = random.Random(seed)
    req = ExportTraceServiceRequest()
    groups = []
    for s in range(services):
        rs: ResourceSpans = req.resource_spans.add()
        rs.resource.attributes.extend([
            _kv("service.name", f"rag-api-{s}"), _kv("service.version", "1.4.2"),
            _kv("deployment.environment.name", "prod"), _kv("telemetry.sdk.language", "python"),
        ])
        rs.schema_url = "https://opentelemetry.io/schemas/1.26.0"
        web: ScopeSpans = rs.scope_spans.add()
        web.scope.name, web.scope.version = "opentelemetry.instrumentation.fastapi", "0.48b0"
        rag: ScopeSpans = rs.scope_spans.add()
        rag.scope.name, rag.scope.version = "openinference.instrumentation.langchain", "0.1.28"
        groups.append((web, rag))
    for i in range(n_traces):
        web, rag = groups[i % services]
        if plain_every and i % plain_every == plain_every - 1:
            _, spans = plain_trace(rng)
            web.spans.extend(spans)
        else:
            _, root, rag_spans, db = rag_trace(rng, words=words)
            rag.spans.extend(rag_spans)
            if not rag_only:
                web.spans.extend([root, *db])
    return req


def load_request(traces: int = 20, spans: int = 5, seed: int = 0) -> ExportTraceServiceRequest:
    """The request shape of the independent load tool (``../shared/bench/otlp_load.py``'s
    ``build``), with seeded ids: one resource and scope, ``traces`` traces of ``spans`` spans each
    (CHAIN root with input/output, RETRIEVER with three documents, LLM, then CHAIN steps with a
    200-byte input), string attributes only, about 380 bytes a span. bench/collector.py uses it
    so that its own senders and the independent tool drive the collectors with the same bytes
    (rotel's CPU per span more than doubles with ``rag_request``'s many typed attributes)."""
    rng = random.Random(seed)
    req = ExportTraceServiceRequest()
    rs = req.resource_spans.add()
    rs.resource.attributes.append(_kv("service.name", "load-rag-app"))
    ss = rs.scope_spans.add()
    now = T0
    for _ in range(traces):
        tid, root = rng.randbytes(16), rng.randbytes(8)
        for s in range(spans):
            sp = ss.spans.add()
            sp.trace_id, sp.span_id = tid, (root if s == 0 else rng.randbytes(8))
            if s:
                sp.parent_span_id = root
            sp.start_time_unix_nano, sp.end_time_unix_nano = now, now + 1_000_000
            if s == 0:
                sp.name = "rag-query"
                sp.attributes.extend([_kv("openinference.span.kind", "CHAIN"),
                                      _kv("input.value", "How tall is the Eiffel Tower? " * 3),
                                      _kv("output.value", "The Eiffel Tower is 330 metres tall. " * 3)])
            elif s == 1:
                sp.name = "retrieve"
                sp.attributes.append(_kv("openinference.span.kind", "RETRIEVER"))
                for j in range(3):
                    sp.attributes.append(_kv(f"retrieval.documents.{j}.document.content", "Paris facts and figures. " * 6))
            elif s == 2:
                sp.name = "llm"
                sp.attributes.extend([_kv("openinference.span.kind", "LLM"), _kv("llm.model_name", "gpt-4o-mini"),
                                      _kv("llm.output_messages.0.message.content", "The Eiffel Tower is 330 metres tall.")])
            else:
                sp.name = f"step-{s}"
                sp.attributes.extend([_kv("openinference.span.kind", "CHAIN"), _kv("input.value", "x" * 200)])
    return req
