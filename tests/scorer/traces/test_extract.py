"""Extraction edge cases: missing parts, odd types, ordering, dedupe, rerankers, metadata, feedback."""

from __future__ import annotations

import json

import pytest
from opentelemetry.trace import SpanKind

from ragpulse.scorer.model import Reason
from ragpulse.scorer.traces import ExtractionSettings, Span, SpanEvent, extract, split_prompt

from .conventions import ANSWER, DOCS, QUESTION, WRITERS, _oi_docs
from .sdk import Recorder, one_trace, to_record


def _run(rec: Recorder, settings: ExtractionSettings | None = None):  # type: ignore[no-untyped-def]
    return extract(one_trace(to_record(rec.finished())), settings)


def test_no_spans() -> None:
    ex = extract([])
    assert ex.sample is None and ex.reason == "no_spans" and not ex.ok


def test_no_contexts_reason_and_optional() -> None:
    rec = Recorder()
    with (
        rec.span(
            "chat",
            {"openinference.span.kind": "CHAIN", "input.value": QUESTION, "output.value": ANSWER},
        ),
        rec.span(
            "llm",
            {
                "openinference.span.kind": "LLM",
                "llm.input_messages.0.message.role": "user",
                "llm.input_messages.0.message.content": QUESTION,
            },
        ),
    ):
        pass
    spans = one_trace(to_record(rec.finished()))

    ex = extract(spans)
    relaxed = extract(spans, ExtractionSettings(require_contexts=False))

    assert ex.reason == Reason.NO_CONTEXTS.value and ex.sample is None
    assert (
        relaxed.sample is not None
        and relaxed.sample.contexts == ()
        and relaxed.sample.answer == ANSWER
    )


def test_no_answer_when_the_llm_failed() -> None:
    rec = Recorder()
    with rec.span(
        "query", {"openinference.span.kind": "CHAIN", "input.value": QUESTION}, error="upstream 500"
    ):
        with rec.span(
            "retrieve",
            {"openinference.span.kind": "RETRIEVER", **_oi_docs("retrieval.documents", DOCS)},
        ):
            pass
        with rec.span(
            "llm", {"openinference.span.kind": "LLM", "llm.model_name": "m"}, error="rate limited"
        ):
            pass

    ex = _run(rec)

    assert ex.reason == Reason.NO_ANSWER.value
    assert ex.meta.error and ex.meta.error_message == "upstream 500"  # the root's error wins


def test_no_question() -> None:
    rec = Recorder()
    with rec.span("job", {}):
        with rec.span(
            "retrieve",
            {"openinference.span.kind": "RETRIEVER", **_oi_docs("retrieval.documents", DOCS)},
        ):
            pass
        with rec.span(
            "llm",
            {
                "openinference.span.kind": "LLM",
                "llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.content": ANSWER,
            },
        ):
            pass
    assert _run(rec).reason == Reason.NO_QUESTION.value


def test_attributes_of_unexpected_types_are_skipped() -> None:
    rec = Recorder()
    with rec.span(
        "query",
        {"openinference.span.kind": "CHAIN", "input.value": 42, "output.value": ["not", "text"]},
    ):
        with rec.span(
            "retrieve",
            {
                "openinference.span.kind": "RETRIEVER",
                "input.value": QUESTION,
                "retrieval.documents.0.document.content": DOCS[0],
                "retrieval.documents.1.document.content": 7,  # not text: skipped
                "retrieval.documents.x.document.content": "bad index",  # not an index: ignored
                "retrieval.documents.2.document.content": DOCS[1],
            },
        ):
            pass
        with rec.span(
            "retrieve2",
            {"gen_ai.operation.name": "retrieval", "gen_ai.retrieval.documents": "{not json"},
        ):
            pass
        with rec.span(
            "llm",
            {
                "openinference.span.kind": "LLM",
                "llm.output_messages.0.message.content": [1, 2],  # array: no text
                "gen_ai.output.messages": json.dumps(
                    [
                        {
                            "role": "assistant",
                            "parts": [
                                {"type": "tool_call", "name": "x"},
                                {"type": "text", "content": ANSWER},
                            ],
                        }
                    ]
                ),
            },
        ):
            pass

    ex = _run(rec)

    assert ex.sample is not None
    assert ex.sample.question == QUESTION and ex.meta.sources["question"] == "retrieval:query"
    assert ex.sample.contexts == DOCS[:2]
    assert ex.sample.answer == ANSWER and ex.meta.sources["answer"] == "llm:gen_ai.output.messages"


