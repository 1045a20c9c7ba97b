"""bench/blend_faithfulness.py's dump cache is keyed by what decides the probabilities: both
detectors' weights and the judge's premise and claim settings (``--nli premise=packed`` scores
again; the same settings are read from the cache), and ``fit`` refuses dumps made with
different settings."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


ROWS = [
    {"id": "t-1", "question": "Does the Basic plan include phone support?",
     "contexts": ["Support options. The Basic plan includes email support only. Phone support is "
                  "available on the Business plan.", "Billing FAQ. Invoices are issued monthly."],
     "answer": "Yes. The Basic plan includes email and phone support."},
    {"id": "t-2", "question": "When are invoices issued?",
     "contexts": ["Billing FAQ. Invoices are issued on the first day of each month."],
     "answer": "Invoices are issued on the fifteenth of each month."},
]


def test_dump_cache_follows_premise_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    from bench import blend_faithfulness as bf

    monkeypatch.setattr(bf, "load_set", lambda name, data: (ROWS, [0, 0]))

    def dump(*extra: str) -> dict:
        # views premises: the premise mode whose blended samples read other premises than
        # multi-passage ones (fit_settings, model_fit); the default's evidence reads the same
        assert bf.main(["dump", "--cache", str(tmp_path), "--sets", "dev", "--workers", "1",
                        "--nli", "premise=views", *extra]) == 0
        return json.loads((tmp_path / "dev.json").read_text())

    first = dump()
    assert first["settings"]["premise"] == "views"
    assert first["settings"]["premise_view_sentences"] == 1
    assert len(first["model"][0]) == len(first["lexical"][0]) == 2  # "Yes." + its statement
    # the model reads "Yes." with the statement after it: one claim, one probability for both
    assert first["model"][0][0] == first["model"][0][1]
    capsys.readouterr()
    assert dump() == first and "cached" in capsys.readouterr().err
    # the set's rows changed (an edited file, another derivation): scored again
    monkeypatch.setattr(bf, "load_set", lambda name, data: ([dict(ROWS[0], id="t-9"), ROWS[1]],
                                                            [0, 0]))
    assert dump()["ids"] == ["t-9", "t-2"] and "cached" not in capsys.readouterr().err
    monkeypatch.setattr(bf, "load_set", lambda name, data: (ROWS, [1, 0]))  # labels too
    assert dump()["labels"] == [1, 0] and "cached" not in capsys.readouterr().err
    edited = [ROWS[0], dict(ROWS[1], contexts=["Billing FAQ. Invoices are issued on the 15th."])]
    monkeypatch.setattr(bf, "load_set", lambda name, data: (edited, [0, 0]))  # same ids
    again = dump()
    assert "cached" not in capsys.readouterr().err and again["rows"] != first["rows"]
    assert again["model"][1] != first["model"][1]  # the edited row was scored, not read back
    monkeypatch.setattr(bf, "load_set", lambda name, data: (ROWS, [0, 0]))
    assert dump() == first and "cached" not in capsys.readouterr().err
    assert first["contexts"] == [2, 1]  # non-blank contexts per row, for blend_max_contexts
    # the two-passage row is never blended: the fit reads it with a blended sample's premises
    assert first["fit_settings"]["premise"] == "sentences"
    assert first["fit_settings"]["premise_view_sentences"] is None
    assert len(first["model_fit"][0]) == 2 and first["model_fit"][1] is None
    capsys.readouterr()
    # another cache reusing this one's lexical half still records model_fit
    other = tmp_path / "reuse"
    assert bf.main(["dump", "--cache", str(other), "--sets", "dev", "--workers", "1",
                    "--nli", "premise=views", "--lexical-from", str(tmp_path)]) == 0
    assert json.loads((other / "dev.json").read_text()) == first
    # a dump without it (made before) is scored again
    (tmp_path / "dev.json").write_text(json.dumps({k: v for k, v in first.items()
                                                   if k not in ("model_fit", "fit_settings")}))
    assert dump() == first and "cached" not in capsys.readouterr().err
    # a dump from before context counts is scored again, not reused
    (tmp_path / "dev.json").write_text(json.dumps({k: v for k, v in first.items()
                                                   if k != "contexts"}))
    assert dump() == first and "cached" not in capsys.readouterr().err
    packed = dump("--nli", "premise=packed")
    assert "cached" not in capsys.readouterr().err
    assert packed["settings"]["premise"] == "packed"
    assert packed["lexical"] == first["lexical"]  # the lexical half has no premises
    assert "model_fit" not in packed  # the blend meets packed premises as the judge runs them
    # model_fit is the model's P with sentence premises: what a sentences dump records
    sentences = dump("--nli", "premise=sentences")
    assert first["model_fit"][0] == sentences["model"][0] != first["model"][0]
    assert first["model"][1] == sentences["model"][1]  # one context: the same premises

    # fit reads one set of settings: a cache mixing two is refused
    other = dict(packed, set="jnli", settings=first["settings"])
    (tmp_path / "jnli.json").write_text(json.dumps(other))
    for name in ("qags_cnndm", "halueval", "faithbench"):
        (tmp_path / f"{name}.json").write_text(json.dumps(dict(packed, set=name)))
    with pytest.raises(SystemExit, match="different detectors"):
        bf.load(tmp_path)

    # weights fitted under other premises than the model judge's are never written as its blend
    for name in bf.ALL_SETS:
        (tmp_path / f"{name}.json").write_text(json.dumps(dict(packed, set=name)))
    out = tmp_path / "model"
    out.mkdir()
    with pytest.raises(SystemExit, match="dump again without --nli"):
        bf.main(["fit", "--cache", str(tmp_path), "--write", "--model-dir", str(out)])
    assert not (out / "blend.json").exists()


def test_fit_reports_multi_passage_samples_as_the_model_alone(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``blend_max_contexts``: the table scores a sample with several contexts by the model's
    mean P (as the judge does), the others by the blend; a dump must say how many contexts."""
    from bench import blend_faithfulness as bf

    raw = {"set": "dev", "labels": [1, 0, 1], "contexts": [1, 3, 2],
           "model": [[0.9, 0.8], [0.2], [0.7]], "lexical": [[0.3, 0.4], [0.9], [0.1]]}
    d = bf.SetData(raw, cap=1)
    assert d.blended.tolist() == [True, False, False]
    beta = bf.np.array([0.0, 1.0, 1.0])
    got = d.scores(beta)
    logit = lambda p: bf.np.log(p / (1 - p))  # noqa: E731
    first = bf.np.mean([bf._sigmoid(logit(lx) + logit(m)) for m, lx in [(0.9, 0.3), (0.8, 0.4)]])
    assert got[0] == pytest.approx(first, abs=1e-6)
    assert got[1:].tolist() == pytest.approx([0.2, 0.7])  # the model alone
    assert bf.SetData(raw).blended.all()  # no cap: every sample blended
    with pytest.raises(SystemExit, match="context counts"):
        bf.SetData({k: v for k, v in raw.items() if k != "contexts"}, cap=1)
    assert bf.judge_cap() == 1  # what the model judge does


