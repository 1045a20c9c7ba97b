"""Rows from scores, and hostile text through the writer into real chDB and back."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from ragpulse.common.schema import SCORE_COLUMNS
from ragpulse.scorer import Score
from ragpulse.scorer.store import (
    ScoredTraceMeta,
    columns_of,
    rows_from_scores,
    safe_label,
    safe_text,
)

from .helpers import T0, meta, scores, trace_id, write_rows


def test_rows_carry_score_and_trace_metadata() -> None:
    at = datetime(2026, 11, 20, 12, 5, 0, 123456, tzinfo=UTC)
    r_ok, r_null = rows_from_scores(scores(), meta(1, rate=0.25), scored_at=at)
    assert r_ok.trace_id == trace_id(1) and r_ok.span_id == f"{1:016x}"
    assert (r_ok.service, r_ok.environment, r_ok.model, r_ok.prompt_version, r_ok.retriever_version) \
        == ("svc", "prod", "gpt-x", "p1", "r1")
    assert (r_ok.metric, r_ok.value, r_ok.status, r_ok.reason) == ("faithfulness", 0.75, "ok", "")
    assert (r_ok.interval_low, r_ok.interval_high) == (0.3, 0.95)
    assert (r_ok.judge, r_ok.judge_model, r_ok.judge_prompt_version) == ("local", "m", "v1")
    assert (r_ok.llm_calls, r_ok.prompt_tokens, r_ok.completion_tokens, r_ok.judge_latency_ms) \
        == (0.5, 100, 20, 12.5)
    assert r_ok.counts == {"statements": 4, "supported": 3}
    assert r_ok.sampling_rate == 0.25 and r_ok.explanation == "3 of 4 statements supported"
    # Version = scored_at in ms, truncated the way DateTime64(3) stores it.
    assert r_ok.scored_at.microsecond == 123000
    assert r_ok.version == int(at.replace(microsecond=123000).timestamp() * 1000)
    assert (r_null.value, r_null.status, r_null.reason) == (None, "null", "no_answer")
    assert r_null.interval_low is None and r_null.question == ""


def test_rows_have_one_value_per_column() -> None:
    """rows_from_scores builds rows positionally (tuple.__new__, no arity check): a column added
    to ScoreRow and the schema but not to the builder would give short rows silently."""
    from ragpulse.scorer.store.rows import ScoreRow

    for row in rows_from_scores(scores(), meta(1)):
        assert len(row) == len(ScoreRow._fields) == len(SCORE_COLUMNS)


def test_meta_validation() -> None:
    with pytest.raises(ValueError, match="sampling_rate"):
        meta(1, rate=0.0)
    with pytest.raises(ValueError, match="sampling_rate"):
        meta(1, rate=float("nan"))
    with pytest.raises(ValueError, match="hex"):
        rows_from_scores(scores(), ScoredTraceMeta(trace_id="xyz", ts=T0, service="s"))
    with pytest.raises(ValueError, match="timezone"):
        rows_from_scores(scores(), ScoredTraceMeta(trace_id="a" * 32, ts=T0.replace(tzinfo=None), service="s"))
    # Bytes ids (as in OTLP protobuf) are accepted and hex-encoded; upper case is normalised.
    r = rows_from_scores(scores(), ScoredTraceMeta(trace_id=bytes(range(16)), ts=T0, service="s",
                                             span_id="ABCDEF0123456789"))[0]
    assert r.trace_id == bytes(range(16)).hex() and r.span_id == "abcdef0123456789"


def test_excerpts_are_cut_and_text_made_safe() -> None:
    m = meta(1, question_excerpt="q" * 5000, answer_excerpt=b"ok \xff\xfe bytes")
    r = rows_from_scores(scores(), m, max_excerpt_chars=100)[0]
    assert r.question == "q" * 100 and r.answer == "ok \ufffd\ufffd bytes"
    assert safe_text("a\udcffb") == "a\ufffdb" and safe_text(None) == ""
    assert safe_text("日本語テキスト", 3) == "日本語"
    # Disabled excerpts (None) store empty strings.
    assert rows_from_scores(scores(), meta(1), max_excerpt_chars=0)[0].question == ""


def test_columns_of_matches_schema_order() -> None:
    rs = rows_from_scores(scores(), meta(1))
    cols = columns_of(rs)
    assert len(cols) == len(SCORE_COLUMNS) and all(len(c) == 2 for c in cols)
    assert cols[[c.name for c in SCORE_COLUMNS].index("metric")] == ["faithfulness", "answer_relevancy"]
    assert columns_of([]) == []


HOSTILE = [
    "it's a 'quoted' \"string\"",
    "back\\slash \\' \\\\ end\\",
    "'; DROP TABLE scores; --",
    "{db} {x:String} %(a)s %s ? $1",
    "nul\x00byte and \r\n\t controls",
    "lone surrogate \udcff from invalid UTF-8",
    "emoji 🦜 and 日本語",
]


def test_hostile_strings_round_trip(rag_schema: Any, chdb_client: Any) -> None:
    db = rag_schema.database
    big = "x" * (1 << 20)  # a 1 MiB excerpt, stored whole when the limit allows it
    all_rows = []
    for i, text in enumerate(HOSTILE):
        m = ScoredTraceMeta(trace_id=trace_id(i), ts=T0, service=text, environment=text, model=text,
                      prompt_version=text, retriever_version=text, span_id="",
                      question_excerpt=text, answer_excerpt=b"raw \xc3\x28 invalid utf-8 " + text.encode(
                          "utf-8", "surrogateescape"))
        s = Score(metric=text, value=0.5, judge=text, model=text, prompt_version=text,
                  counts={text: 1}, explanation=text)
        all_rows += rows_from_scores([s], m)
    all_rows += rows_from_scores(scores(), meta(99, question_excerpt=big), max_excerpt_chars=None)
    write_rows(chdb_client, db, all_rows, timeout_s=60)
    got = chdb_client.query(
        f"SELECT trace_id, service, metric, question, answer, judge, mapKeys(counts)[1], explanation "
        f"FROM `{db}`.scores WHERE trace_id != {{big:String}} ORDER BY trace_id",
        parameters={"big": trace_id(99)}).result_rows
    assert len(got) == len(HOSTILE)
    for (tid, service, metric, q, a, judge, key, expl), text in zip(got, HOSTILE, strict=True):
        assert len(tid) == 32
        want = safe_text(text)
        assert (metric, q, judge, key, expl) == (want,) * 5
        assert service == safe_label(text)  # labels lose control characters and backslashes
        assert a.startswith("raw \ufffd( invalid utf-8 ")
    # The table survived its would-be injection, and the 1 MiB excerpt came back whole.
    assert chdb_client.command(f"SELECT count() FROM `{db}`.scores") == len(HOSTILE) + 2
    sizes = chdb_client.query(f"SELECT length(question) FROM `{db}`.scores WHERE trace_id = "
                              "{t:String}", parameters={"t": trace_id(99)}).result_rows
    assert sizes == [(1 << 20,), (1 << 20,)]


def test_scored_at_default_is_now() -> None:
    before = datetime.now(UTC) - timedelta(seconds=1)
    r = rows_from_scores(scores(), meta(1))[0]
    assert r.scored_at >= before and r.scored_at.tzinfo is not None