def test_structured_kvlist_values_work_like_json() -> None:
    """Backends with structured attributes send gen_ai messages as arrays of kvlists, not JSON."""
    common = {"trace_id": "ab" * 16, "resource": {"service.name": "s"}}
    spans = [
        Span(span_id="01" * 8, parent_span_id=None, name="root", start_ns=1, end_ns=10, **common),
        Span(
            span_id="02" * 8,
            parent_span_id="01" * 8,
            name="retrieval",
            start_ns=2,
            end_ns=3,
            attributes={
                "gen_ai.operation.name": "retrieval",
                "gen_ai.retrieval.query.text": QUESTION,
                "gen_ai.retrieval.documents": tuple(
                    {"id": str(i), "content": d} for i, d in enumerate(DOCS)
                ),
            },
            **common,
        ),
        Span(
            span_id="03" * 8,
            parent_span_id="01" * 8,
            name="chat",
            start_ns=4,
            end_ns=9,
            attributes={"gen_ai.operation.name": "chat"},
            events=(
                SpanEvent(
                    "gen_ai.client.inference.operation.details",
                    8,
                    {
                        "gen_ai.output.messages": (
                            {"role": "assistant", "parts": ({"type": "text", "content": ANSWER},)},
                        ),
                    },
                ),
            ),
            **common,
        ),
    ]
    ex = extract(spans)
    assert ex.sample is not None
    assert (ex.sample.question, ex.sample.contexts, ex.sample.answer) == (QUESTION, DOCS, ANSWER)


def test_retrievers_ordered_by_start_time_and_deduplicated() -> None:
    rec = Recorder()
    clock = rec.clock
    with rec.span(
        "query",
        {"openinference.span.kind": "CHAIN", "input.value": QUESTION, "output.value": ANSWER},
    ):
        # the second retriever is created (and exported) first but started later
        first_start = next(clock)
        second = rec.tracer.start_span(
            "retrieve-b",
            start_time=next(clock),
            attributes={
                "openinference.span.kind": "RETRIEVER",
                **_oi_docs("retrieval.documents", [DOCS[1], DOCS[2]]),
            },
        )
        second.end(end_time=next(clock))
        first = rec.tracer.start_span(
            "retrieve-a",
            start_time=first_start,
            attributes={
                "openinference.span.kind": "RETRIEVER",
                **_oi_docs("retrieval.documents", [DOCS[0], DOCS[1] + "  "]),
            },
        )
        first.end(end_time=next(clock))
    spans = one_trace(to_record(rec.finished()))
    assert [s.name for s in spans].index("retrieve-b") < [s.name for s in spans].index("retrieve-a")

    ex = extract(spans)

    assert ex.sample is not None and ex.sample.contexts == DOCS


def test_max_contexts() -> None:
    rec = Recorder()
    WRITERS["openinference"](rec)
    ex = _run(rec, ExtractionSettings(max_contexts=2))
    assert ex.sample is not None and ex.sample.contexts == DOCS[:2]


def test_reranker_without_inputs_supersedes_earlier_retrievers_only() -> None:
    rec = Recorder()
    with rec.span(
        "query",
        {"openinference.span.kind": "CHAIN", "input.value": QUESTION, "output.value": ANSWER},
    ):
        with rec.span(
            "retrieve",
            {
                "openinference.span.kind": "RETRIEVER",
                **_oi_docs("retrieval.documents", ["candidate a", "candidate b"]),
            },
        ):
            pass
        with rec.span(
            "rerank",
            {
                "openinference.span.kind": "RERANKER",
                **_oi_docs("reranker.output_documents", DOCS[:2]),
            },
        ):
            pass
        with rec.span(
            "web-search",
            {"openinference.span.kind": "RETRIEVER", **_oi_docs("retrieval.documents", [DOCS[2]])},
        ):
            pass
    ex = _run(rec)
    assert ex.sample is not None and ex.sample.contexts == DOCS
    assert ex.meta.sources["contexts"] == "reranker.output_documents+retrieval.documents"


