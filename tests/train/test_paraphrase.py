"""Paraphrase twins (train/data/paraphrase.py): validation, screening, the pairs and splits it
trains on, the blind relabelling, and the committed units' invariants (issue 39, item 0)."""

from __future__ import annotations

import copy
import gzip
import json
from collections import Counter
from pathlib import Path

from train.data import paraphrase as pp

PASSAGE = ("The service counter at Lindenfeld station is staffed from 7:00 to 19:00 on weekdays. "
           "Lost items are kept for 14 days and can be collected with a photo ID.")


def unit(uid: str = "t1-en-0001", passage: str = PASSAGE) -> dict:
    return {"id": uid, "lang": "en", "domain": "public-transport", "writer": "t1",
            "passage": passage,
            "statements": [
                {"text": "On working days someone is at the counter between 7 am and 7 pm.",
                 "label": 1, "kind": "value-rewrite"},
                {"text": "On working days someone is at the counter between 7 am and 9 pm.",
                 "label": 0, "kind": "swap-value"},
                {"text": "Things left behind are held for two weeks.", "label": 1,
                 "kind": "value-rewrite"},
                {"text": "Things left behind are held for two months.", "label": 0,
                 "kind": "swap-value"}]}


def test_a_good_unit_passes_and_each_defect_is_named():
    assert pp.check_unit(unit()) == []
    cases = {
        "id": lambda u: u.update(id="t1-0001"),
        "does not carry lang": lambda u: u.update(id="t1-ja-0001"),
        "held-out domains never reach training": lambda u: u.update(domain="veterinary"),
        "passage": lambda u: u.update(passage="too short"),
        "kind": lambda u: u["statements"][0].update(kind="swap-value"),
        "label 1 (supported) or 0": lambda u: u["statements"][1].update(label=2),
        "at least one supported and one unsupported": lambda u: [
            s.update(label=1, kind="reword") for s in u["statements"]],
        "the same text twice": lambda u: u["statements"][1].update(
            text=u["statements"][0]["text"]),
        "statements: a list": lambda u: u.update(statements=[]),
    }
    for needle, spoil in cases.items():
        u = copy.deepcopy(unit())
        spoil(u)
        errs = pp.check_unit(u)
        assert any(needle in e for e in errs), (needle, errs)


def test_pairs_are_the_passage_with_each_statement_and_its_label():
    rows = pp.pairs([unit()])
    assert [r["label"] for r in rows] == [1, 0, 1, 0]
    assert {r["premise"] for r in rows} == {PASSAGE}
    assert {r["source"] for r in rows} == {"paraphrase_twins"}
    assert rows[0]["kind"] == "value-rewrite" and rows[0]["scenario"] == "t1-en-0001"


def test_the_split_is_a_fixed_function_of_the_id_near_its_share():
    ids = [f"t1-en-{i:04d}" for i in range(2000)]
    splits = [pp.split_of(i) for i in ids]
    assert splits == [pp.split_of(i) for i in ids]
    assert set(splits) == {"train", "valid"}
    assert abs(splits.count("valid") / len(ids) - pp.VALID_SHARE) < 0.03


def test_screen_drops_duplicates_near_duplicates_invalid_units_and_evaluation_text():
    from train.data import build

    a = unit()
    same_id = unit()
    near = unit("t1-en-0002", PASSAGE.replace("19:00", "20:00"))
    bad = unit("t1-en-0003", "x")
    other = unit("t1-en-0004", "Parcels sent by express post arrive within 24 hours on working "
                               "days; standard post takes three to five working days.")
    kept, why = pp.screen([a, same_id, near, bad, other], [], (set(), []))
    assert [u["id"] for u in kept] == ["t1-en-0001", "t1-en-0004"]
    assert why == Counter({"duplicate id": 1, "near-duplicate": 1, "invalid": 1})
    # a statement that quotes 40 characters of a hand-written dev context
    first = json.loads((build.REPO / "bench" / "data" / "faithfulness_rag_handwritten.jsonl")
                       .read_text(encoding="utf-8").splitlines()[0])
    quoting = unit("t1-en-0005")
    quoting["statements"][0]["text"] = first["contexts"][0][:40]
    kept, why = pp.screen([quoting], [], (build.dev_shingles(), []))
    assert kept == [] and why["shares text with an evaluation set"] == 1


