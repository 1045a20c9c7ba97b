"""train.lwf: near-copies of premises' sentences and the teacher's P as each row's target
(rows that hold a continued model to its start's judgement)."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import pytest

from train import lwf

EN = ("The museum in Oslo opened in 1998 and Anna Berg led it until 2010, when Lars Holm took "
      "over the collection. It holds 4,200 paintings.")
JA = "東京のカフェテリアは1998年に開店し、メニューにはパスタとカレーがあります。店は20時に閉まります。"
ZH = "这家图书馆建于1998年，每天开放到晚上9点，藏书超过3000册。"


def _rows(n: int = 30) -> list[dict]:
    rows = []
    for i in range(n):  # distinct premises: a number that differs per row
        for lang, text in (("en", EN), ("ja", JA), ("zh", ZH)):
            rows.append({"premise": f"{text} ({i + 1}00)", "hypothesis": "x", "label": 1,
                         "source": "base", "lang": lang})
    return rows


def test_near_copies_keep_or_change_one_sentence_as_their_kind_says() -> None:
    made = lwf.near_copies(_rows(), 60, random.Random(0), foreign=True)
    assert len(made) == 60
    kinds = Counter(r["source"] for r in made)
    assert kinds["lwf_swap-num"] and kinds["lwf_swap-name"] and kinds["lwf_foreign"], kinds
    from ragpulse.scorer.segment import split_sentences

    for r in made:
        kind, p, h = r["source"].removeprefix("lwf_"), r["premise"], r["hypothesis"]
        assert kind in lwf.KINDS and r["label"] == int(kind in ("copy", "cut"))
        sentences = split_sentences(p)
        if kind == "copy":
            assert h in sentences
        elif kind == "cut":
            assert h not in p and any(t.startswith(h[:-1]) for t in sentences)
        elif kind.startswith("swap"):  # two values or names trade places: the same characters
            assert h not in p and any(sorted(h) == sorted(t) for t in sentences), h
        else:  # one value or name replaced by one this premise does not hold
            found = lambda t: (set(lwf.NUM.findall(t)) | set(lwf.CAP.findall(" " + t))  # noqa: E731
                               | set(lwf.KATA.findall(t)))
            assert h not in p and found(h) - found(p), h


def test_near_copies_without_foreign_never_make_one_and_are_deterministic() -> None:
    a = lwf.near_copies(_rows(), 40, random.Random(3))
    b = lwf.near_copies(_rows(), 40, random.Random(3))
    assert a == b
    assert not any(r["source"] == "lwf_foreign" for r in a)


def test_plain_copies_and_cuts_are_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    # premises without numbers or names: only copies and cuts, each at most PLAIN_CAP
    monkeypatch.setattr(lwf, "PLAIN_CAP", 3)
    rows = [{"premise": f"the shop opens early, closes late, and sells bread number{'x' * i}.",
             "hypothesis": "x", "label": 1, "source": "base", "lang": "en"} for i in range(40)]
    made = lwf.near_copies(rows, 40, random.Random(1))
    assert Counter(r["source"] for r in made) == {"lwf_copy": 3, "lwf_cut": 3}


torch = pytest.importorskip("torch", reason="needs the train extra: make test runs tests/train "
                                            "in bench/.venv-train")


def test_build_rows_sets_the_teachers_p_as_target(tiny_bundle: Path, tiny_data: Path,
                                                  tmp_path: Path) -> None:
    from train.train import build, encode, load_shards, main, predict, read_pairs

    teacher = tmp_path / "teacher"
    assert main(["--bundle", str(tiny_bundle), "--train", str(tiny_data / "train.jsonl.gz"),
                 "--valid", str(tiny_data / "valid.jsonl.gz"), "--out", str(teacher),
                 "--max-len", "48", "--batch", "4", "--epochs", "1", "--device", "cpu"]) == 0
    rows = read_pairs(tiny_data / "train.jsonl.gz")
    for r in rows[:4]:
        r["source"] = "new"
    out, summary = lwf.build_rows(rows, new_source="new", new_times=2, replay=10, copies=0,
                                  foreign=False, seed=0, bundle=tiny_bundle, teacher=teacher,
                                  max_len=48)
    assert summary["rows"] == len(out) == 4 * 2 + 10
    assert sum("target" not in r for r in out) == 8  # the new rows keep their hard labels
    taught = [r for r in out if "target" in r]
    model = build(tiny_bundle)
    load_shards(model, teacher)
    z = predict(model, encode(tiny_bundle / "tokenizer.json", taught, 48), "cpu")
    want = 1 / (1 + torch.exp(-torch.from_numpy(z)))
    assert [r["target"] for r in taught] == pytest.approx(want.tolist(), abs=1e-4)
    with pytest.raises(SystemExit, match="--replay 99"):
        lwf.build_rows(rows, new_source="new", new_times=1, replay=99, copies=0, foreign=False,
                       seed=0, bundle=tiny_bundle, teacher=teacher)
    json.dumps(summary)


def test_a_swap_or_replacement_moves_whole_values_only() -> None:
    # the first builder (C10, C11) replaced substrings: the 9 inside 1998 moved too
    rng = random.Random(0)
    assert lwf._swap("Built in 1998, open to 9 pm.", lwf.NUM, rng) == "Built in 9, open to 1998 pm."
    assert lwf._replace("Built in 1998, open to 9 pm.", lwf.NUM, "9", "11") == \
        "Built in 1998, open to 11 pm."
