"""The RAG corpus (train/data/rag_corpus.py): validation, screening, the pairs it trains on and
the committed batches' invariants (issue 40)."""

from __future__ import annotations

import copy
import json
from collections import Counter

from train.data import rag_corpus as rc

CTX = [
    "Trash and recovery\nWhen you delete a project, it moves to the workspace Trash instead of being "
    "erased. Projects in the Trash can be restored by any workspace admin for 30 days. After 30 "
    "days, the project and all of its files are permanently deleted.",
    "Version history keeps every saved version of a file for 90 days on the Team plan and for 1 "
    "year on Enterprise. Older versions are pruned automatically each night. You can name a "
    "version to keep it indefinitely; named versions count toward your quota.",
    "Deleting your account\nIf you close your workspace, all projects are scheduled for deletion 14 "
    "days after closure. During those 14 days the workspace owner can reopen the workspace from "
    "the confirmation email. Billing stops on the day the workspace is closed.",
]


def scenario(rid: str = "t1-en-001", lang: str = "en", domain: str = "saas-product-docs") -> dict:
    return {"id": rid, "lang": lang, "domain": domain, "writer": "t1",
            "question": "how long do deleted projects stay in the trash", "contexts": list(CTX),
            "passage_labels": [2, 0, 1],
            "answers": [
                {"style": "plain", "statements": [
                    {"text": "Deleted projects stay in the Trash for 30 days.", "label": 1,
                     "kind": "reword", "support": [0]},
                    {"text": "Then they are permanently deleted.", "label": 1, "kind": "reword",
                     "support": [0]}]},
                {"style": "markdown", "statements": [
                    {"text": "In short:", "label": 1, "kind": "restate", "support": [0]},
                    {"text": "- They stay in the Trash for 90 days.", "label": 0,
                     "kind": "distractor-value", "support": []}]},
            ]}


def test_a_good_scenario_passes_and_each_defect_is_named():
    assert rc.check_record(scenario()) == []
    cases = {
        "id": lambda r: r.update(id="bad id"),
        "lang": lambda r: r.update(lang="fr"),
        "domain": lambda r: r.update(domain="astrology"),
        "contexts[1]": lambda r: r["contexts"].__setitem__(1, "short"),
        "passage_labels": lambda r: r.update(passage_labels=[2, 0]),
        "label 0 with kind 'reword'": lambda r: r["answers"][0]["statements"][0].update(label=0),
        "support must list": lambda r: r["answers"][0]["statements"][0].update(support=[7]),
        "names the passage": lambda r: r["answers"][0]["statements"][0].update(support=[]),
        "style": lambda r: r["answers"][1].update(style="poem"),
    }
    for needle, spoil in cases.items():
        r = copy.deepcopy(scenario())
        spoil(r)
        errs = rc.check_record(r)
        assert any(needle in e for e in errs), (needle, errs)


def test_answer_text_joins_as_each_language_writes():
    r = scenario()
    assert rc.answer_text("en", "plain", r["answers"][0]["statements"]) == (
        "Deleted projects stay in the Trash for 30 days. Then they are permanently deleted.")
    assert rc.answer_text("en", "markdown", r["answers"][1]["statements"]) == (
        "In short:\n- They stay in the Trash for 90 days.")
    ja = [{"text": "30日間です。"}, {"text": "その後は完全に削除されます。"}]
    assert rc.answer_text("ja", "plain", ja) == "30日間です。その後は完全に削除されます。"


def test_eval_rows_label_an_answer_faithful_only_when_every_statement_is():
    rows = rc.eval_rows([scenario()])
    assert [r["label"]["faithful"] for r in rows] == [1, 0]
    assert rows[1]["kind"] == "distractor-value" and rows[0]["id"] == "t1-en-001a"


def test_nli_pairs_pair_statements_with_their_evidence_and_the_unsupported_with_every_passage():
    pairs = rc.nli_pairs([scenario()])
    pos = [p for p in pairs if p["label"] == 1]
    neg = [p for p in pairs if p["label"] == 0]
    assert {p["premise"] for p in pos} == {CTX[0]}
    # a supported statement is a negative only against a passage that holds nothing (label 0)
    assert sum(p["hypothesis"].startswith("Deleted") for p in neg) == 1
    assert sum(p["hypothesis"].startswith("- They stay") for p in neg) == 3
    fused = copy.deepcopy(scenario())
    fused["answers"][0]["statements"][0]["support"] = [0, 2]
    assert any(p["premise"] == CTX[0] + "\n" + CTX[2] for p in rc.nli_pairs([fused]))


def test_screen_drops_duplicates_near_duplicates_and_invalid_rows():
    a = scenario("t1-en-001")
    same_id = scenario("t1-en-001")
    near = scenario("t1-en-002")
    bad = scenario("t1-en-003")
    bad["lang"] = "xx"
    other = scenario("t1-en-004")
    other["contexts"] = [c.replace("project", "invoice").replace("Trash", "Archive")[::-1]
                         for c in CTX]
    kept, why = rc.screen([a, same_id, near, bad, other], [], (set(), []))
    assert [r["id"] for r in kept] == ["t1-en-001", "t1-en-004"]
    assert why == Counter({"duplicate id": 1, "near-duplicate": 1, "invalid": 1})


def test_screen_drops_a_scenario_that_shares_text_with_an_evaluation_set():
    from train.data import build

    r = scenario()
    dev = build.dev_shingles()
    # a passage that quotes 40 characters of a hand-written dev context
    first = json.loads((build.REPO / "bench" / "data" / "faithfulness_rag_handwritten.jsonl")
                       .read_text(encoding="utf-8").splitlines()[0])
    r["contexts"][1] = r["contexts"][1] + " " + first["contexts"][0][:40]
    kept, why = rc.screen([r], [], (dev, []))
    assert kept == [] and why["shares text with an evaluation set"] == 1


def test_committed_batches_are_valid_unique_and_held_out_domains_stay_out_of_training(tmp_path):
    recs = rc.committed()
    assert recs, f"no committed batch in {rc.BATCHES}"
    assert all(rc.check_record(r) == [] for r in recs)
    ids = [r["id"] for r in recs]
    assert len(ids) == len(set(ids))
    rc.main(["pairs", "--out", str(tmp_path)])
    held = {r["id"] for r in recs if rc.DOMAINS[r["domain"]] == "heldout"}
    import gzip
    with gzip.open(tmp_path / "train_pairs.jsonl.gz", "rt", encoding="utf-8") as f:
        trained = {json.loads(line)["scenario"] for line in f}
    assert trained and not trained & held


def test_domains_are_enough_and_split():
    assert len(rc.DOMAINS) >= 40
    assert sum(v == "heldout" for v in rc.DOMAINS.values()) >= 6


def test_every_relabelled_batch_agrees_at_90_percent_and_the_relabelling_is_blind():
    from pathlib import Path

    from train.data import rag_corpus_qc as qc

    files = sorted((Path(rc.__file__).resolve().parents[2] / "train" / "corpus" / "qc")
                   .glob("labels-*.jsonl"))
    assert files, "no relabelling round in train/corpus/qc"
    labels = [json.loads(line) for p in files for line in p.read_text(encoding="utf-8").splitlines()
              if line.strip()]
    found = qc.agreement(labels)
    assert found and all(ok / n >= 0.9 for ok, n in found.values()), found
    # a task shows the question, the passages and the statements, never the writer's labels
    task = qc.tasks(0.01)[0]
    assert set(task) == {"task", "batch", "lang", "question", "contexts", "statements"}
    assert all(isinstance(s, str) for s in task["statements"])
