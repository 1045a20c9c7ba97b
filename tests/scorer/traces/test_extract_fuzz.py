"""extract() never raises, whatever the attribute values: spans are untrusted input."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragpulse.scorer.traces import Span, SpanEvent, extract, split_prompt

KEYS = [
    "openinference.span.kind",
    "input.value",
    "output.value",
    "gen_ai.operation.name",
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.system_instructions",
    "gen_ai.retrieval.documents",
    "gen_ai.retrieval.query.text",
    "gen_ai.prompt",
    "gen_ai.completion",
    "gen_ai.prompt.0.content",
    "gen_ai.prompt.0.role",
    "gen_ai.completion.0.content",
    "llm.input_messages.0.message.content",
    "llm.input_messages.0.message.role",
    "llm.output_messages.0.message.content",
    "llm.output_messages.0.message.contents.0.message_content.text",
    "llm.prompts",
    "llm.prompts.0.prompt.text",
    "llm.choices.0.completion.text",
    "llm.model_name",
    "llm.prompt_template.variables",
    "llm.token_count.prompt",
    "gen_ai.usage.input_tokens",
    "retrieval.documents.0.document.content",
    "retrieval.documents",
    "reranker.output_documents.0.document.content",
    "reranker.input_documents.0.document.content",
    "reranker.query",
    "traceloop.entity.input",
    "traceloop.entity.output",
    "gen_ai.task.output",
    "gen_ai.tool.type",
    "gen_ai.tool.call.result",
    "ai.observability.span_type",
    "ai.observability.retrieval.retrieved_contexts",
    "confident.span.retrieval_context",
    "confident.trace.input",
    "ragpulse.feedback.score",
    "ragpulse.feedback.label",
    "ragpulse.prompt.version",
    "retriever.version",
    "session.id",
    "llm.request.type",
]
KINDS = ["LLM", "RETRIEVER", "RERANKER", "CHAIN", "retrieval", "chat", "execute_tool", "datastore"]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "role",
                    "content",
                    "parts",
                    "type",
                    "text",
                    "messages",
                    "documents",
                    "page_content",
                    "kwargs",
                    "args",
                    "question",
                    "answer",
                    "message",
                    "id",
                ]
            ),
            inner,
            max_size=4,
        )
    ),
    max_leaves=12,
)
scalars = st.one_of(
    st.text(max_size=40),
    st.integers(),
    st.floats(allow_nan=False),
    st.booleans(),
    st.binary(max_size=8),
    st.sampled_from(KINDS),
)
otlp_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
attr_values = st.one_of(
    otlp_values,
    json_values.map(json.dumps),
    st.sampled_from(
        ["[" * 5000, "{" * 3000 + "}", '{"content": ' * 2000, "[{broken", "Context:\n<document>a"]
    ),
)
attributes = st.dictionaries(st.sampled_from(KEYS), attr_values, max_size=8)
events = st.lists(
    st.builds(
        SpanEvent,
        st.sampled_from(
            [
                "gen_ai.choice",
                "gen_ai.user.message",
                "db.query.result",
                "gen_ai.client.inference.operation.details",
                "ragpulse.feedback",
                "gen_ai.content.completion",
            ]
        ),
        st.integers(0, 100),
        st.dictionaries(
            st.sampled_from(
                [
                    "content",
                    "message",
                    "gen_ai.input.messages",
                    "gen_ai.output.messages",
                    "db.query.result.document",
                    "score",
                    "label",
                    "gen_ai.completion",
                ]
            ),
            attr_values,
            max_size=3,
        ),
    ),
    max_size=3,
)


@st.composite
def traces(draw: st.DrawFn) -> list[Span]:
    n = draw(st.integers(1, 5))
    spans = []
    for i in range(n):
        parent = None if i == 0 else format(draw(st.integers(1, n)), "016x")
        start = draw(st.integers(0, 50))
        spans.append(
            Span(
                trace_id="ab" * 16,
                span_id=format(i + 1, "016x"),
                parent_span_id=parent,
                name=draw(st.sampled_from(["root", "vector_db_retrieve x", "chat m", "llm"])),
                start_ns=start,
                end_ns=start + draw(st.integers(0, 50)),
                status_code=draw(st.integers(0, 2)),
                attributes=draw(attributes),
                events=tuple(draw(events)),
                resource=draw(
                    st.dictionaries(
                        st.sampled_from(["service.name", "deployment.environment"]),
                        otlp_values,
                        max_size=2,
                    )
                ),
            )
        )
    return spans


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(traces())
def test_extract_never_raises(spans: list[Span]) -> None:
    ex = extract(spans)
    assert ex.trace_id == "ab" * 16
    if ex.sample is not None:
        assert ex.sample.question.strip() and ex.sample.answer.strip()
        assert all(isinstance(c, str) and c.strip() for c in ex.sample.contexts)
    else:
        assert ex.reason in (
            "no_question", "no_answer", "no_contexts", "content_not_captured", "not_rag"
        )


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("<>/contextdument:-\n []1Q?#*")), max_size=300))
def test_split_prompt_never_raises(text: str) -> None:
    contexts, question = split_prompt(text)
    assert all(c.strip() for c in contexts)
    assert question is None or question.strip()