def test_orphans_stand_in_for_a_missing_root() -> None:
    rec = Recorder()
    WRITERS["openinference"](rec)
    spans = [s for s in one_trace(to_record(rec.finished())) if s.parent_span_id is not None]
    ex = extract(spans)
    assert ex.sample is not None
    assert ex.sample.question == QUESTION and ex.meta.sources["question"] == "retrieval:query"
    assert ex.sample.answer == ANSWER and ex.meta.sources["answer"] == "llm:llm.output_messages"


def test_metadata() -> None:
    rec = Recorder(service="support-bot", env="staging")
    with rec.span(
        "query",
        {
            "openinference.span.kind": "CHAIN",
            "input.value": QUESTION,
            "output.value": ANSWER,
            "session.id": "sess-1",
            "user.id": "u-9",
            "ragpulse.prompt.version": "p-7",
        },
    ):
        with rec.span(
            "retrieve",
            {
                "openinference.span.kind": "RETRIEVER",
                "ragpulse.retriever.version": "bm25-v2",
                **_oi_docs("retrieval.documents", DOCS),
            },
        ):
            pass
        for _ in range(2):  # a rewrite call and the answer call: tokens add up
            with rec.span(
                "llm",
                {
                    "openinference.span.kind": "LLM",
                    "llm.model_name": "claude-x",
                    "llm.prompt_template.version": "template-3",
                    "llm.token_count.prompt": 100,
                    "llm.token_count.completion": 10,
                    "llm.output_messages.0.message.content": "x",
                },
            ):
                pass
    ex = _run(rec)
    m = ex.meta
    assert ex.sample is not None and ex.sample.metadata["service"] == "support-bot"
    assert (m.service, m.environment, m.model) == ("support-bot", "staging", "claude-x")
    assert m.prompt_version == "p-7"  # the explicit ragpulse attribute wins over the template's
    assert m.retriever_version == "bm25-v2"
    assert (m.prompt_tokens, m.completion_tokens) == (200, 20)
    assert (m.session_id, m.user_id) == ("sess-1", "u-9")
    assert m.span_count == 4 and m.start_ns < m.end_ns and not m.error
    assert m.conventions == ("openinference",)
    assert m.feedback_score is None and not m.negative_feedback


def test_versions_from_other_conventions() -> None:
    rec = Recorder()
    WRITERS["openinference"](rec)
    assert _run(rec).meta.prompt_version == "qa-v3"  # llm.prompt_template.version
    rec = Recorder()
    with (
        rec.span(
            "q",
            {
                "openinference.span.kind": "CHAIN",
                "input.value": QUESTION,
                "output.value": ANSWER,
                "retriever.version": 3,
            },
        ),
        rec.span(
            "llm",
            {
                "openinference.span.kind": "LLM",
                "traceloop.prompt.version": 5,
                "llm.output_messages.0.message.content": "x",
            },
        ),
    ):
        pass
    m = _run(rec, ExtractionSettings(require_contexts=False)).meta
    assert (m.prompt_version, m.retriever_version) == ("5", "3")


