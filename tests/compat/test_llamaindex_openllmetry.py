"""OpenLLMetry's LlamaIndex instrumentation (opentelemetry-instrumentation-llamaindex 0.62.4):
its retriever and synthesizer spans are plain ``*.task`` spans, and the retrieved nodes are
JSON strings inside a JSON list. All spans here are what the real instrumentor emitted."""

from __future__ import annotations

import json

from ragpulse.scorer.traces import extract
from ragpulse.scorer.traces.extract.openllmetry import synthesis_contexts
from tests.scorer.traces.sdk import Recorder

from . import apps
from .apps import DOCS
from .harness import instrumented, root, traces


def _instrumentor():  # type: ignore[no-untyped-def]
    from opentelemetry.instrumentation.llamaindex import LlamaIndexInstrumentor

    return LlamaIndexInstrumentor()


def test_retriever_task_span_holds_json_encoded_nodes(rec: Recorder) -> None:
    """The shape the scorer reads, pinned: if a new version changes it, this says so first."""
    index = apps.llamaindex_index()
    with instrumented(_instrumentor(), rec):
        seen = apps.llamaindex_query(index)
    (spans,) = traces(rec).values()
    retrievers = [s for s in spans if s.name == "VectorIndexRetriever.task"]
    assert retrievers
    for s in retrievers:
        assert s.attributes["traceloop.span.kind"] == "task"
        assert "gen_ai.operation.name" not in s.attributes
        items = json.loads(s.attributes["traceloop.entity.output"])
        assert all(isinstance(i, str) for i in items)
        assert [json.loads(i)["node"]["text"] for i in items] == list(seen.contexts)

    ex = extract(spans)

    assert ex.sample is not None and ex.sample.contexts == seen.contexts
    assert ex.meta.sources["contexts"] == "traceloop.entity.output"


def test_synthesis_without_a_retriever_span(rec: Recorder) -> None:
    """Retrieval done by the app itself, synthesis by LlamaIndex: the contexts are the nodes
    the synthesizer was given."""
    with instrumented(_instrumentor(), rec):
        seen = apps.llamaindex_synthesize()
    (spans,) = traces(rec).values()
    assert root(spans).name == "CompactAndRefine.workflow"

    ex = extract(spans)

    assert ex.sample is not None, (ex.reason, ex.meta.sources)
    assert (ex.sample.question, ex.sample.contexts, ex.sample.answer) == (
        seen.question, DOCS, seen.answer
    )
    assert ex.meta.sources["contexts"] == "synthesis:traceloop.entity.input"


def test_every_synthesizer_span_shape_yields_the_nodes(rec: Recorder) -> None:
    """``nodes`` (synthesize), ``text_chunks`` (get_response) and ``kwds.context_str``
    (DefaultRefineProgram) each give the documents back."""
    with instrumented(_instrumentor(), rec):
        apps.llamaindex_synthesize()
    (spans,) = traces(rec).values()
    shapes = {}
    for s in spans:
        parsed = json.loads(s.attributes.get("traceloop.entity.input", "null"))
        if not isinstance(parsed, dict):
            continue
        if "nodes" in parsed:
            shapes.setdefault("nodes", s)
        elif len(parsed.get("text_chunks", ())) == len(DOCS):
            shapes.setdefault("text_chunks", s)
        elif "context_str" in parsed.get("kwds", {}):
            shapes.setdefault("context_str", s)
    assert set(shapes) == {"nodes", "text_chunks", "context_str"}, [s.name for s in spans]
    for shape, span in shapes.items():
        assert synthesis_contexts(span) == list(DOCS), shape
