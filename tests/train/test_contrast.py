"""Paraphrase contrasts (train/data/contrast.py): a person's supported rewording and the same
rewording with one value changed, and the continuation that adds them."""

from __future__ import annotations

import gzip
import json
import random
from collections import Counter
from pathlib import Path

from train.data import build, continuation, contrast

DEV = Path(__file__).resolve().parents[2] / "bench" / "data" / "faithfulness_rag_handwritten.jsonl"


def _diff(a: str, b: str) -> tuple[str, str]:
    i = 0
    while i < min(len(a), len(b)) and a[i] == b[i]:
        i += 1
    j = 0
    while j < min(len(a), len(b)) - i and a[-1 - j] == b[-1 - j]:
        j += 1
    word = lambda c: c.isascii() and c.isalnum()  # noqa: E731  (whole numbers and words)
    while i and word(a[i - 1]):
        i -= 1
    while j and word(a[len(a) - j]):
        j -= 1
    return a[i:len(a) - j], b[i:len(b) - j]


def test_one_value_changes_and_the_premise_never_holds_the_new_one():
    cases = [
        ("en", "Two women are holding packages in a red car.", "Two women hold packages in a car."),
        ("en", "The bridge opened in 1932 and cost 4 million dollars.", "It opened in 1932."),
        ("en", "A man in an orange shirt is cooking.", "A man wears an orange shirt."),
        ("ja", "4人の男性が立って調理をしています。", "男性たちが立って料理をしています。"),
        ("ja", "赤い車の横に三匹の犬がいる。", "三匹の犬が車のそばにいます。"),
        ("zh", "他于 1867 年 3 月 10 日出生，两个儿子都是律师。", "他出生于 1867 年。"),
        ("zh", "桌上有一只红色的杯子。", "桌上放着红色的杯子。"),
    ]
    for seed in range(20):
        rng = random.Random(seed)
        for lang, p, h in cases:
            wrong = contrast.edit(p, h, lang, rng)
            if wrong is None:  # a gender-only pair may be skipped
                continue
            old, new = _diff(h, wrong)
            assert old and new and old != new, (h, wrong)
            assert old.strip().lower() in p.lower() or old.strip() in p.translate(contrast._FULLWIDTH)
            assert new.strip().lower() not in p.lower(), (p, wrong)
            if lang == "en":  # the article follows the changed word
                assert " an red" not in wrong and " a orange" not in wrong.lower()


def test_values_the_premise_does_not_state_are_left_alone():
    rng = random.Random(0)
    # no shared value: nothing to contradict
    assert contrast.edit("A dog runs on the beach.", "An animal is outside.", "en", rng) is None
    assert contrast.edit("猫が寝ています。", "動物が休んでいます。", "ja", rng) is None
    # "may" the verb is not a month; "one" is not a number word here
    assert contrast.edit("You may return it in one piece.", "You may return it.", "en", rng) is None
    # the changed value never lands on a number of a thousands-separated figure
    for seed in range(30):
        wrong = contrast.edit("It sold 26,000 copies in 1999.", "In 1999 it sold 26,000 copies.", "en",
                              random.Random(seed))
        assert wrong is not None and "26,000" in wrong and "1999" not in wrong


def test_pairs_keep_the_human_positive_and_add_its_twin():
    rows = [
        {"premise": "Two dogs play in the snow.", "hypothesis": "Two dogs are outside.", "label": 1,
         "source": "snli_dev", "lang": "en"},
        {"premise": "Two dogs play in the snow.", "hypothesis": "Three cats sleep.", "label": 0,
         "source": "snli_dev", "lang": "en"},                     # not a supported pair
        {"premise": "Two dogs play in the snow.", "hypothesis": "Two dogs are outside.", "label": 1,
         "source": "synth_squad2", "lang": "en"},                 # not people's judgement
    ]
    out = list(contrast.pairs(rows, seed=1))
    assert [(r["label"], r["kind"], r["source"]) for r in out] == [
        (1, "contrast-right", "contrast_snli_dev"), (0, "contrast-wrong", "contrast_snli_dev")]
    assert out[0]["hypothesis"] == "Two dogs are outside." and out[1]["hypothesis"] != out[0]["hypothesis"]
    assert out == list(contrast.pairs(rows, seed=1))  # deterministic


def test_continuation_adds_contrasts_outside_the_base_validation_premises(tmp_path):
    def write(d, name, rows):
        d.mkdir(exist_ok=True)
        with gzip.open(d / f"{name}.jsonl.gz", "wt", encoding="utf-8") as f:
            f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)

    def read(path):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            return [json.loads(x) for x in f]

    pos = lambda i, p: {"premise": p, "hypothesis": f"{i + 2} dogs are outside.",  # noqa: E731
                        "label": 1, "source": "snli_test", "lang": "en"}
    base, human = tmp_path / "base", tmp_path / "human"
    write(base, "train", [{"premise": f"P {i}.", "hypothesis": "H.", "label": i % 2, "source": "t",
                           "lang": "en"} for i in range(20)])
    held = "7 dogs play in the snow."
    write(base, "valid", [{"premise": held, "hypothesis": "7 dogs play.", "label": 1,
                           "source": "snli_test", "lang": "en"}])
    dev_premise = json.loads(DEV.read_text(encoding="utf-8").splitlines()[0])["contexts"][0]
    write(human, "train", [pos(i, f"{i + 2} dogs play in the snow near hut {i}.") for i in range(60)]
          + [pos(5, held), {**pos(3, "x"), "premise": dev_premise + " 5 dogs."}])
    stats = continuation.build(base, tmp_path / "out", replay=10, per_lang=0, seed=2,
                               contrasts_from=human)
    train, valid = read(tmp_path / "out" / "train.jsonl.gz"), read(tmp_path / "out" / "valid.jsonl.gz")
    made = [r for r in train + valid if r["source"] == "contrast_snli_test"]
    # the base-valid premise is left out; the pair touching the dev set is dropped
    assert stats["contrasts"] == 120 and stats["dropped_dev"] == 2 and len(made) == 118
    assert Counter(r["label"] for r in made) == {1: 59, 0: 59}
    assert held not in {r["premise"] for r in made}
    assert not {r["premise"] for r in train} & {r["premise"] for r in valid if r["source"] != "snli_test"}
    dev = build.dev_shingles()
    assert not any(build.touches_dev(r, dev) for r in train)
