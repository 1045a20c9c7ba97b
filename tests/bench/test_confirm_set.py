"""The hand-written confirmation set (bench/data/faithfulness_rag_confirm.jsonl, issue 22): its shape only.

No model here: the set is read as data, the way `train.evaluate --dev FILE` and bench/quality.py read it."""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from pathlib import Path
from statistics import mean

REPO = Path(__file__).resolve().parents[2]
CONFIRM = REPO / "bench" / "data" / "faithfulness_rag_confirm.jsonl"
DEV = REPO / "bench" / "data" / "faithfulness_rag_handwritten.jsonl"
FAITHFUL_KINDS = {"reword", "restate", "fuse", "no-answer", "terse"}
UNFAITHFUL_KINDS = {"swap-distractor", "swap-value", "negation", "attribution", "overgeneralize", "addition"}
ID = re.compile(r"rag-cf-(en|ja|zh)-(\d{2})([ab])")


def _rows(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def test_confirm_set_shape():
    rows = _rows(CONFIRM)
    assert len(rows) == 120 and len({r["id"] for r in rows}) == 120
    assert Counter(r["lang"] for r in rows) == {"en": 40, "ja": 40, "zh": 40}
    assert Counter(r["label"]["faithful"] for r in rows) == {1: 60, 0: 60}
    for r in rows:
        assert set(r) == {"id", "question", "contexts", "answer", "label", "lang", "kind"}
        m = ID.fullmatch(r["id"])
        assert m and m.group(1) == r["lang"], r["id"]
        assert r["question"].strip() and r["answer"].strip()
        assert 3 <= len(r["contexts"]) <= 5, r["id"]
        assert all(isinstance(c, str) and 150 <= len(c) <= 900 for c in r["contexts"]), r["id"]
        kinds = FAITHFUL_KINDS if r["label"]["faithful"] == 1 else UNFAITHFUL_KINDS
        assert r["label"]["faithful"] in (0, 1) and r["kind"] in kinds, r["id"]


def test_each_scenario_has_one_faithful_and_one_unfaithful_answer():
    scenarios = defaultdict(list)
    for r in _rows(CONFIRM):
        lang, n, _ = ID.fullmatch(r["id"]).groups()
        scenarios[lang, n].append(r)
    assert len(scenarios) == 60
    assert Counter(lang for lang, _ in scenarios) == {"en": 20, "ja": 20, "zh": 20}
    for key, pair in scenarios.items():
        assert sorted(r["id"][-1] for r in pair) == ["a", "b"], key
        assert sorted(r["label"]["faithful"] for r in pair) == [0, 1], key
        a, b = pair
        assert a["question"] == b["question"] and a["contexts"] == b["contexts"], key
        assert a["answer"] != b["answer"], key


def test_answer_lengths_do_not_give_the_label_away():
    rows = _rows(CONFIRM)
    for lang in (None, "en", "ja", "zh"):
        sub = [r for r in rows if lang is None or r["lang"] == lang]
        f = mean(len(r["answer"]) for r in sub if r["label"]["faithful"] == 1)
        u = mean(len(r["answer"]) for r in sub if r["label"]["faithful"] == 0)
        assert abs(f - u) <= 0.25 * max(f, u), (lang, f, u)


def test_every_kind_is_used_and_fuse_answers_are_common():
    rows = _rows(CONFIRM)
    assert {r["kind"] for r in rows} == FAITHFUL_KINDS | UNFAITHFUL_KINDS
    for lang in ("en", "ja", "zh"):
        fuse = [r for r in rows if r["lang"] == lang and r["kind"] == "fuse"]
        assert len(fuse) >= 5 and all(r["label"]["faithful"] == 1 for r in fuse), lang


def test_no_text_taken_from_the_dev_set():
    # a confirmation set must not share passages with the set the settings were chosen on: no 27-character
    # stretch (the window train/data/build.py decontaminates with) of a dev context or answer appears here
    dev = _rows(DEV)
    windows = set()
    for r in dev:
        for text in (*r["contexts"], r["answer"]):
            windows.update(text[i:i + 27] for i in range(len(text) - 26))
    for r in _rows(CONFIRM):
        for text in (*r["contexts"], r["answer"], r["question"]):
            assert not any(text[i:i + 27] in windows for i in range(len(text) - 26)), r["id"]