@pytest.mark.parametrize(
    ("attrs", "event", "score", "label", "negative"),
    [
        ({"ragpulse.feedback.score": 0.0}, None, 0.0, None, True),
        ({"user.feedback.score": 1}, None, 1.0, None, False),
        ({"ragpulse.feedback.label": "thumbs_down"}, None, None, "thumbs_down", True),
        ({}, {"score": 0.9, "label": "thumbs_up"}, 0.9, "thumbs_up", False),
        ({}, {"ragpulse.feedback.score": "0.2", "comment": "wrong year"}, 0.2, None, True),
        ({"ragpulse.feedback.score": [1]}, None, None, None, False),  # wrong type: ignored
    ],
)
def test_feedback(
    attrs: dict, event: dict | None, score: float | None, label: str | None, negative: bool
) -> None:
    rec = Recorder()
    with rec.span(
        "query",
        {
            "openinference.span.kind": "CHAIN",
            "input.value": QUESTION,
            "output.value": ANSWER,
            **attrs,
        },
    ) as root:
        if event is not None:
            rec.event(root, "ragpulse.feedback", event)
    m = _run(rec, ExtractionSettings(require_contexts=False)).meta
    assert (m.feedback_score, m.feedback_label, m.negative_feedback) == (score, label, negative)


def test_latest_feedback_wins() -> None:
    """A thumbs-up recorded on the request, then a later thumbs-down span in the same trace."""
    rec = Recorder()
    with rec.span(
        "query",
        {
            "openinference.span.kind": "CHAIN",
            "input.value": QUESTION,
            "output.value": ANSWER,
            "ragpulse.feedback.score": 1.0,
        },
    ) as root:
        pass
    ctx = root.get_span_context()
    from opentelemetry import trace

    late = rec.tracer.start_span(
        "ragpulse.feedback",
        context=trace.set_span_in_context(trace.NonRecordingSpan(ctx)),
        start_time=rec.now(),
        attributes={"ragpulse.feedback.label": "bad"},
    )
    late.end(end_time=rec.now())
    m = _run(rec, ExtractionSettings(require_contexts=False)).meta
    assert (m.feedback_score, m.feedback_label, m.negative_feedback) == (None, "bad", True)


def test_tool_datastore_contexts() -> None:
    """Agentic RAG: retrieval through an execute_tool span on a datastore tool."""
    rec = Recorder()
    with rec.span("invoke_agent", {"gen_ai.operation.name": "invoke_agent"}):
        with rec.span(
            "execute_tool search_kb",
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.type": "datastore",
                "gen_ai.tool.call.result": json.dumps(list(DOCS), ensure_ascii=False),
            },
            kind=SpanKind.INTERNAL,
        ):
            pass
        with rec.span(
            "chat m",
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.input.messages": json.dumps(
                    [{"role": "user", "parts": [{"type": "text", "content": QUESTION}]}]
                ),
                "gen_ai.output.messages": json.dumps(
                    [{"role": "assistant", "parts": [{"type": "text", "content": ANSWER}]}],
                    ensure_ascii=False,
                ),
            },
        ):
            pass
    ex = _run(rec)
    assert ex.sample is not None
    assert (ex.sample.question, ex.sample.contexts, ex.sample.answer) == (QUESTION, DOCS, ANSWER)
    assert ex.meta.sources["contexts"] == "gen_ai.tool.call.result"


@pytest.mark.parametrize(
    ("prompt", "contexts", "question"),
    [
        (
            (
                "Use the following pieces of retrieved context to answer the question.\nQuestion: Q? \n"
                "Context: alpha.\n\nbeta. \nAnswer:"
            ),
            ["alpha.", "beta."],
            "Q?",
        ),
        (
            "<context>\n<document id=1>a b</document>\n<document id=2>c</document>\n</context>\nQuestion: Q?",
            ["a b", "c"],
            "Q?",
        ),
        (
            "## Context\n[1] first doc\nspans lines\n[2] second doc\n\n## Question\nQ?",
            ["first doc\nspans lines", "second doc"],
            "Q?",
        ),
        ("Documents:\nDocument 1: one\nDocument 2: two\nQuery: Q?", ["one", "two"], "Q?"),
        (
            "Context information is below.\n-----\na\n-----\nb\n-----\nGiven the context information, answer.\nQuery: Q?",
            ["a", "b"],
            "Q?",
        ),
        ("Just chat with me about the context of this war.", [], None),
    ],
)
def test_split_prompt_heuristics(prompt: str, contexts: list[str], question: str | None) -> None:
    assert split_prompt(prompt) == (contexts, question)


