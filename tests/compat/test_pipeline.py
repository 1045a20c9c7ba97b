"""What the live scorer makes of real framework traces: records of the real instrumentors, as
this project's collector keys them, through the scorer service on a real tansu broker into
real chDB, then read back (and through ``ragpulse status``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ragpulse.collector.split import split_request
from ragpulse.common.schema import CONTENT_NOT_CAPTURED, CONTENT_SETTINGS
from ragpulse.deploy.cli import _register, app
from ragpulse.scorer.pipeline import build_scorer
from testkit.openai_server import FakeOpenAIServer
from tests.scorer.pipeline.conftest import (  # noqa: F401 (fixtures)
    make_settings,
    produce,
    table_judge,
    topic,
    wait_for,
    writer,
)
from tests.scorer.traces.sdk import Recorder, to_record

from . import apps
from .harness import instrumented

pytestmark = pytest.mark.slow

GENAI = CONTENT_SETTINGS["gen_ai"]


def _score(
    recs: list[Recorder], kafka_broker_module: Any, topic: str, make_settings: Any,  # noqa: F811
    writer: Any, chdb_client: Any, traces: int,  # noqa: F811
) -> dict[str, Any]:
    """Send every recorder's spans as the collector's keyed records, run the scorer until
    ``traces`` traces are done, stop it and return its final stats."""
    records = [r for rec in recs for r in split_request(to_record(rec.finished())).records]
    produce(kafka_broker_module.bootstrap, topic, [(r.key, r.value) for r in records])
    settings = make_settings(pipeline_health_interval_s=0.2)
    svc = build_scorer(settings, judge=table_judge(), writer=writer, client=chdb_client).start()
    try:
        wait_for(lambda: svc.stats()["traces_done"] >= traces, what=f"{traces} traces done")
    finally:
        svc.shutdown()
    return svc.stats() | {"instance": settings.instance}


def _health(chdb_client: Any, db: str, instance: str) -> dict[tuple[str, str], float]:
    return {
        (n, lb): v
        for n, lb, v in chdb_client.query(
            f"SELECT name, label, sum(value) FROM `{db}`.pipeline_health FINAL "
            "WHERE component = 'scorer' AND kind = 'counter' AND instance = {i:String} "
            "GROUP BY name, label",
            parameters={"i": instance},
        ).result_rows
    }


def test_content_not_captured_is_counted_and_shown_with_its_remedy(
    kafka_broker_module: Any, topic: str, make_settings: Any, writer: Any,  # noqa: F811
    chdb_client: Any, chdb_dir: Path, rag_schema: Any, openai_server: FakeOpenAIServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

    rec = Recorder(service="compat-app")
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    with instrumented(OpenAIInstrumentor(), rec):
        apps.openai_rag(openai_server.base_url)
    trace_id = format(rec.finished()[0].context.trace_id, "032x")

    stats = _score([rec], kafka_broker_module, topic, make_settings, writer, chdb_client, 1)

    db = rag_schema.database
    rows = chdb_client.query(
        f"SELECT status, reason, explanation FROM `{db}`.scores FINAL WHERE trace_id = {{t:String}}",
        parameters={"t": trace_id},
    ).result_rows
    assert len(rows) == 3
    assert all(st == "null" and r == CONTENT_NOT_CAPTURED and GENAI in e for st, r, e in rows)
    assert stats["traces_unscorable"] == 1
    assert _health(chdb_client, db, stats["instance"])[
        ("traces_unscorable", CONTENT_NOT_CAPTURED)] == 1

    _register()
    res = CliRunner().invoke(app, ["status", "--since", "2h", "--clickhouse",
                                   f"chdb://{chdb_dir}", "--database", db])
    assert "traces without scores" in res.output, res.output
    line = next(ln for ln in res.output.splitlines() if CONTENT_NOT_CAPTURED in ln)
    assert " 1 " in line and "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT" in res.output


def test_index_building_traces_get_no_rows_and_null_rows_keep_what_was_found(
    kafka_broker_module: Any, topic: str, make_settings: Any, writer: Any,  # noqa: F811
    chdb_client: Any, chdb_dir: Path, rag_schema: Any,
) -> None:
    from openinference.instrumentation.langchain import LangChainInstrumentor
    from openinference.instrumentation.llama_index import LlamaIndexInstrumentor

    rec = Recorder(service="compat-app")
    with instrumented(LlamaIndexInstrumentor(), rec):
        seen = apps.llamaindex_query(apps.llamaindex_index())
    trace_ids = {format(s.context.trace_id, "032x") for s in rec.finished()}
    assert len(trace_ids) == 3  # chunking, embedding, the query
    chat = Recorder(service="compat-app")  # a chat without retrieval: null rows, no_contexts
    with instrumented(LangChainInstrumentor(), chat):
        apps.langchain_chat()
    chat_id = format(chat.finished()[0].context.trace_id, "032x")

    stats = _score([rec, chat], kafka_broker_module, topic, make_settings, writer, chdb_client, 4)

    db = rag_schema.database
    rows = chdb_client.query(
        f"SELECT trace_id, status, reason, question, answer, model FROM `{db}`.scores FINAL "
        "WHERE trace_id IN {ids:Array(String)}",
        parameters={"ids": sorted(trace_ids | {chat_id})},
    ).result_rows
    by_trace: dict[str, list[tuple[Any, ...]]] = {}
    for r in rows:
        by_trace.setdefault(r[0], []).append(r[1:])
    assert len(by_trace) == 2  # the query and the chat; the index traces have none
    (query,) = set(by_trace) - {chat_id}
    assert {(q, a, m) for _, _, q, a, m in by_trace[query]} == {
        (seen.question, seen.answer, "MockLLM")}
    assert {r for r in by_trace[chat_id]} == {
        ("null", "no_contexts", apps.QUESTION, apps.ANSWER, "fakelistchatmodel")}
    assert stats["traces_not_rag"] == 2 and stats["traces_scored"] == 1
    assert stats["traces_sampled"] == 2 and stats["traces_unscorable"] == 1
    assert _health(chdb_client, db, stats["instance"])[("traces_not_rag", "")] == 2

    _register()
    res = CliRunner().invoke(app, ["status", "--since", "2h", "--clickhouse",
                                   f"chdb://{chdb_dir}", "--database", db])
    line = next(ln for ln in res.output.splitlines() if "not_rag" in ln)
    assert " 2 " in line, res.output
