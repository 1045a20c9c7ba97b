"""The lexical views of the local judge (no model)."""

from __future__ import annotations

import pytest

from ragpulse.scorer.judges.local.analysis import rate
from ragpulse.scorer.judges.local.text import (
    content_units,
    coverage,
    idf_weights,
    is_noncommittal,
    weighted_coverage,
)


def test_english_units_are_content_words_lightly_stemmed() -> None:
    assert content_units("What are the capitals of the countries?", question=True) == {
        "capital", "country"}
    assert content_units("In 1999 she won 2 medals.") == {"1999", "won", "2", "medal"}


def test_japanese_units_are_bigrams_without_pure_hiragana_or_interrogatives() -> None:
    units = content_units("第190回国会が開催された年は何年ですか？", question=True)
    assert {"国会", "開催", "190"} <= units
    assert not any(u in units for u in ("何年", "です", "すか", "され"))


def test_chinese_function_characters_split_runs() -> None:
    units = content_units("长城是在哪个朝代大规模修建的？", question=True)
    assert {"长城", "朝代", "规模", "修建"} <= units
    assert not any(u in units for u in ("城是", "是在", "哪个", "建的"))
    # Japanese keeps the same characters inside words (平和 is a word, not 平 + particle)
    assert "平和" in content_units("世界の平和を願う。")


def test_full_width_text_folds_to_ascii() -> None:
    assert content_units("２０１５年") == content_units("2015年")


def test_coverage_and_idf_weighting() -> None:
    q = frozenset({"a", "b", "c", "d"})
    assert coverage(q, {"a", "b"}) == 0.5
    assert coverage(frozenset(), {"a"}) == 0.0
    docs = [frozenset({"a", "b"}), frozenset({"a", "c"}), frozenset({"a"})]
    w = idf_weights(["a", "b"], docs)
    assert w["b"] > w["a"] > 0  # the unit every document shares weighs least
    assert weighted_coverage(w, {"b"}) > weighted_coverage(w, {"a"})
    assert weighted_coverage({}, {"a"}) == 0.0


@pytest.mark.parametrize("text,expected", [
    ("I don't know.", True),
    ("I do not know the answer to that.", True),
    ("I cannot answer this question based on the context.", True),
    ("The context does not mention the year.", True),
    ("The passage doesn't say.", True),
    ("I'm not sure.", True),
    ("原因は不明です。", False),
    ("わかりません。", True),
    ("申し訳ございませんが、分かりかねます。", True),
    ("不知道。", True),
    ("无法回答。", True),
    ("Paris is the capital of France.", False),
    ("The cause of the fire is still unknown, investigators said on Monday.", False),
    ("2015年です。", False),
    ("长城在明朝修建。", False),
])
def test_noncommittal(text: str, expected: bool) -> None:
    assert is_noncommittal(text) is expected


def test_rate_maps_onto_the_three_levels() -> None:
    cuts = (0.2, 0.45)
    assert [rate(v, cuts) for v in (0.0, 0.19, 0.2, 0.44, 0.45, 1.0)] == [0, 0, 1, 1, 2, 2]
