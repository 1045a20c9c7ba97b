"""Index building is not a RAG query: a trace with no question, no answer and no LLM call is
``not_rag``, which the scorer counts and writes no rows for (the null rate then measures RAG
queries, not how often the app indexes). Spans from the real instrumentors."""

from __future__ import annotations

from typing import Any

import pytest

from ragpulse.common.schema import NOT_RAG
from ragpulse.scorer.pipeline.prepare import build_preparer
from ragpulse.scorer.pipeline.trace_buffer import AssembledTrace
from ragpulse.scorer.traces import Sampler, Span, extract
from tests.scorer.traces.sdk import Recorder

from . import apps
from .harness import instrumented, root, traces


def _llamaindex_instrumentor(convention: str) -> Any:
    if convention == "openinference":
        from openinference.instrumentation.llama_index import LlamaIndexInstrumentor
    else:
        from opentelemetry.instrumentation.llamaindex import LlamaIndexInstrumentor
    return LlamaIndexInstrumentor()


def _prepare(spans: list[Span]) -> Any:
    return build_preparer(Sampler())(AssembledTrace(spans[0].trace_id, spans, [], "complete", True))


@pytest.mark.parametrize("convention", ["openinference", "openllmetry"])
def test_llamaindex_index_building_is_not_a_query(rec: Recorder, convention: str) -> None:
    with instrumented(_llamaindex_instrumentor(convention), rec):
        seen = apps.llamaindex_query(apps.llamaindex_index())
    by_root = {root(t).name: t for t in traces(rec).values()}
    index = {name: t for name, t in by_root.items() if not name.startswith("RetrieverQueryEngine")}
    # the SentenceSplitter chunking and the embedding batch, each its own trace
    assert {name.split(".")[0] for name in index} == {"SentenceSplitter", "MockEmbedding"}, by_root

    for name, spans in index.items():
        ex = extract(spans)
        assert ex.sample is None and ex.reason == NOT_RAG, (name, ex.reason)
        prep = _prepare(spans)
        assert not prep.keep and prep.reason == NOT_RAG and prep.meta is None
    (query,) = (t for name, t in by_root.items() if name not in index)
    ex = extract(query)
    assert ex.sample is not None and ex.sample.contexts == seen.contexts
    assert _prepare(query).keep


def test_haystack_indexing_pipeline_is_not_a_query(
    rec: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HAYSTACK_TELEMETRY_ENABLED", "False")
    from openinference.instrumentation.haystack import HaystackInstrumentor

    with instrumented(HaystackInstrumentor(), rec):
        assert apps.haystack_index() == len(apps.DOCS)
    (spans,) = traces(rec).values()

    assert extract(spans).reason == NOT_RAG


def test_a_chat_without_retrieval_is_still_a_query(rec: Recorder) -> None:
    """Question and answer but no contexts: a query the scorer cannot judge (null rows,
    no_contexts), not a trace to drop."""
    from openinference.instrumentation.langchain import LangChainInstrumentor

    with instrumented(LangChainInstrumentor(), rec):
        apps.langchain_chat()
    (spans,) = traces(rec).values()

    assert extract(spans).reason == "no_contexts"
