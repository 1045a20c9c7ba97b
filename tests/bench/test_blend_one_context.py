"""bench/blend_faithfulness.py's one-context RAG answers: the hand-written sets' scenarios with
their evidence passage alone. The dev set's is fitted on in every fold and never held out; the
confirmation and blind sets' are never fitted on and are reported with the shipped weights."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def bf(monkeypatch: pytest.MonkeyPatch):
    from bench import blend_faithfulness

    # the blend's own optimiser with a tenth of its Adam steps: these tests check which sets
    # each fold fits and what is reported, not the last digits of the weights (CI time)
    monkeypatch.setattr(blend_faithfulness, "fit",
                        functools.partial(blend_faithfulness.fit, steps=300))
    return blend_faithfulness


def test_the_evidence_marks_every_faithful_unfused_answer(bf) -> None:
    marks = bf.read_evidence()
    want = {}
    for path in bf.ONE_CONTEXT.values():
        for line in (REPO / "bench" / "data" / path).read_text().splitlines():
            r = json.loads(line)
            if r["label"]["faithful"] and r["kind"] != "fuse":
                want[r["id"]] = len(r["contexts"])
    assert set(marks) == set(want)
    for rid, passages in marks.items():
        assert passages and sorted(set(passages)) == passages, rid
        assert all(0 <= i < want[rid] for i in passages), rid


def test_para_valid_is_the_paraphrase_twins_validation_split_one_statement_a_sample(bf) -> None:
    from train.data import paraphrase

    rows, labels = bf.load_set("para_valid", Path("unused"))
    valid = [u for u in paraphrase.committed() if paraphrase.split_of(u["id"]) == "valid"]
    assert len(rows) == sum(len(u["statements"]) for u in valid) and 0 < sum(labels) < len(rows)
    by_id = {u["id"]: u for u in valid}
    for r, y in zip(rows, labels, strict=True):
        uid, k = r["id"].split("#")
        st = by_id[uid]["statements"][int(k)]
        assert r["contexts"] == [by_id[uid]["passage"]] and r["answer"] == st["text"]
        assert y == st["label"] == r["label"]["faithful"]


def test_each_scenario_keeps_its_evidence_passage(bf) -> None:
    marks = bf.read_evidence()
    sizes = {}
    for name, path in bf.ONE_CONTEXT.items():
        full = [json.loads(x) for x in (REPO / "bench" / "data" / path).read_text().splitlines()
                if x.strip()]
        by_id = {r["id"]: r for r in full}
        rows, labels = bf.load_set(name, Path("unused"))
        sizes[name] = (len(rows), sum(labels))
        assert labels == [r["label"]["faithful"] for r in rows] and 0 < sum(labels) < len(rows)
        kept: dict[str, int] = {}
        for r in rows:
            orig = by_id[r["id"]]
            assert len(r["contexts"]) == 1
            assert {k: v for k, v in r.items() if k != "contexts"} == \
                {k: v for k, v in orig.items() if k != "contexts"}
            passage = orig["contexts"].index(r["contexts"][0])
            key = json.dumps(orig["contexts"])
            assert kept.setdefault(key, passage) == passage  # one passage a scenario
            if r["label"]["faithful"]:
                assert marks[r["id"]] == [passage]  # a kept faithful answer: that passage alone
        ids = {r["id"] for r in rows}
        for r in full:
            key = json.dumps(r["contexts"])
            if key not in kept:  # a dropped scenario had no faithful answer one passage holds
                assert not any(len(marks.get(x["id"], [0, 1])) == 1 for x in full
                               if json.dumps(x["contexts"]) == key and x["kind"] != "fuse"
                               and x["label"]["faithful"])
            elif not r["label"]["faithful"]:
                assert r["id"] in ids  # every unfaithful answer of a kept scenario stays
    assert sizes == {"dev_one": (112, 52), "confirm_one": (64, 32), "blind_one": (118, 59)}


def test_the_passage_most_faithful_answers_name_wins(bf) -> None:
    ctx = ["p0", "p1", "p2"]

    def row(rid: str, faithful: int, kind: str = "reword") -> dict:
        return {"id": rid, "question": "q", "contexts": ctx, "answer": rid,
                "label": {"faithful": faithful}, "kind": kind}

    rows = [row("a", 1), row("b", 1), row("c", 1), row("d", 1, "fuse"), row("e", 0), row("f", 1)]
    marks = {"a": [2], "b": [1], "c": [2], "e": [0], "f": [0, 1]}  # f needs two passages
    got = bf.one_context(rows, marks)
    assert [(r["id"], r["contexts"]) for r in got] == [("a", ["p2"]), ("c", ["p2"]),
                                                       ("e", ["p2"])]
    tie = bf.one_context(rows[:2] + [rows[4]], {"a": [2], "b": [1]})
    assert [r["contexts"] for r in tie] == [["p1"]] * 2  # a tie: the first passage
    assert bf.one_context([rows[5], rows[4]], marks) == []  # no answer one passage holds
    with pytest.raises(KeyError):
        bf.one_context(rows, {"a": [2]})  # an unmarked faithful answer


def _cache(bf, d: Path, settings: dict, names) -> None:
    rng = bf.np.random.default_rng(3)
    d.mkdir(exist_ok=True)
    for s in names:
        y = [int(i % 2) for i in range(60)]
        noise = rng.normal(size=(60, 2))
        sharp = 2.0 if s.endswith("_one") else 0.6  # RAG answers: the model reads them best
        (d / f"{s}.json").write_text(json.dumps({
            "set": s, "model_id": "m", "lexical_id": "lx", "settings": settings,
            "ids": [f"{s}-{i}" for i in range(60)], "labels": y,
            "contexts": [3 if s == "dev" else 1] * 60,
            "model": [[float(bf._sigmoid(sharp * (2 * v - 1) + n[0]))] for v, n in zip(y, noise)],
            "lexical": [[float(bf._sigmoid(1.0 * (2 * v - 1) + n[1]))] for v, n in zip(y, noise)]}))


def test_every_fold_fits_on_dev_one_and_the_checks_are_reported(
        bf, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from ragpulse.scorer.judges.factory import _local_model_settings
    from ragpulse.scorer.judges.nli import NliJudgeSettings

    settings = bf.dump_settings(_local_model_settings(NliJudgeSettings()))
    cache = tmp_path / "cache"
    _cache(bf, cache, settings, bf.SETS + bf.FIT_ONLY + bf.FIT_OPTIONAL)
    with pytest.raises(SystemExit, match="no dump of confirm_one, blind_one"):
        bf.main(["fit", "--cache", str(cache)])
    _cache(bf, cache, settings, bf.CHECK_ONLY)
    sets = bf.load(cache, 1)
    always = bf.load(cache, 1, bf.FIT_ONLY)
    with_one, without = bf.lodo(sets, always), bf.lodo(sets)
    assert [r["set"] for r in with_one] == list(bf.SETS)  # dev_one is never held out
    for a, b in zip(with_one, without, strict=True):
        assert a["beta"] != b["beta"]  # it is in every fold
        assert a["beta"][2] > b["beta"][2]  # and there the model's half reads best
    out = tmp_path / "model"
    out.mkdir()
    assert bf.main(["fit", "--cache", str(cache), "--write", "--model-dir", str(out)]) == 0
    text = capsys.readouterr().out
    assert "| confirm_one | 60 (30) |" in text and "| blind_one | 60 (30) |" in text
    assert "fitted on all five and `dev_one`" in text and "`para_valid`" not in text
    written = json.loads((out / "blend.json").read_text())
    assert written["fitted_on"] == [*bf.SETS, "dev_one"]
    assert set(written["one_context_auroc"]) == {"confirm_one", "blind_one"}
    beta = bf.fit(sets + always)
    assert [written[k] for k in ("intercept", "lexical", "model")] == pytest.approx(beta.tolist())
    # the paraphrase twins' validation split only when asked (B6 lost JNLI with it)
    assert bf.main(["fit", "--cache", str(cache), "--write", "--model-dir", str(out),
                    "--with-para-valid"]) == 0
    assert "fitted on all five, `dev_one` and `para_valid`" in capsys.readouterr().out
    written = json.loads((out / "blend.json").read_text())
    assert written["fitted_on"] == [*bf.SETS, "dev_one", "para_valid"]
    assert written["command"].endswith("--with-para-valid")
    with_para = bf.fit(sets + always + bf.load(cache, 1, bf.FIT_OPTIONAL))
    assert [written[k] for k in ("intercept", "lexical", "model")] == pytest.approx(
        with_para.tolist())