def test_langchain_genai_util_roles() -> None:
    """opentelemetry-util-genai (LangChain) writes roles "Human"/"AI"; they mean user/assistant."""
    rec = Recorder()
    with rec.span("chain", {}):
        with rec.span(
            "retrieval",
            {
                "gen_ai.operation.name": "retrieval",
                "gen_ai.retrieval.documents": json.dumps([{"id": "1", "content": DOCS[0]}]),
            },
        ):
            pass
        with rec.span(
            "chat m",
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.input.messages": json.dumps(
                    [
                        {"role": "System", "parts": [{"type": "text", "content": "be brief"}]},
                        {"role": "Human", "parts": [{"type": "text", "content": QUESTION}]},
                    ]
                ),
                "gen_ai.output.messages": json.dumps(
                    [
                        {
                            "role": "AI",
                            "parts": [{"type": "text", "content": ANSWER}],
                            "finish_reason": "stop",
                        }
                    ],
                    ensure_ascii=False,
                ),
            },
        ):
            pass
    ex = _run(rec)
    assert ex.sample is not None and ex.sample.question == QUESTION and ex.sample.answer == ANSWER


def test_root_io_as_a_conversation() -> None:
    """LangGraph-style root I/O: {"messages": [...]} with LangChain message dicts."""
    rec = Recorder()
    state_in = {
        "messages": [
            {"type": "system", "content": "be brief"},
            {"type": "human", "content": "hi"},
            {"type": "ai", "content": "hello"},
            {"type": "human", "content": QUESTION},
        ]
    }
    state_out = {
        "messages": state_in["messages"]
        + [
            {
                "lc": 1,
                "type": "constructor",
                "id": ["langchain", "schema", "messages", "AIMessage"],
                "kwargs": {"content": ANSWER, "type": "ai"},
            }
        ]
    }
    with (
        rec.span(
            "LangGraph",
            {
                "openinference.span.kind": "CHAIN",
                "input.value": json.dumps(state_in),
                "output.value": json.dumps(state_out, ensure_ascii=False),
            },
        ),
        rec.span(
            "retrieve",
            {"openinference.span.kind": "RETRIEVER", **_oi_docs("retrieval.documents", DOCS)},
        ),
    ):
        pass
    ex = _run(rec)
    assert ex.sample is not None
    assert (ex.sample.question, ex.sample.answer) == (QUESTION, ANSWER)
    assert (
        ex.meta.sources["question"] == "root:input.value"
        and ex.meta.sources["answer"] == "root:output.value"
    )


# Prompts carry user text. These are the shapes that would make a backtracking pattern
# quadratic; bench/split_prompt_scaling.py times them at growing sizes (linear there), and
# this test checks what they split into.
HOSTILE_PROMPTS = {
    "separator_lines": ("Context:\n" + "\n---" * 60_000 + "x", (["---x"], None)),
    "unclosed_document_tags": ("<context>" + "<document>" * 60_000,
                               (["<document>" * 59_999], None)),
    "unclosed_doc_ends": ("Context:\n" + "<doc>a</doc" * 60_000, (["a"] * 30_000, None)),
    "blank_lines": ("Context:\n" + "\n \n" * 60_000 + "Question: q", ([], "q")),
}


@pytest.mark.parametrize("name", HOSTILE_PROMPTS)
def test_split_prompt_on_hostile_text(name: str) -> None:
    prompt, expected = HOSTILE_PROMPTS[name]
    assert split_prompt(prompt) == expected


def test_unclosed_and_mixed_case_tags() -> None:
    """A prompt cut by an attribute length limit loses its closing tags: keep what is there."""
    assert split_prompt("<context>\n<document>a</document>\n<document>b") == (["a", "b"], None)
    assert split_prompt("<CONTEXT>\n<Doc id=1>x</DOC></CONTEXT>") == (["x"], None)
    assert split_prompt("<context> only open") == (["only open"], None)
    assert split_prompt("<context></context>") == ([], None)


