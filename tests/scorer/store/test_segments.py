"""The ``segments`` column (issue 42 item 1): the trace's language and the span attributes the
user lists, read from real spans by the preparer, cleaned, cut and capped per key, through the
real writer into chDB, and added to an older database by migration 8 (old rows read empty)."""

from __future__ import annotations

from typing import Any

import pytest

from ragpulse.common.schema import SCORE_COLUMNS
from ragpulse.scorer import Score
from ragpulse.scorer.pipeline import ScorerSettings
from ragpulse.scorer.pipeline.prepare import PrepareStep, build_preparer
from ragpulse.scorer.pipeline.segments import OTHER, SegmentReader, detect_language
from ragpulse.scorer.pipeline.trace_buffer import AssembledTrace
from ragpulse.scorer.store import (
    SchemaSettings,
    columns_of,
    init_schema,
    latest_version,
    rows_from_scores,
)
from ragpulse.scorer.traces import Sampler, Span
from tests.scorer.traces.sdk import Recorder, one_trace, to_record

from .helpers import meta, write_rows

EN = ("What is the refund window for online orders?",
      "Online orders can be refunded within 30 days of delivery.")
JA = ("オンライン注文の返金期限はいつですか？", "オンライン注文は配達から30日以内に返金できます。")
ZH = ("网上订单的退款期限是多久？", "网上订单可在送达后30天内退款。")


@pytest.mark.parametrize("texts, language", [
    (EN, "en"), (JA, "ja"), (ZH, "zh"),
    # Kanji-heavy Japanese still carries kana; a Latin-script text that is not English is other.
    (("返金規定を確認してください", "注文番号と氏名が必要です"), "ja"),
    (("¿Cuál es el plazo de reembolso?", "Los pedidos se reembolsan en 30 días."), "other"),
    (("환불 기간은 얼마입니까?", "배송 후 30일 이내입니다."), "other"),
    (("Какой срок возврата?", "Тридцать дней."), "other"),
    # English words around a Chinese product name, and Chinese around an English one
    (("How do I reset 小米 router?", "Hold the reset button for ten seconds."), "en"),
    (("如何重置 Router X2 路由器的密码？", "按住重置按钮十秒钟即可恢复出厂设置。"), "zh"),
    (("", "42 / 17 = ?"), ""),
])
def test_language_is_detected_by_script(texts: tuple[str, str], language: str) -> None:
    assert detect_language(" ".join(texts)) == language


def _trace(route: str, source: str, question: str = EN[0], answer: str = EN[1]) -> list[Span]:
    rec = Recorder()
    with rec.span("chat", {"openinference.span.kind": "CHAIN", "input.value": question,
                           "output.value": answer, "http.route": route}):
        with rec.span("llm", {"openinference.span.kind": "LLM", "app.doc_source": source,
                              "llm.input_messages.0.message.role": "user",
                              "llm.input_messages.0.message.content": question}):
            pass
    return one_trace(to_record(rec.finished()))


def _prepare(reader: SegmentReader, spans: list[Span]) -> dict[str, str]:
    prep = build_preparer(Sampler(), segments=reader)(
        AssembledTrace(spans[0].trace_id, spans, [], "complete", True))
    assert prep.keep and prep.meta is not None
    return dict(prep.meta.segments)


def test_the_preparer_reads_language_and_the_listed_attributes() -> None:
    reader = SegmentReader(("language", "http.route", "app.doc_source", "app.absent"))
    got = _prepare(reader, _trace("/v1/ask", "wiki"))
    assert got == {"language": "en", "http.route": "/v1/ask", "app.doc_source": "wiki"}
    assert _prepare(reader, _trace("/v1/ask", "kb", *JA))["language"] == "ja"
    # The language is opt-in: a reader not asked for it reads only the attributes.
    assert "language" not in _prepare(SegmentReader(("http.route",)), _trace("/v1/ask", "wiki"))
    # Without a reader no segments; the language with excerpts off too (a label, not text).
    prep = build_preparer(Sampler(), excerpts=False)(
        AssembledTrace("x", _trace("/r", "s", *ZH), [], "complete", True))
    assert prep.meta is not None and dict(prep.meta.segments) == {}
    assert _prepare(SegmentReader(("language",)), _trace("/r", "s", *ZH)) == {"language": "zh"}