def test_relabelling_tasks_hide_the_labels_and_agreement_counts_each_statement():
    units = [unit(f"t1-en-{i:04d}") for i in range(1, 11)]
    tasks = pp.qc_tasks(units, 0.2, seed=3)
    assert len(tasks) == 2
    assert all(set(t) == {"task", "lang", "passage", "statements"} for t in tasks)
    truth = {s["text"]: s["label"] for s in units[0]["statements"]}
    labels = [{"task": t["task"], "labels": [truth[s] for s in t["statements"]]} for t in tasks]
    labels[0]["labels"][0] ^= 1
    (ok, n, diff), = pp.qc_agreement(units, tasks, labels).values()
    assert (ok, n) == (7, 8) and len(diff) == 1


def test_committed_units_are_valid_unique_split_and_relabelled(tmp_path):
    units = pp.committed()
    assert units, f"no committed unit in {pp.UNITS}"
    assert all(pp.check_unit(u) == [] for u in units)
    ids = [u["id"] for u in units]
    assert len(ids) == len(set(ids))
    assert {u["lang"] for u in units} == {"en", "ja", "zh"}
    pp.main(["pairs", "--out", str(tmp_path)])
    seen = {}
    for split in ("train", "valid"):
        with gzip.open(tmp_path / f"{split}_pairs.jsonl.gz", "rt", encoding="utf-8") as f:
            seen[split] = {json.loads(line)["scenario"] for line in f}
    assert seen["train"] and seen["valid"] and not seen["train"] & seen["valid"]
    # every writer's units were relabelled blind by another writer, at >= 90 % agreement
    qc = Path(pp.UNITS) / "qc"
    tasks = [json.loads(line) for p in sorted(qc.glob("tasks-*.jsonl"))
             for line in p.read_text(encoding="utf-8").splitlines() if line.strip()]
    labels = [json.loads(line) for p in sorted(qc.glob("labels-*.jsonl"))
              for line in p.read_text(encoding="utf-8").splitlines() if line.strip()]
    found = pp.qc_agreement(units, tasks, labels)
    assert set(found) == {u["writer"] for u in units}
    assert all(ok / n >= 0.9 for ok, n, _ in found.values()), {
        w: (ok, n) for w, (ok, n, _) in found.items()}


def test_a_continuation_adds_the_twins_training_pairs_n_times_and_validates_on_the_rest(tmp_path):
    from train.data import continuation

    base = tmp_path / "base"
    base.mkdir()
    for name in ("train", "valid"):
        with gzip.open(base / f"{name}.jsonl.gz", "wt", encoding="utf-8") as f:
            f.writelines(json.dumps({"premise": f"P {i}.", "hypothesis": "H.", "label": i % 2,
                                     "source": "t", "lang": "en"}) + "\n" for i in range(10))
    stats = continuation.build(base, tmp_path / "out", replay=10, per_lang=0, seed=1,
                               paraphrase_times=2)
    units = pp.committed()
    trained = pp.pairs(u for u in units if pp.split_of(u["id"]) == "train")
    assert stats["paraphrase"] == len(trained) and stats["train"] == 10 + 2 * len(trained)
    with gzip.open(tmp_path / "out" / "valid.jsonl.gz", "rt", encoding="utf-8") as f:
        valid = [json.loads(line) for line in f]
    with gzip.open(tmp_path / "out" / "train.jsonl.gz", "rt", encoding="utf-8") as f:
        train = [json.loads(line) for line in f]
    in_valid = {r["scenario"] for r in valid if r["source"] == "paraphrase_twins"}
    in_train = {r["scenario"] for r in train if r["source"] == "paraphrase_twins"}
    assert in_valid and in_train and not in_valid & in_train
    parsed = continuation.parser().parse_args(["--base", "B", "--out", "O", "--paraphrase", "2"])
    assert parsed.paraphrase == 2
