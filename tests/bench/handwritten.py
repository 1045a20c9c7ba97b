"""Checks shared by the shape tests of the hand-written faithfulness sets (bench/data): the
confirmation set and the blind set. Data only: no model is run on them here."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from statistics import mean

WINDOW = 27  # the stretch train/data/build.py decontaminates with


def rows_of(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def by_scenario(rows: list[dict], id_re: re.Pattern[str]) -> dict[tuple[str, str], list[dict]]:
    """Rows by (language, scenario number), from ids like ``rag-xx-en-01a``."""
    out: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for r in rows:
        lang, n, _ = id_re.fullmatch(r["id"]).groups()
        out[lang, n].append(r)
    return out


def assert_lengths_balanced(rows: list[dict]) -> None:
    """Faithful and unfaithful answers of about the same mean length (within 25 %), overall and
    per language, so that length does not give the label away."""
    for lang in (None, "en", "ja", "zh"):
        sub = [r for r in rows if lang is None or r["lang"] == lang]
        f = mean(len(r["answer"]) for r in sub if r["label"]["faithful"] == 1)
        u = mean(len(r["answer"]) for r in sub if r["label"]["faithful"] == 0)
        assert abs(f - u) <= 0.25 * max(f, u), (lang, f, u)


def assert_no_shared_text(rows: list[dict], older: Iterable[Path]) -> None:
    """No 27-character stretch of an older set's context or answer in a context, answer or
    question of ``rows``: the project keeps its sets disjoint."""
    windows: set[str] = set()
    for path in older:
        for r in rows_of(path):
            for text in (*r["contexts"], r["answer"]):
                windows.update(text[i:i + WINDOW] for i in range(len(text) - WINDOW + 1))
    for r in rows:
        for text in (*r["contexts"], r["answer"], r["question"]):
            assert not any(text[i:i + WINDOW] in windows
                           for i in range(len(text) - WINDOW + 1)), r["id"]


def assert_row_shape(r: dict, id_re: re.Pattern[str], faithful_kinds: set[str],
                     unfaithful_kinds: set[str]) -> None:
    """One row: the keys, an id naming its language, 3-5 contexts of 150-900 characters, and a
    kind of its label's side."""
    assert set(r) == {"id", "question", "contexts", "answer", "label", "lang", "kind"}
    m = id_re.fullmatch(r["id"])
    assert m and m.group(1) == r["lang"], r["id"]
    assert r["question"].strip() and r["answer"].strip()
    assert 3 <= len(r["contexts"]) <= 5, r["id"]
    assert all(isinstance(c, str) and c.strip() and 150 <= len(c) <= 900
               for c in r["contexts"]), r["id"]
    kinds = faithful_kinds if r["label"]["faithful"] == 1 else unfaithful_kinds
    assert r["label"]["faithful"] in (0, 1) and r["kind"] in kinds, r["id"]


def assert_pairs(by_scenario: dict[tuple[str, str], list[dict]]) -> None:
    """Each scenario: answers ``a`` and ``b``, one faithful and one not, to the same question
    over the same contexts."""
    for key, pair in by_scenario.items():
        assert sorted(r["id"][-1] for r in pair) == ["a", "b"], key
        assert sorted(r["label"]["faithful"] for r in pair) == [0, 1], key
        a, b = pair
        assert a["question"] == b["question"] and a["contexts"] == b["contexts"], key
        assert a["answer"] != b["answer"], key
