"""The hand-written blind set (bench/data/faithfulness_rag_blind.jsonl, issue 22): its shape only.

No model here, and none may be run on it to tune anything: the set is read as data, the way
`train.evaluate --dev FILE` and bench/quality.py read it."""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from pathlib import Path
from statistics import mean

REPO = Path(__file__).resolve().parents[2]
BLIND = REPO / "bench" / "data" / "faithfulness_rag_blind.jsonl"
OLDER = (REPO / "bench" / "data" / "faithfulness_rag_handwritten.jsonl",
         REPO / "bench" / "data" / "faithfulness_rag_confirm.jsonl")
FAITHFUL_KINDS = {"reword", "restate", "fuse", "no-answer", "terse", "list", "hedge"}
UNFAITHFUL_KINDS = {"swap-distractor", "swap-value", "negation", "attribution", "overgeneralize", "addition",
                    "unit", "temporal"}
ID = re.compile(r"rag-bl-(en|ja|zh)-(\d{2})([ab])")
WINDOW = 27  # the stretch train/data/build.py decontaminates with


def _rows(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def _scenarios(rows: list[dict]) -> dict[tuple[str, str], list[dict]]:
    out = defaultdict(list)
    for r in rows:
        lang, n, _ = ID.fullmatch(r["id"]).groups()
        out[lang, n].append(r)
    return out


def test_blind_set_shape():
    rows = _rows(BLIND)
    assert len(rows) == 180 and len({r["id"] for r in rows}) == 180
    assert Counter(r["lang"] for r in rows) == {"en": 60, "ja": 60, "zh": 60}
    assert Counter(r["label"]["faithful"] for r in rows) == {1: 90, 0: 90}
    for lang in ("en", "ja", "zh"):
        assert Counter(r["label"]["faithful"] for r in rows if r["lang"] == lang) == {1: 30, 0: 30}, lang
    for r in rows:
        assert set(r) == {"id", "question", "contexts", "answer", "label", "lang", "kind"}
        m = ID.fullmatch(r["id"])
        assert m and m.group(1) == r["lang"], r["id"]
        assert r["question"].strip() and r["answer"].strip()
        assert 3 <= len(r["contexts"]) <= 5, r["id"]
        assert all(isinstance(c, str) and c.strip() and 150 <= len(c) <= 900 for c in r["contexts"]), r["id"]
        assert len(set(r["contexts"])) == len(r["contexts"]), r["id"]
        kinds = FAITHFUL_KINDS if r["label"]["faithful"] == 1 else UNFAITHFUL_KINDS
        assert r["label"]["faithful"] in (0, 1) and r["kind"] in kinds, r["id"]


def test_each_scenario_has_one_faithful_and_one_unfaithful_answer():
    scenarios = _scenarios(_rows(BLIND))
    assert len(scenarios) == 90
    assert Counter(lang for lang, _ in scenarios) == {"en": 30, "ja": 30, "zh": 30}
    for lang in ("en", "ja", "zh"):
        assert sorted(int(n) for la, n in scenarios if la == lang) == list(range(1, 31)), lang
    for key, pair in scenarios.items():
        assert sorted(r["id"][-1] for r in pair) == ["a", "b"], key
        assert sorted(r["label"]["faithful"] for r in pair) == [0, 1], key
        a, b = pair
        assert a["question"] == b["question"] and a["contexts"] == b["contexts"], key
        assert a["answer"] != b["answer"], key
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
    rows = _rows(BLIND)
    for lang in (None, "en", "ja", "zh"):
        sub = [r for r in rows if lang is None or r["lang"] == lang]
        f = mean(len(r["answer"]) for r in sub if r["label"]["faithful"] == 1)
        u = mean(len(r["answer"]) for r in sub if r["label"]["faithful"] == 0)
        assert abs(f - u) <= 0.25 * max(f, u), (lang, f, u)


def test_every_kind_is_used_and_fuse_answers_are_common():
    rows = _rows(BLIND)
    assert {r["kind"] for r in rows} == FAITHFUL_KINDS | UNFAITHFUL_KINDS
    for lang in ("en", "ja", "zh"):
        sub = [r for r in rows if r["lang"] == lang]
        assert {r["kind"] for r in sub} == FAITHFUL_KINDS | UNFAITHFUL_KINDS, lang
        fuse = [r for r in sub if r["kind"] == "fuse"]
        assert len(fuse) >= 5 and all(r["label"]["faithful"] == 1 for r in fuse), lang


def test_no_text_shared_with_the_older_sets():
    # the project keeps its sets disjoint: no 27-character stretch of a dev or confirmation context or
    # answer appears in a blind context, answer or question
    windows = set()
    for path in OLDER:
        for r in _rows(path):
            for text in (*r["contexts"], r["answer"]):
                windows.update(text[i:i + WINDOW] for i in range(len(text) - WINDOW + 1))
    for r in _rows(BLIND):
        for text in (*r["contexts"], r["answer"], r["question"]):
            assert not any(text[i:i + WINDOW] in windows for i in range(len(text) - WINDOW + 1)), r["id"]


def test_training_data_builders_drop_rows_that_touch_it():
    # train/data/build.py guards every bench/data/faithfulness_*.jsonl, this file included
    from train.data import build

    dev = build.dev_shingles()
    for r in _rows(BLIND)[::2]:
        assert build.touches_dev({"premise": r["contexts"][0], "hypothesis": "x"}, dev), r["id"]