def _genai_trace_record(documents_json: str) -> bytes:
    """OTLP bytes of a GenAI trace whose retrieval span holds ``documents_json``."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

    req = ExportTraceServiceRequest()
    rs = req.resource_spans.add()
    rs.resource.attributes.add(key="service.name", value=AnyValue(string_value="s"))
    spans = rs.scope_spans.add().spans
    tid = b"\xab" * 16
    spans.add(trace_id=tid, span_id=b"\x01" * 8, name="root", start_time_unix_nano=1,
              end_time_unix_nano=10)
    spans.add(trace_id=tid, span_id=b"\x02" * 8, parent_span_id=b"\x01" * 8, name="retrieval",
              start_time_unix_nano=2, end_time_unix_nano=3, attributes=[
                  KeyValue(key="gen_ai.operation.name", value=AnyValue(string_value="retrieval")),
                  KeyValue(key="gen_ai.retrieval.query.text", value=AnyValue(string_value=QUESTION)),
                  KeyValue(key="gen_ai.retrieval.documents",
                           value=AnyValue(string_value=documents_json))])
    chat = spans.add(trace_id=tid, span_id=b"\x03" * 8, parent_span_id=b"\x01" * 8, name="chat",
                     start_time_unix_nano=4, end_time_unix_nano=9, attributes=[
                         KeyValue(key="gen_ai.operation.name", value=AnyValue(string_value="chat"))])
    chat.attributes.add(key="gen_ai.output.messages").value.string_value = json.dumps(
        [{"role": "assistant", "parts": [{"type": "text", "content": ANSWER}]}])
    return req.SerializeToString()


def test_a_json_document_list_cut_by_a_size_limit_keeps_its_first_documents() -> None:
    """Issue 17: 10,000 small documents in one JSON string (1.04 MB) were cut by the decoder's
    value limit into invalid JSON, so the trace lost every context, while one huge document is
    cut and kept. Now the complete leading documents are kept, like the first characters."""
    from ragpulse.collector.shrink import shrink_request
    from ragpulse.scorer.traces import SpanDecoder

    docs = [{"id": str(i), "content": f"document {i:05d}: parcels ship the next working day " * 2}
            for i in range(10_000)]
    record = _genai_trace_record(json.dumps(docs))
    assert len(record) > 1_000_000
    decoder = SpanDecoder()
    ex = extract(decoder.decode(record))  # cut at max_value_chars (256 Ki characters)
    assert decoder.stats()["values_truncated"] == 1
    assert ex.sample is not None
    first = tuple(d["content"].strip() for d in docs[:64])
    assert tuple(ex.sample.contexts) == first  # extraction.max_contexts
    # The same list cut by the collector to fit a 100 kB Kafka record.
    cut = shrink_request(record, 100_000)
    assert cut.value is not None and cut.values_cut == 1
    ex = extract(SpanDecoder().decode(cut.value))
    assert ex.sample is not None and tuple(ex.sample.contexts) == first


def test_one_huge_document_in_a_json_list_is_cut_like_a_plain_one() -> None:
    from ragpulse.collector.shrink import shrink_request
    from ragpulse.scorer.traces import SpanDecoder

    for docs in (["y" * 3_000_000], [{"id": "1", "content": "y [z] \\ \"q\" " * 300_000}]):
        record = _genai_trace_record(json.dumps(docs))
        for cut in (record, shrink_request(record, 100_000).value):  # decoder's cut, collector's
            assert cut is not None
            ex = extract(SpanDecoder().decode(cut))
            assert ex.sample is not None, docs[0] if isinstance(docs[0], str) else "dict"
            (context,) = ex.sample.contexts
            whole = docs[0] if isinstance(docs[0], str) else docs[0]["content"]
            assert context.endswith("…") and whole.startswith(context[:-1].rstrip())
            assert 1_000 < len(context) < len(whole)


def test_a_json_document_list_that_is_merely_invalid_gives_no_documents() -> None:
    from ragpulse.scorer.traces import SpanDecoder

    # Not cut by a limit (no truncation mark): invalid JSON stays unreadable, as before.
    ex = extract(SpanDecoder().decode(_genai_trace_record('[{"content": "a"}, {"content": ')))
    assert ex.sample is None
