"""bench/blend_faithfulness.py's dump cache is keyed by what decides the probabilities: both
detectors' weights and the judge's premise and claim settings (``--nli premise=packed`` scores
again; the same settings are read from the cache), and ``fit`` refuses dumps made with
different settings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytest.importorskip("onnxruntime")

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
    monkeypatch.syspath_prepend(str(REPO / "bench"))
    from bench import blend_faithfulness as bf
    from ragpulse.scorer.judges import factory

    if not factory.BUNDLED_MODEL_DIR.is_dir():
        pytest.skip("no bundled model in this checkout")
    monkeypatch.setattr(bf, "load_set", lambda name, data: (ROWS, [0, 0]))

    def dump(*extra: str) -> dict:
        assert bf.main(["dump", "--cache", str(tmp_path), "--sets", "dev", "--workers", "1",
                        *extra]) == 0
        return json.loads((tmp_path / "dev.json").read_text())

    first = dump()
    assert first["settings"]["premise"] == "sentences"
    assert len(first["model"][0]) == len(first["lexical"][0]) == 2  # "Yes." + its statement
    # the model reads "Yes." with the statement after it: one claim, one probability for both
    assert first["model"][0][0] == first["model"][0][1]
    capsys.readouterr()
    assert dump() == first and "cached" in capsys.readouterr().err
    assert first["contexts"] == [2, 1]  # non-blank contexts per row, for blend_max_contexts
    # a dump from before context counts is scored again, not reused
    (tmp_path / "dev.json").write_text(json.dumps({k: v for k, v in first.items()
                                                   if k != "contexts"}))
    assert dump() == first and "cached" not in capsys.readouterr().err
    packed = dump("--nli", "premise=packed")
    assert "cached" not in capsys.readouterr().err
    assert packed["settings"]["premise"] == "packed"
    assert packed["lexical"] == first["lexical"]  # the lexical half has no premises

    # fit reads one set of settings: a cache mixing two is refused
    other = dict(packed, set="jnli", settings=first["settings"])
    (tmp_path / "jnli.json").write_text(json.dumps(other))
    for name in ("qags_cnndm", "halueval", "faithbench"):
        (tmp_path / f"{name}.json").write_text(json.dumps(dict(packed, set=name)))
    with pytest.raises(SystemExit, match="different detectors"):
        bf.load(tmp_path)

    # weights fitted under other premises than local-model's are never written as its blend
    for name in bf.SETS:
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
    monkeypatch.syspath_prepend(str(REPO / "bench"))
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
    assert bf.judge_cap() == 1  # what the local-model judge does
