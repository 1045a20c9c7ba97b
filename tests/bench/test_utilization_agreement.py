"""bench/utilization_agreement.py: the truth it measures the judges against comes from the RAG
corpus's support labels, in the three retrievals it describes, and the agreement test's fixed
set holds the corpus's own labels (no judge runs here)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "scorer" / "data" / "utilization_agreement.jsonl"


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch):
    from bench import utilization_agreement

    return utilization_agreement


def test_the_three_retrievals_of_an_answer(bench) -> None:
    cases = bench.corpus_cases(limit=40)
    by_answer: dict[str, dict[str, dict]] = {}
    for c in cases:
        by_answer.setdefault(c["id"], {})[c["variant"]] = c
    assert by_answer and all(sum(c["used"]) >= 1 for c in cases)
    for variants in by_answer.values():
        first, rev = variants["as retrieved"], variants["reversed"]
        assert rev["used"] == first["used"][::-1] and rev["contexts"] == first["contexts"][::-1]
        if sum(first["used"]) >= 2:
            only = variants["used only"]
            assert only["used"] == [1] * sum(first["used"])
            assert only["contexts"] == [c for c, u in zip(first["contexts"], first["used"]) if u]
        else:
            assert "used only" not in variants


def test_a_limit_spreads_over_every_language(bench) -> None:
    cases = bench.corpus_cases(limit=60)
    assert {c["lang"] for c in cases} == {"en", "ja", "zh"}
    assert len({c["id"] for c in cases}) <= 60


def test_the_fixed_set_carries_the_corpus_labels() -> None:
    from train.data.rag_corpus import answer_text, committed

    answers = {f"{r['id']}{'abcde'[j]}": (r, a) for r in committed()
               for j, a in enumerate(r["answers"])}
    rows = [json.loads(line) for line in FIXTURE.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 15 and {r["lang"] for r in rows} == {"en", "ja", "zh"}
    for row in rows:
        scenario, answer = answers[row["id"]]
        assert all(s["label"] == 1 for s in answer["statements"])
        support = {i for s in answer["statements"] for i in s["support"]}
        assert row["used"] == [int(i in support) for i in range(len(scenario["contexts"]))]
        assert row["contexts"] == scenario["contexts"] and row["question"] == scenario["question"]
        assert row["answer"] == answer_text(scenario["lang"], answer["style"],
                                            answer["statements"])
    # one, two and three passages used; a single used passage first and lower down
    assert {sum(r["used"]) for r in rows} == {1, 2, 3}
    assert {r["used"].index(1) > 0 for r in rows if sum(r["used"]) == 1} == {False, True}
