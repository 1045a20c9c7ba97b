"""The faithfulness training-data builders (train/data) and the hand-written dev set (bench/data).

Only the pure parts run here: the builders' source snapshots live outside the repository."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from train.data import build, qa_synth, templates

REPO = Path(__file__).resolve().parents[2]
DEV = REPO / "bench" / "data" / "faithfulness_rag_handwritten.jsonl"
KINDS = {"restate", "reword", "fuse", "no-answer", "terse", "swap-distractor", "swap-value", "negation",
         "attribution", "overgeneralize", "addition"}


def test_restatements_fill_the_question_with_the_answer():
    assert qa_synth.restate_ja("クリミア戦争が開戦したのはいつか。", "1853年10月") == "クリミア戦争が開戦したのは1853年10月です。"
    assert qa_synth.restate_ja("高校生の上位何パーセント？", "15パーセント") == "高校生の上位15パーセントです。"
    assert qa_synth.restate_zh("布鲁塞尔协定主要是为了抵御哪个国家？", "德国") == "布鲁塞尔协定主要是为了抵御德国。"
    assert qa_synth.restate_zh("成都道为什么繁盛？", "因为海岸线") is None
    assert qa_synth.restate_en("Who led the Normans?", "Rollo") == "Rollo led the Normans."


def test_negation_and_number_swap_change_one_thing():
    assert qa_synth.negate("首都は東京です。", "ja") == "首都は東京ではありません。"
    assert qa_synth.negate("The capital is Paris.", "en") == "The capital is not Paris."
    import random
    swapped = qa_synth.swap_number("1853年", random.Random(0))
    assert swapped != "1853年" and swapped.endswith("年")


def test_templates_are_balanced_and_well_formed():
    for lang in ("en", "ja", "zh"):
        rows = list(templates.build(lang, 400, seed=1))
        labels = Counter(r["label"] for r in rows)
        assert abs(labels[1] - labels[0]) <= 0.1 * len(rows)
        assert all(set(r) >= {"premise", "hypothesis", "label", "source", "lang"} and r["lang"] == lang
                   for r in rows)
        # a faithful reworded answer is not the context's own sentence
        rew = [r for r in rows if r["kind"] == "reword"]
        assert rew and all(r["hypothesis"] not in r["premise"] for r in rew)


def test_rows_overlapping_the_dev_set_are_caught():
    dev = build.dev_shingles()
    row = json.loads(DEV.read_text(encoding="utf-8").splitlines()[0])
    assert build.touches_dev({"premise": row["contexts"][0], "hypothesis": "x"}, dev)
    assert not build.touches_dev({"premise": "The museum opens at 9:00 a.m. on weekdays.", "hypothesis": "x"}, dev)


def test_handwritten_dev_set_shape():
    rows = [json.loads(x) for x in DEV.read_text(encoding="utf-8").splitlines() if x.strip()]
    assert len(rows) >= 150 and len({r["id"] for r in rows}) == len(rows)
    per = Counter(r["lang"] for r in rows)
    assert min(per[lang] for lang in ("en", "ja", "zh")) >= 50
    faithful = sum(r["label"]["faithful"] for r in rows)
    assert 0.4 <= faithful / len(rows) <= 0.6
    for r in rows:
        assert 2 <= len(r["contexts"]) <= 5 and r["question"] and r["answer"]
        assert r["kind"] in KINDS and r["label"]["faithful"] in (0, 1)
    answers = {r["answer"] for r in rows}
    # the three examples of issue 22
    assert "No. The Basic plan only includes email support; phone support comes with the Business plan." in answers
    assert "未使用であれば、商品到着後14日以内に返品できます。" in answers
    assert "会员卡从开卡那天起有效期为两年，到期前一个月可以在网上续期。" in answers
