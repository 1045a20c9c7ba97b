"""The hand-written confirmation set (bench/data/faithfulness_rag_confirm.jsonl, issue 22): its shape only.

No model here: the set is read as data, the way `train.evaluate --dev FILE` and bench/quality.py read it."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from tests.bench import handwritten as hw

REPO = Path(__file__).resolve().parents[2]
CONFIRM = REPO / "bench" / "data" / "faithfulness_rag_confirm.jsonl"
DEV = REPO / "bench" / "data" / "faithfulness_rag_handwritten.jsonl"
FAITHFUL_KINDS = {"reword", "restate", "fuse", "no-answer", "terse"}
UNFAITHFUL_KINDS = {"swap-distractor", "swap-value", "negation", "attribution", "overgeneralize", "addition"}
ID = re.compile(r"rag-cf-(en|ja|zh)-(\d{2})([ab])")

_rows = hw.rows_of


def test_confirm_set_shape():
    rows = _rows(CONFIRM)
    assert len(rows) == 120 and len({r["id"] for r in rows}) == 120
    assert Counter(r["lang"] for r in rows) == {"en": 40, "ja": 40, "zh": 40}
    assert Counter(r["label"]["faithful"] for r in rows) == {1: 60, 0: 60}
    for r in rows:
        hw.assert_row_shape(r, ID, FAITHFUL_KINDS, UNFAITHFUL_KINDS)


def test_each_scenario_has_one_faithful_and_one_unfaithful_answer():
    scenarios = hw.by_scenario(_rows(CONFIRM), ID)
    assert len(scenarios) == 60
    assert Counter(lang for lang, _ in scenarios) == {"en": 20, "ja": 20, "zh": 20}
    hw.assert_pairs(scenarios)


def test_answer_lengths_do_not_give_the_label_away():
    hw.assert_lengths_balanced(_rows(CONFIRM))


def test_every_kind_is_used_and_fuse_answers_are_common():
    rows = _rows(CONFIRM)
    assert {r["kind"] for r in rows} == FAITHFUL_KINDS | UNFAITHFUL_KINDS
    for lang in ("en", "ja", "zh"):
        fuse = [r for r in rows if r["lang"] == lang and r["kind"] == "fuse"]
        assert len(fuse) >= 5 and all(r["label"]["faithful"] == 1 for r in fuse), lang


def test_no_text_taken_from_the_dev_set():
    # a confirmation set must not share passages with the set the settings were chosen on
    hw.assert_no_shared_text(_rows(CONFIRM), [DEV])