def test_values_are_cleaned_and_cut() -> None:
    reader = SegmentReader(("http.route",), max_chars=12)
    hostile = "/a\u202e\x1b[31m\\" + "x" * 100
    (row,) = rows_from_scores([Score(metric="faithfulness", value=0.5)],
                              meta(1, segments=_prepare(reader, _trace(hostile, "s"))))
    route = row.segments["http.route"]
    assert len(route) <= 12 and route.startswith("/a")
    assert "\u202e" not in route and "\x1b" not in route and "\\" not in route


def test_the_cap_holds_per_key_and_is_counted() -> None:
    n = 50
    reader = SegmentReader(("http.route", "app.doc_source"), max_values=n)
    routes = [_prepare(reader, _trace(f"/r{i}", "wiki"))["http.route"] for i in range(n + 10)]
    assert routes[:n] == [f"/r{i}" for i in range(n)]
    assert routes[n:] == [OTHER] * 10 and len(set(routes)) == n + 1
    # An admitted value stays itself past the cap; the other key has its own count.
    again = _prepare(reader, _trace("/r7", "kb"))
    assert (again["http.route"], again["app.doc_source"]) == ("/r7", "kb")
    assert reader.capped == 10
    step = PrepareStep(build_preparer(Sampler(), segments=reader), None, None,  # type: ignore[arg-type]
                       drop_evicted=False)
    assert step.stats()["segment_values_capped"] == 10


def test_the_setting() -> None:
    w = ScorerSettings(write={"segment_attributes": '["http.route", "app.doc_source"]'}).write
    assert w.segment_attributes == ("http.route", "app.doc_source")
    assert ScorerSettings(write={"segment_attributes": "http.route, app.x"}).write \
        .segment_attributes == ("http.route", "app.x")
    # `language` is asked for by name (detected, not read from a span)
    assert ScorerSettings(write={"segment_attributes": "language,http.route"}).write \
        .segment_attributes == ("language", "http.route")
    for bad, message in (("model", "reserved"), ("a b", "attribute name"),
                         ("x,x", "twice")):
        with pytest.raises(ValueError, match=message):
            ScorerSettings(write={"segment_attributes": bad})



def test_migration_8_adds_the_column_and_old_rows_read_empty(chdb_client: Any,
                                                             rag_database: str) -> None:
    s = SchemaSettings(database=rag_database)
    init_schema(chdb_client, s, target=7)
    # A row written by a version-7 writer: every column but segments.
    old = [c.name for c in SCORE_COLUMNS if c.name != "segments"]
    (row,) = rows_from_scores([Score(metric="faithfulness", value=0.2)], meta(1))
    cols = columns_of([row])
    chdb_client.insert("scores", [cols[i] for i, c in enumerate(SCORE_COLUMNS)
                                  if c.name != "segments"],
                       database=rag_database, column_names=old, column_oriented=True)

    report = init_schema(chdb_client, s)
    assert (report.before, report.after) == (7, latest_version()) and report.after >= 8
    # The view was re-created with the column; the old row reads as empty.
    got = chdb_client.query(f"SELECT trace_id, segments FROM `{rag_database}`.scores_dedup"
                            ).result_rows
    assert got == [(row.trace_id, {})]
    write_rows(chdb_client, rag_database, rows_from_scores(
        [Score(metric="faithfulness", value=0.9)],
        meta(2, segments={"language": "ja", "http.route": "/v1/ask"})))
    got = chdb_client.query(
        f"SELECT segments['language'], segments['http.route'] FROM `{rag_database}`.scores_dedup "
        "ORDER BY trace_id").result_rows
    assert got == [("", ""), ("ja", "/v1/ask")]
