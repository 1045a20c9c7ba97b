"""The ``unsupported`` column: a faithfulness score's unsupported statements with the passage
that came closest, bounded, cleaned and switched off with the excerpts, through the real writer
into chDB and back, and added to an older database by migration 7 (old rows read as empty)."""

from __future__ import annotations

from typing import Any

from ragpulse.common.schema import SCORE_COLUMNS
from ragpulse.scorer import Score, Unsupported
from ragpulse.scorer.pipeline import ScorerSettings
from ragpulse.scorer.pipeline.evaluate import row_builder
from ragpulse.scorer.store import (
    DEFAULT_EVIDENCE_CHARS,
    DEFAULT_MAX_UNSUPPORTED,
    SchemaSettings,
    columns_of,
    init_schema,
    latest_version,
    rows_from_scores,
)

from .helpers import meta, write_rows

HUGE = "The plan also includes free flights to the moon " * 25_000  # about 1.2 MB
BROKEN = "Refunds take 90 days \udcff\udce9 and cost \ud800 nothing."  # lone surrogates: bad UTF-8


def _faithfulness(*unsupported: Unsupported) -> Score:
    return Score(metric="faithfulness", value=0.25, judge="model", model="m",
                 counts={"statements": 4, "supported": 1}, unsupported=unsupported)



def test_statements_are_capped_cut_and_made_valid_text() -> None:
    many = [Unsupported(f"made-up claim {i}", i % 3, f"passage {i}", i / 100) for i in range(25)]
    hostile = [Unsupported(HUGE, 1, "<script>alert(1)</script>" + HUGE, 0.01),
               Unsupported(BROKEN, 0, BROKEN, float("nan")),
               Unsupported("no passage named", -1, "ignored without a context", None)]
    (row,) = rows_from_scores([_faithfulness(*hostile, *many)], meta(1))

    assert len(row.unsupported) == DEFAULT_MAX_UNSUPPORTED == 3  # the first three, in order
    (s1, c1, p1, q1), (s2, c2, p2, q2), (s3, c3, p3, q3) = row.unsupported
    assert len(s1) == len(p1) == DEFAULT_EVIDENCE_CHARS and s1.endswith("…") and p1.endswith("…")
    assert p1.startswith("<script>")  # stored as text; the report escapes it
    assert (c1, q1) == (1, 0.01)
    assert "\ufffd" in s2 and "\ufffd" in p2
    assert s2.encode("utf-8") and p2.encode("utf-8")  # valid UTF-8: no lone surrogate left
    assert (c2, q2) == (0, None)  # a NaN support is no support value, never a NaN
    assert (s3, c3, p3, q3) == ("no passage named", -1, "", None)
    # Other metrics carry none, and a short excerpt setting bounds the statements too.
    (other,) = rows_from_scores([Score(metric="context_precision", value=0.0)], meta(2))
    assert other.unsupported == []
    (short,) = rows_from_scores([_faithfulness(*hostile)], meta(3), max_excerpt_chars=50)
    assert all(len(s) <= 50 and len(p) <= 50 for s, _, p, _ in short.unsupported)


def test_the_excerpts_switch_stores_no_statement() -> None:
    score = _faithfulness(Unsupported("made-up claim", 0, "the passage", 0.1))
    kept = row_builder(ScorerSettings())([score], meta(1))
    off = row_builder(ScorerSettings(write={"excerpts": False}))([score], meta(1))
    no_text = row_builder(ScorerSettings(privacy={"store_text": False}))([score], meta(1))
    none = row_builder(ScorerSettings(write={"max_unsupported": 0}))([score], meta(1))

    assert kept[0].unsupported == [("made-up claim", 0, "the passage", 0.1)]
    assert off[0].unsupported == no_text[0].unsupported == none[0].unsupported == []
    assert (off[0].question, off[0].explanation) == ("", "")


def test_statements_round_trip_through_the_writer(chdb_client: Any, rag_schema: SchemaSettings
                                                  ) -> None:
    db = rag_schema.database
    stored = rows_from_scores([_faithfulness(Unsupported(BROKEN, 2, "Ünïcode 字 passage", 0.125),
                                             Unsupported("second", -1, "", None))], meta(1))
    stored += rows_from_scores([Score(metric="answer_relevancy", value=0.5)], meta(2))
    write_rows(chdb_client, db, stored)

    got = chdb_client.query(f"SELECT metric, unsupported FROM `{db}`.scores_dedup "
                            "ORDER BY metric").result_rows
    assert got[0] == ("answer_relevancy", [])
    (s, c, p, q), second = [tuple(u.values()) for u in got[1][1]]
    assert (s, c, p, q) == (stored[0].unsupported[0][0], 2, "Ünïcode 字 passage", 0.125)
    assert second == ("second", -1, "", None)


def test_migration_7_adds_the_column_and_old_rows_read_empty(chdb_client: Any,
                                                             rag_database: str) -> None:
    s = SchemaSettings(database=rag_database)
    init_schema(chdb_client, s, target=6)
    # A row written by a version-6 writer: every column but the new ones (7, and 8's segments).
    new = {"unsupported", "segments"}
    old = [c.name for c in SCORE_COLUMNS if c.name not in new]
    (row,) = rows_from_scores([Score(metric="faithfulness", value=0.2)], meta(1))
    cols = columns_of([row])
    chdb_client.insert("scores", [cols[i] for i, c in enumerate(SCORE_COLUMNS)
                                  if c.name not in new],
                       database=rag_database, column_names=old, column_oriented=True)
    dedup = [r[0] for r in chdb_client.query(
        f"DESCRIBE TABLE `{rag_database}`.scores_dedup").result_rows]
    assert "unsupported" not in dedup

    report = init_schema(chdb_client, s)
    assert (report.before, report.after) == (6, latest_version()) and report.after >= 7
    # The view was re-created: a plain view's columns are fixed when it is created.
    got = chdb_client.query(f"SELECT trace_id, unsupported FROM `{rag_database}`.scores_dedup"
                            ).result_rows
    assert got == [(row.trace_id, [])]
    # And the current writer's rows land beside the old one.
    write_rows(chdb_client, rag_database, rows_from_scores(
        [_faithfulness(Unsupported("new claim", 0, "p", 0.3))], meta(2)))
    assert chdb_client.command(
        f"SELECT countIf(notEmpty(unsupported)) FROM `{rag_database}`.scores_dedup") == 1
