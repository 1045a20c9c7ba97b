"""bench/blend_faithfulness.py's one-context RAG answers: the hand-written sets' scenarios with
their evidence passage alone. The dev set's is fitted on in every fold and never held out; the
confirmation and blind sets' are never fitted on and are reported with the shipped weights."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def bf(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.syspath_prepend(str(REPO / "bench"))
    from bench import blend_faithfulness

    return blend_faithfulness


def test_each_scenario_keeps_its_evidence_passage(bf) -> None:
    sizes = {}
    for name, path in bf.ONE_CONTEXT.items():
        full = [json.loads(x) for x in (REPO / "bench" / "data" / path).read_text().splitlines()
                if x.strip()]
        by_id = {r["id"]: r for r in full}
        rows, labels = bf.load_set(name, Path("unused"))
        sizes[name] = len(rows)
        assert labels == [r["label"]["faithful"] for r in rows] and 0 < sum(labels) < len(rows)
        chosen: dict[str, str] = {}
        for r in rows:
            orig = by_id[r["id"]]
            assert len(r["contexts"]) == 1 and r["contexts"][0] in orig["contexts"]
            assert {k: v for k, v in r.items() if k != "contexts"} == \
                {k: v for k, v in orig.items() if k != "contexts"}
            key = json.dumps(orig["contexts"])
            assert chosen.setdefault(key, r["contexts"][0]) == r["contexts"][0]  # one a scenario
        kept = {r["id"] for r in rows}
        for r in full:  # left out: an answer fusing passages, a scenario with no other faithful
            key = json.dumps(r["contexts"])
            others = [x for x in full if json.dumps(x["contexts"]) == key
                      and x["label"]["faithful"] and x["kind"] != "fuse"]
            fused = r["label"]["faithful"] and r["kind"] == "fuse"
            assert (r["id"] in kept) == (not fused and bool(others)), r["id"]
    assert sizes == {"dev_one": 122, "confirm_one": 70, "blind_one": 142}
    # the first example: its evidence is the support passage, not the billing FAQ
    rows, _ = bf.load_set("dev_one", Path("unused"))
    first = next(r for r in rows if r["id"] == "rag-hw-en-01a")
    assert first["contexts"][0].startswith("Support options.")


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
    _cache(bf, cache, settings, bf.SETS + bf.FIT_ONLY)
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
    assert "fitted on all five and `dev_one`" in text
    written = json.loads((out / "blend.json").read_text())
    assert written["fitted_on"] == [*bf.SETS, "dev_one"]
    assert set(written["one_context_auroc"]) == {"confirm_one", "blind_one"}
    beta = bf.fit(sets + always)
    assert [written[k] for k in ("intercept", "lexical", "model")] == pytest.approx(beta.tolist())