def test_fit_learns_from_the_premises_the_blend_meets(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under ``views``/``auto`` the judge never blends a multi-passage sample, and a blended one
    (one context) gets sentence premises: the fit reads the dev set's statements with those
    (``model_fit``), so its weights are the ones a dump made with ``sentences`` gives, while
    the table scores the dev set with the judge's own P."""
    from bench import blend_faithfulness as bf
    from ragpulse.scorer.judges.nli import NliJudgeSettings

    rng = bf.np.random.default_rng(1)

    def raw(name: str, n: int, ctx: int) -> dict:
        y = [int(i % 2) for i in range(n)]
        sharp = rng.normal(1.0, 0.3)
        return {"set": name, "labels": y, "contexts": [ctx] * n,
                "model": [[float(bf._sigmoid(sharp * (2 * v - 1) + rng.normal()))] for v in y],
                "lexical": [[float(bf._sigmoid(0.5 * (2 * v - 1) + rng.normal()))] for v in y]}

    sets = {s: raw(s, 80, 3 if s == "dev" else 1) for s in bf.SETS}
    sentences = [bf.SetData(r, cap=1) for r in sets.values()]
    views_dev = dict(sets["dev"], model=[[min(0.99, p[0] + 0.3)] for p in sets["dev"]["model"]],
                     model_fit=sets["dev"]["model"])
    views = [bf.SetData(views_dev, cap=1), *sentences[1:]]
    assert bf.np.allclose(bf.fit(views, steps=300), bf.fit(sentences, steps=300))
    assert not bf.np.allclose(views[0].scores(bf.np.zeros(3)), sentences[0].scores(bf.np.zeros(3)))
    # without model_fit the views' P would move the weights
    plain = [bf.SetData({k: v for k, v in views_dev.items() if k != "model_fit"}, cap=1),
             *sentences[1:]]
    assert not bf.np.allclose(bf.fit(plain, steps=300), bf.fit(sentences, steps=300))
    # which premises the fit uses
    own = NliJudgeSettings(premise="views", premise_view_sentences=1)
    assert bf.blended_premises(own, 1).premise == "sentences"
    assert bf.blended_premises(own, 2) is own and bf.blended_premises(own, None) is own
    packed = NliJudgeSettings(premise="packed")
    assert bf.blended_premises(packed, 1) is packed


def test_compare_pairs_two_dumps_lodo_per_set(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """``compare A B``: per set, both dumps' judge scores with LODO weights, paired on the same
    samples; a model that separates the labels better gains on every set; dumps of different
    samples are refused."""
    from bench import blend_faithfulness as bf

    # every LODO fold with a tenth of the blend's Adam steps: the pairing and the intervals are
    # what is tested here, not the last digits of the weights (CI time)
    monkeypatch.setattr(bf, "fit", functools.partial(bf.fit, steps=300))
    rng = bf.np.random.default_rng(0)

    def cache(name: str, sharp: float, ids_of=lambda s, i: f"{s}-{i}") -> Path:
        d = tmp_path / name
        d.mkdir()
        for s in bf.ALL_SETS:  # compare fits every fold on dev_one too
            y = [int(i % 2) for i in range(120)]
            noise = rng.normal(size=(120, 2))
            model = [[float(bf._sigmoid(sharp * (2 * yi - 1) + n[0]))] for yi, n in zip(y, noise)]
            lexical = [[float(bf._sigmoid(0.3 * (2 * yi - 1) + n[1]))] for yi, n in zip(y, noise)]
            ctx = [3 if s == "dev" else 1] * 120
            (d / f"{s}.json").write_text(json.dumps({
                "set": s, "model_id": f"m-{name}", "lexical_id": "lx", "settings": {},
                "ids": [ids_of(s, i) for i in range(120)], "labels": y, "contexts": ctx,
                "model": model, "lexical": lexical}))
        return d

    weak, strong = cache("weak", 0.2), cache("strong", 2.0)
    rows = bf.compare(bf.load(weak, 1), bf.load(strong, 1), reps=200)
    assert [r["set"] for r in rows] == list(bf.SETS)
    for r in rows:
        assert r["b"] > r["a"] + 0.1 and r["diff_ci"][0] > 0, r
    assert all(r["documents"] == 120 for r in rows)  # unique ids: every sample its own
    # documents drawn whole: 12 documents of 10 samples whose gain is all-or-nothing per
    # document give a wider interval than the 120 samples drawn one by one
    flip = bf.np.repeat(rng.integers(0, 2, 12), 10).astype(bool)
    for s in bf.SETS:
        raw = json.loads((strong / f"{s}.json").read_text())
        weak_raw = json.loads((weak / f"{s}.json").read_text())
        raw["model"] = [w if f else m for w, m, f in zip(weak_raw["model"], raw["model"], flip)]
        (strong / f"{s}.json").write_text(json.dumps(raw))
    docs = {s: [i // 10 for i in range(120)] for s in bf.SETS}
    flat = bf.compare(bf.load(weak, 1), bf.load(strong, 1), reps=300)
    whole = bf.compare(bf.load(weak, 1), bf.load(strong, 1), reps=300, groups=docs)
    assert all(r["documents"] == 12 for r in whole)
    width = lambda r: r["diff_ci"][1] - r["diff_ci"][0]  # noqa: E731
    assert sum(map(width, whole)) > 1.3 * sum(map(width, flat))
    # --data: the documents are the samples sharing their contexts in the sets' files
    monkeypatch.setattr(bf, "load_set", lambda name, data: (
        [{"contexts": [f"{name} article {i // 10}"]} for i in range(120)], None))
    groups = bf.document_groups(bf.load(weak, 1), tmp_path)
    assert groups == {s: [bf.q.context_group({"contexts": [f"{s} article {i // 10}"]})
                          for i in range(120)] for s in bf.SETS}
    assert all(len(set(g)) == 12 for g in groups.values())
    assert bf.main(["compare", str(weak), str(strong), "--data", str(tmp_path), "--reps", "100"]) == 0
    assert "| dev | 120 | 12 |" in capsys.readouterr().out
    assert bf.main(["compare", str(weak), str(strong), "--reps", "100"]) == 0
    out = capsys.readouterr().out
    assert "| faithbench | 120 |" in out and "90 % interval" in out
    # a dump of other samples (same labels, other ids) is not paired with it
    other = cache("other", 2.0, ids_of=lambda s, i: f"{s}-x{i}")
    with pytest.raises(SystemExit, match="same samples"):
        bf.compare(bf.load(weak, 1), bf.load(other, 1), reps=10)


def test_dump_refuses_a_bad_nli_override_before_loading_models(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from bench import blend_faithfulness as bf

    monkeypatch.setattr(bf, "detectors", lambda *a: pytest.fail("must stop before the models"))
    for bad, msg in (("premise", "FIELD=VALUE"), ("nosuch=1", "no field 'nosuch'")):
        with pytest.raises(SystemExit, match=msg):
            bf.main(["dump", "--cache", str(tmp_path), "--nli", bad])
