"""The hand-written blind set (bench/data/faithfulness_rag_blind.jsonl, issue 22): its shape only.

No model here, and none may be run on it to tune anything: the set is read as data, the way
`train.evaluate --dev FILE` and bench/quality.py read it."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from tests.bench import handwritten as hw

REPO = Path(__file__).resolve().parents[2]
BLIND = REPO / "bench" / "data" / "faithfulness_rag_blind.jsonl"
OLDER = (REPO / "bench" / "data" / "faithfulness_rag_handwritten.jsonl",
         REPO / "bench" / "data" / "faithfulness_rag_confirm.jsonl")
FAITHFUL_KINDS = {"reword", "restate", "fuse", "no-answer", "terse", "list", "hedge"}
UNFAITHFUL_KINDS = {"swap-distractor", "swap-value", "negation", "attribution", "overgeneralize", "addition",
                    "unit", "temporal"}
ID = re.compile(r"rag-bl-(en|ja|zh)-(\d{2})([ab])")

_rows = hw.rows_of


def test_blind_set_shape():
    rows = _rows(BLIND)
    assert len(rows) == 180 and len({r["id"] for r in rows}) == 180
    assert Counter(r["lang"] for r in rows) == {"en": 60, "ja": 60, "zh": 60}
    assert Counter(r["label"]["faithful"] for r in rows) == {1: 90, 0: 90}
    for lang in ("en", "ja", "zh"):
        assert Counter(r["label"]["faithful"] for r in rows if r["lang"] == lang) == {1: 30, 0: 30}, lang
    for r in rows:
        hw.assert_row_shape(r, ID, FAITHFUL_KINDS, UNFAITHFUL_KINDS)
        assert len(set(r["contexts"])) == len(r["contexts"]), r["id"]


def test_each_scenario_has_one_faithful_and_one_unfaithful_answer():
    scenarios = hw.by_scenario(_rows(BLIND), ID)
    assert len(scenarios) == 90
    assert Counter(lang for lang, _ in scenarios) == {"en": 30, "ja": 30, "zh": 30}
    for lang in ("en", "ja", "zh"):
        assert sorted(int(n) for la, n in scenarios if la == lang) == list(range(1, 31)), lang
    hw.assert_pairs(scenarios)
    # which of a/b is the faithful one varies, in every language
    for lang in ("en", "ja", "zh"):
        first = Counter(r["label"]["faithful"] for (la, _), pair in scenarios.items() if la == lang
                        for r in pair if r["id"].endswith("a"))
        assert min(first[0], first[1]) >= 10, (lang, first)


def test_retrieval_shape_varies():
    rows = [r for r in _rows(BLIND) if r["id"].endswith("a")]
    assert {len(r["contexts"]) for r in rows} == {3, 4, 5}
    # about half the scenarios' passages open with a title line ("## Refunds", "【返品について】", ...)
    titled = [r for r in rows if any("\n" in c and len(c.split("\n", 1)[0]) <= 60 for c in r["contexts"])]
    assert 30 <= len(titled) <= 60, len(titled)


def test_answer_lengths_do_not_give_the_label_away():
    hw.assert_lengths_balanced(_rows(BLIND))


def test_every_kind_is_used_and_fuse_answers_are_common():
    rows = _rows(BLIND)
    assert {r["kind"] for r in rows} == FAITHFUL_KINDS | UNFAITHFUL_KINDS
    for lang in ("en", "ja", "zh"):
        sub = [r for r in rows if r["lang"] == lang]
        assert {r["kind"] for r in sub} == FAITHFUL_KINDS | UNFAITHFUL_KINDS, lang
        fuse = [r for r in sub if r["kind"] == "fuse"]
        assert len(fuse) >= 5 and all(r["label"]["faithful"] == 1 for r in fuse), lang


def test_no_text_shared_with_the_older_sets():
    # the project keeps its sets disjoint
    hw.assert_no_shared_text(_rows(BLIND), OLDER)


def test_training_data_builders_drop_rows_that_touch_it():
    # train/data/build.py guards every bench/data/faithfulness_*.jsonl, this file included
    from train.data import build

    dev = build.dev_shingles()
    for r in _rows(BLIND)[::2]:
        assert build.touches_dev({"premise": r["contexts"][0], "hypothesis": "x"}, dev), r["id"]
