"""Sentence and statement segmentation on English, Japanese and Chinese, with the seeds' examples."""

from __future__ import annotations

import pytest

from ragpulse.scorer.segment import split_sentences, split_statements


def test_seed003_japanese_answer_has_two_statements():
    answer = "太陽は核分裂によって動力を得ています。太陽の主な機能は太陽系に光を提供することです。"
    assert split_statements(answer) == [
        "太陽は核分裂によって動力を得ています。",
        "太陽の主な機能は太陽系に光を提供することです。",
    ]


def test_seed003_japanese_reference_has_three_sentences():
    ref = ("太陽は水素原子がヘリウムに融合する核融合によって動力を得ています。"
           "この核融合プロセスは大量のエネルギーを放出します。"
           "このエネルギーは熱と光を提供し、地球上の生命に不可欠です。")
    assert len(split_sentences(ref)) == 3


def test_seed000_context_example():
    ctx = "佐藤は研究開発部のエンジニアで、最近新製品の開発を担当しています"
    assert split_sentences(ctx) == [ctx]


def test_chinese_sentence_ends():
    text = "爱因斯坦出生于德国。他是一位理论物理学家！他的相对论闻名于世？是的"
    assert split_sentences(text) == ["爱因斯坦出生于德国。", "他是一位理论物理学家！",
                                     "他的相对论闻名于世？", "是的"]


def test_japanese_quote_does_not_end_the_outer_sentence():
    assert split_sentences("彼は「明日行く。」と言った。そうですか！") == [
        "彼は「明日行く。」と言った。", "そうですか！"]


@pytest.mark.parametrize(("text", "expected"), [
    ("Dr. Smith went to Washington. He arrived at 3.5 p.m. on Jan. 5! Was it late? Yes.",
     ["Dr. Smith went to Washington.", "He arrived at 3.5 p.m. on Jan. 5!", "Was it late?", "Yes."]),
    ("The U.S. economy grew. Prices rose 3.2% in 2023.",
     ["The U.S. economy grew.", "Prices rose 3.2% in 2023."]),
    ("Einstein was born in Germany.Later he moved.", ["Einstein was born in Germany.Later he moved."]),
])
def test_english(text, expected):
    assert split_sentences(text) == expected


def test_statements_strip_bullets_and_split_semicolons():
    assert split_statements("- First point; second clause\n- Third point.\n1. Numbered item") == [
        "First point", "second clause", "Third point.", "Numbered item"]


def test_empty_and_punctuation_only():
    assert split_sentences("") == [] and split_sentences("   \n ") == []
    assert split_statements("。。。!!") == []
