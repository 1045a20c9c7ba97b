"""RagTracer emits spans that the decoder and extractor read back exactly, in both conventions."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ragpulse.instrument import Document, RagTracer
from ragpulse.scorer.traces import Sampler, SamplingSettings, StatusCode, extract
from tests.scorer.traces.conventions import ANSWER, DOCS, QUESTION, SYSTEM
from tests.scorer.traces.sdk import Recorder, decode_traces, one_trace, to_record


def _interaction(rag: RagTracer, *, rerank: bool = False) -> str:
    candidates = [
        Document(d, id=f"doc-{i}", score=0.9 - i / 10, metadata={"source": f"kb/{i}.md"})
        for i, d in enumerate(DOCS)
    ]
    with rag.query(
        QUESTION,
        session_id="s-1",
        user_id="u-1",
        prompt_version="qa-v3",
        retriever_version="hybrid-2",
    ) as q:
        with rag.retrieve(QUESTION, data_source="kb", top_k=3) as r:
            got = r.set_documents(candidates + ["extra candidate"] if rerank else candidates)
        if rerank:
            with rag.rerank(QUESTION, got, model="bge", top_k=3) as rr:
                rr.set_output_documents(candidates)
        messages = [{"role": "system", "content": SYSTEM}, ("user", QUESTION)]
        with rag.llm(
            "gpt-4o-mini",
            provider="openai",
            messages=messages,
            template_variables={"question": QUESTION},
        ) as call:
            call.set_output(
                ANSWER, prompt_tokens=120, completion_tokens=14, response_model="gpt-4o-mini-2024"
            )
        q.set_answer(ANSWER)
        return q.trace_id


@pytest.mark.parametrize("genai", [False, True])
def test_helper_spans_extract_to_the_sample(genai: bool) -> None:
    rec = Recorder()
    trace_id = _interaction(RagTracer(rec.provider, genai=genai))
    spans = one_trace(to_record(rec.finished()))

    ex = extract(spans)

    assert ex.sample is not None and ex.sample.id == trace_id
    assert (ex.sample.question, ex.sample.contexts, ex.sample.answer) == (QUESTION, DOCS, ANSWER)
    assert ex.meta.sources == {
        "question": "root:input.value",
        "contexts": "retrieval.documents",
        "answer": "root:output.value",
    }
    m = ex.meta
    assert (m.model, m.prompt_version, m.retriever_version) == ("gpt-4o-mini", "qa-v3", "hybrid-2")
    assert (m.prompt_tokens, m.completion_tokens, m.session_id, m.user_id) == (
        120,
        14,
        "s-1",
        "u-1",
    )
    kinds = {s.name: s.attributes.get("openinference.span.kind") for s in spans}
    assert sorted(kinds.values()) == ["CHAIN", "LLM", "RETRIEVER"]
    assert all(s.status_code == StatusCode.OK for s in spans)
    assert ("gen_ai" in m.conventions) is genai


def test_genai_attributes_alone_are_complete() -> None:
    """With genai=True, the gen_ai.* attributes by themselves carry the whole sample."""
    rec = Recorder()
    _interaction(RagTracer(rec.provider, genai=True))
    spans = one_trace(to_record(rec.finished()))
    genai_only = [
        s._replace(attributes={k: v for k, v in s.attributes.items() if k.startswith("gen_ai.")})
        for s in spans
    ]

    ex = extract(genai_only)

    assert ex.sample is not None
    assert (ex.sample.question, ex.sample.contexts, ex.sample.answer) == (QUESTION, DOCS, ANSWER)
    assert ex.meta.sources["contexts"] == "gen_ai.retrieval.documents"
    assert ex.meta.sources["answer"] == "llm:gen_ai.output.messages"
    chat = next(s for s in spans if s.attributes.get("gen_ai.operation.name") == "chat")
    assert chat.name == "chat gpt-4o-mini" and chat.attributes["gen_ai.usage.input_tokens"] == 120


def test_reranker_output_is_what_counts() -> None:
    rec = Recorder()
    _interaction(RagTracer(rec.provider), rerank=True)
    ex = extract(one_trace(to_record(rec.finished())))
    assert ex.sample is not None and ex.sample.contexts == DOCS
    assert ex.meta.sources["contexts"] == "reranker.output_documents"


def test_exception_sets_error_status_and_forces_sampling() -> None:
    rec = Recorder()
    rag = RagTracer(rec.provider)
    with pytest.raises(TimeoutError), rag.query(QUESTION) as q:
        with rag.retrieve(QUESTION) as r:
            r.set_documents(DOCS)
        with rag.llm("m", messages=[("user", QUESTION)]):
            raise TimeoutError("model timed out")
    spans = one_trace(to_record(rec.finished()))
    ex = extract(spans)

    assert ex.reason == "no_answer" and ex.meta.error
    assert "TimeoutError" in ex.meta.error_message or "model timed out" in ex.meta.error_message
    llm = next(s for s in spans if s.name == "llm")
    assert llm.is_error and any(e.name == "exception" for e in llm.events)
    d = Sampler(SamplingSettings(default_rate=0.0)).decide(ex, spans)
    assert d.keep and d.rule == "error" and q.trace_id == ex.trace_id


@pytest.mark.parametrize("target_kind", ["handle", "span_context", "hex_ids"])
def test_late_feedback_joins_the_trace(target_kind: str) -> None:
    rec = Recorder()
    rag = RagTracer(rec.provider)
    _interaction(rag)
    root = next(s for s in rec.finished() if s.parent is None)
    ctx = root.get_span_context()
    target = {
        "handle": None,
        "span_context": ctx,
        "hex_ids": (format(ctx.trace_id, "032x"), format(ctx.span_id, "016x")),
    }[target_kind]
    if target is None:
        with rag.query("follow-up") as follow_up:  # a handle from another, open query
            pass
        target = follow_up
    rag.feedback(target, score=0.0, label="thumbs_down", comment="wrong")

    traces = decode_traces(to_record(rec.finished()))
    trace_id = format(
        target.span_context.trace_id if target_kind == "handle" else ctx.trace_id, "032x"
    )
    spans = traces[trace_id]
    ex = extract(spans)

    fb = next(s for s in spans if s.name == "ragpulse.feedback")
    assert fb.parent_span_id is not None and fb.trace_id == trace_id
    # exported alone in a later batch, it must still pass the collector's RAG filter
    from ragpulse.collector.split import split_request

    alone = [s for s in rec.finished() if s.name == "ragpulse.feedback"]
    (record,) = split_request(to_record(alone)).records
    assert record.rag and record.key.decode() == trace_id
    assert ex.meta.feedback_score == 0.0 and ex.meta.feedback_label == "thumbs_down"
    assert ex.meta.feedback_comment == "wrong" and ex.meta.negative_feedback


def test_feedback_event_while_open() -> None:
    rec = Recorder()
    rag = RagTracer(rec.provider)
    with rag.query(QUESTION) as q:
        q.set_answer(ANSWER)
        q.feedback(score=1.0)
    ex = extract(one_trace(to_record(rec.finished())))
    assert ex.meta.feedback_score == 1.0 and not ex.meta.negative_feedback


@pytest.mark.parametrize(("score", "label"), [(None, None), (1.5, None), (-1.0, "x")])
def test_feedback_validation(score: float | None, label: str | None) -> None:
    rag = RagTracer(Recorder().provider)
    with pytest.raises(ValueError):
        rag.feedback(("0" * 31 + "1", "0" * 15 + "1"), score=score, label=label)


def test_capture_content_off_records_no_text() -> None:
    rec = Recorder()
    _interaction(RagTracer(rec.provider, genai=True, capture_content=False))
    spans = one_trace(to_record(rec.finished()))
    texts = [v for s in spans for v in s.attributes.values() if isinstance(v, str)]
    assert not any(QUESTION in t or ANSWER in t or any(d in t for d in DOCS) for t in texts)
    ex = extract(spans)
    assert ex.sample is None and ex.reason == "content_not_captured"
    assert ex.detail is not None and "OPENINFERENCE_HIDE_INPUTS" in ex.detail
    assert ex.meta.prompt_tokens == 120 and ex.meta.model == "gpt-4o-mini"
    retr = next(s for s in spans if s.attributes.get("openinference.span.kind") == "RETRIEVER")
    assert retr.attributes["retrieval.documents.0.document.id"] == "doc-0"


def test_bad_documents_and_messages_raise_type_error() -> None:
    rag = RagTracer(Recorder().provider)
    with rag.query(QUESTION):
        with rag.retrieve(QUESTION) as r:
            with pytest.raises(TypeError):
                r.set_documents([{"metadata": {}}])
            with pytest.raises(TypeError):
                r.set_documents([42])  # type: ignore[list-item]
        with pytest.raises(TypeError):
            with rag.llm("m", messages=[{"role": "user", "content": 1}]):
                pass


def test_imports_without_pydantic_or_other_ragpulse_packages() -> None:
    """``ragpulse.instrument`` runs inside users' apps: the OpenTelemetry API and the standard
    library only. A fresh interpreter where importing pydantic raises still imports it, emits a
    trace, and loads no pydantic and no other ragpulse package."""
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('pydantic', 'pydantic_core', 'pydantic_settings'):\n"
        "            raise ImportError('blocked: ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "from ragpulse.instrument import RagTracer\n"
        "rag = RagTracer()\n"
        "with rag.query('q') as q:\n"
        "    with rag.retrieve('q') as r:\n"
        "        r.set_documents(['d'])\n"
        "    q.set_answer('a')\n"
        "print(sorted(m for m in sys.modules if m.startswith('pydantic')))\n"
        "print(sorted({m.split('.')[1] for m in sys.modules if m.startswith('ragpulse.')}))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    pydantic_modules, ragpulse_packages = done.stdout.splitlines()
    assert pydantic_modules == "[]"
    assert ragpulse_packages == "['instrument']"
