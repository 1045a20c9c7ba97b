"""A real framework app through ``ragpulse up``: LlamaIndex under the OpenInference instrumentor
(the compat extra's pins), exporting OTLP/HTTP to the collector that ``up`` starts, scored by
its scorer (local judge) into its chDB, read back through the ClickHouse-HTTP facade.

The app indexes three documents (two indexing traces, which must get no rows) and answers
three questions; each query's rows carry the question and answer the app saw, and its
context_precision row counts the contexts the app retrieved."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.compat import apps
from tests.compat.harness import root, traces

from .test_up import METRICS, up  # noqa: F401 (fixture)

pytestmark = pytest.mark.slow

QUESTIONS = (
    apps.QUESTION,
    "How many tourists visit Paris every year?",
    "How high is Mount Everest?",
)


@pytest.fixture
def health_every_second(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``up``'s scorer writes pipeline_health every second (it inherits the environment)."""
    monkeypatch.setenv("RAGPULSE_PIPELINE_HEALTH_INTERVAL_S", "1")
    yield


def test_llamaindex_app_through_ragpulse_up(health_every_second: None, up: Any) -> None:  # noqa: F811
    from openinference.instrumentation.llama_index import LlamaIndexInstrumentor
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from tests.scorer.traces.sdk import Recorder

    proc, ports, client, tmp_path = up
    # The app's provider exports to the collector; the same spans also land in memory, so the
    # test knows the trace ids the app produced.
    rec = Recorder(service="e2e-llamaindex", env="test")
    otlp = OTLPSpanExporter(endpoint=f"http://127.0.0.1:{ports['http']}/v1/traces")
    rec.provider.add_span_processor(SimpleSpanProcessor(otlp))
    instrumentor = LlamaIndexInstrumentor()
    instrumentor.instrument(tracer_provider=rec.provider)
    try:
        index = apps.llamaindex_index()
        seen = {q: apps.llamaindex_query(index, q) for q in QUESTIONS}
    finally:
        instrumentor.uninstrument()
        rec.provider.shutdown()
    by_trace = traces(rec)
    queries = {t: root(s).attributes["input.value"] for t, s in by_trace.items()
               if root(s).name.startswith("RetrieverQueryEngine")}
    assert sorted(queries.values()) == sorted(QUESTIONS)
    indexing = set(by_trace) - set(queries)
    assert len(indexing) == 2

    deadline = time.monotonic() + 120
    rows: list[Any] = []
    while time.monotonic() < deadline:
        rows = client.query(
            "SELECT trace_id, metric, status, question, answer, model, service, counts "
            "FROM rag.scores FINAL WHERE trace_id IN {ids:Array(String)}",
            parameters={"ids": sorted(by_trace)}).result_rows
        if len(rows) >= len(queries) * len(METRICS):
            break
        time.sleep(1)
    log = (tmp_path / "up.log").read_text()
    assert len(rows) == len(queries) * len(METRICS), log
    assert {r[0] for r in rows} == set(queries)  # no rows for the indexing traces
    for trace_id, metric, status, question, answer, model, service, counts in rows:
        s = seen[queries[trace_id]]
        assert (question, answer) == (s.question, s.answer), (metric, status)
        assert (model, service) == ("MockLLM", "e2e-llamaindex")
        if metric == "context_precision":
            assert status == "ok" and counts["contexts"] == len(s.contexts) == 2

    # The indexing traces were counted instead (pipeline_health, flushed every second).
    deadline = time.monotonic() + 60
    not_rag = 0.0
    while time.monotonic() < deadline and not_rag < len(indexing):
        ((not_rag,),) = client.query(
            "SELECT sum(value) FROM rag.pipeline_health FINAL "
            "WHERE component = 'scorer' AND name = 'traces_not_rag' AND label = ''").result_rows
        time.sleep(0.5)
    assert not_rag == len(indexing), log
