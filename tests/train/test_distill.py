"""train.distill and ``train.train --student-layers``: a shallower student made of a teacher's
layers, trained on the teacher's P, exported and read back with the layers it has."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from train.distill import agreement, make_rows
from train.distill import main as distill

torch = pytest.importorskip("torch", reason="needs the train extra: make test runs tests/train in bench/.venv-train")

PAIRS = [{"premise": "the Basic plan is email support.", "hypothesis": h, "source": s, "split": sp}
         for h, s, sp in (("the Basic plan is email support.", "corpus", "train"),
                          ("the Basic plan is phone support.", "judge", "train"),
                          ("the plan is email support.", "nli", "valid"),
                          ("the plan is phone support.", "nli", "valid"))] * 6


def test_rows_carry_the_teachers_p_for_training_and_its_decision_for_validation() -> None:
    z = np.array([2.0, -1.0, 0.5, -0.5] * 6)
    train, valid = make_rows(PAIRS, z)
    assert len(train) == 12 and len(valid) == 12
    assert train[0]["target"] == pytest.approx(1 / (1 + np.exp(-2.0)), abs=1e-6)
    assert "label" not in train[0]  # the loss reads the target
    assert [r["label"] for r in valid[:2]] == [1, 0]
    assert [r["teacher_logit"] for r in valid[:2]] == [0.5, -0.5]
    with pytest.raises(ValueError, match="not of these pairs"):
        make_rows(PAIRS, z[:-1])
    with pytest.raises(ValueError, match="logit of a pair"):
        make_rows(PAIRS, np.where(np.arange(24) == 3, np.nan, z))
    with pytest.raises(ValueError, match="both needed"):
        make_rows([p for p in PAIRS if p["split"] == "train"], z[:12])


def test_agreement_reads_correlation_gaps_and_decisions() -> None:
    t = np.array([-3.0, -1.0, 1.0, 3.0])
    same = agreement(t, t)
    assert same["corr"] == pytest.approx(1.0) and same["max_abs_dp"] == 0.0
    assert same["decision_agree"] == 1.0
    flipped = agreement(t, -t)
    assert flipped["corr"] == pytest.approx(-1.0) and flipped["decision_agree"] == 0.0


def _train(bundle: Path, rows: Path, out: Path, *extra: str) -> int:
    from train.train import main

    return main(["--bundle", str(bundle), "--train", str(rows / "train.jsonl.gz"),
                 "--valid", str(rows / "valid.jsonl.gz"), "--out", str(out), "--max-len", "48",
                 "--batch", "4", "--epochs", "2", "--device", "cpu", *extra])


def _teacher(bundle: Path, data: Path, tmp: Path) -> Path:
    from train.train import main

    out = tmp / "teacher"
    assert main(["--bundle", str(bundle), "--train", str(data / "train.jsonl.gz"),
                 "--valid", str(data / "valid.jsonl.gz"), "--out", str(out), "--max-len", "48",
                 "--batch", "4", "--epochs", "1", "--device", "cpu"]) == 0
    return out


def _rows(tmp: Path) -> Path:
    d = tmp / "pairs"
    d.mkdir()
    with gzip.open(d / "pairs.jsonl.gz", "wt", encoding="utf-8") as fh:
        fh.writelines(json.dumps(p) + "\n" for p in PAIRS)
    np.savez(d / "features.npz", logits=np.array([2.0, -1.0, 0.5, -0.5] * 6),
             features=np.zeros((24, 2), np.float32), layers=np.array([0]))
    assert distill(["rows", "--dir", str(d), "--out", str(tmp / "rows")]) == 0
    return tmp / "rows"


def test_a_student_starts_from_the_chosen_layers_and_resumes_as_a_student(
        tiny_bundle: Path, tiny_data: Path, tmp_path: Path) -> None:
    from train.train import read_shards

    teacher = _teacher(tiny_bundle, tiny_data, tmp_path)
    rows = _rows(tmp_path)
    w = read_shards(teacher)
    out = tmp_path / "student"
    # no learning: the checkpoint holds the teacher's layer 1 as the student's layer 0
    assert _train(tiny_bundle, rows, out, "--init", str(teacher), "--student-layers", "1",
                  "--lr", "0", "--head-lr", "0", "--stop-after", "2") == 0
    st = torch.load(out / "ckpt" / "ckpt.pt", weights_only=False)["model"]
    assert not any(k.startswith("layers.1.") for k in st)
    for n in ("q.weight", "fo.bias", "oln.weight"):
        assert np.array_equal(st[f"layers.0.{n}"].numpy(),
                              w[f"layers.1.{n}"].astype(np.float32)), n
    assert np.array_equal(st["head.0.weight"].numpy(), w["head.0.weight"].astype(np.float32))
    # resumed, it finishes as a one-layer model
    assert _train(tiny_bundle, rows, out, "--init", str(teacher), "--student-layers", "1",
                  "--lr", "0", "--head-lr", "0") == 0
    assert {k.split(".")[1] for k in read_shards(out) if k.startswith("layers.")} == {"0"}
    with pytest.raises(ValueError, match="distinct indices"):
        _train(tiny_bundle, rows, tmp_path / "bad", "--init", str(teacher),
               "--student-layers", "2")


def test_a_trained_student_exports_with_its_layers_and_reads_back(
        tiny_bundle: Path, tiny_data: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture) -> None:
    from tokenizers import Tokenizer

    from ragpulse.scorer.judges.nli import NliJudgeSettings, NliModel
    from train.export import export
    from train.from_onnx import main as from_onnx
    from train.train import build, load_shards

    teacher = _teacher(tiny_bundle, tiny_data, tmp_path)
    rows = _rows(tmp_path)
    out = tmp_path / "student"
    assert _train(tiny_bundle, rows, out, "--init", str(teacher), "--student-layers", "0",
                  "--lr", "1e-3", "--head-lr", "1e-3") == 0
    capsys.readouterr()
    assert distill(["report", "--rows", str(rows), "--run", str(out),
                    "--json", str(tmp_path / "rep.json")]) == 0
    rep = json.loads((tmp_path / "rep.json").read_text())
    assert rep["all"]["n"] == 12 and -1.0 <= rep["all"]["corr"] <= 1.0
    assert "source:nli" in rep

    cal = json.loads((rows / "identity.json").read_text())
    dest = export(tiny_bundle, out, tmp_path / "model", cal, max_len=48)
    assert json.loads((dest / "config.json").read_text())["num_hidden_layers"] == 1
    m = build(tiny_bundle)
    load_shards(m, out)  # the weights have one layer: so has the model
    assert len(m.layers) == 1
    m.eval()
    nli = NliModel(NliJudgeSettings(model_dir=dest))
    pairs = [(p["premise"], p["hypothesis"]) for p in PAIRS[:4]]
    got = nli.pair_probabilities(pairs)
    tk = Tokenizer.from_file(str(dest / "tokenizer.json"))
    for (p, h), g in zip(pairs, got, strict=True):
        ids = torch.tensor([tk.encode(p, h).ids])
        with torch.no_grad():
            z = float(m.logit(ids, torch.ones_like(ids)))
        assert g == pytest.approx(1 / (1 + np.exp(-z)), abs=0.03)  # int8
    assert from_onnx(["--model-dir", str(dest), "--out", str(tmp_path / "back")]) == 0
    again = build(tiny_bundle)
    load_shards(again, tmp_path / "back")
    assert len(again.layers) == 1


def test_targets_are_the_teachers_calibrated_logits(tiny_bundle: Path, tiny_data: Path,
                                                    tmp_path: Path) -> None:
    """A teacher read back from its graph (train.from_onnx) carries its calibration: the targets
    are what the exported graph says, up to its int8 rounding."""
    from ragpulse.scorer.judges.nli import NliJudgeSettings, NliModel
    from train.export import export
    from train.from_onnx import main as from_onnx

    teacher = _teacher(tiny_bundle, tiny_data, tmp_path)
    # a calibration far from the identity: so targets without it would not match the graph
    dest = export(tiny_bundle, teacher, tmp_path / "model", {"a": 4.0, "b": 1.5}, max_len=48)
    assert from_onnx(["--model-dir", str(dest), "--out", str(tmp_path / "w")]) == 0
    src = tmp_path / "src"
    src.mkdir()
    with gzip.open(src / "pairs.jsonl.gz", "wt", encoding="utf-8") as fh:
        fh.writelines(json.dumps(p) + "\n" for p in PAIRS)
    d = tmp_path / "targets"
    assert distill(["targets", "--pairs", str(src / "pairs.jsonl.gz"), "--bundle",
                    str(tiny_bundle), "--weights", str(tmp_path / "w"), "--dir", str(d),
                    "--max-len", "48", "--device", "cpu"]) == 0
    z = np.load(d / "features.npz")["logits"]
    got = NliModel(NliJudgeSettings(model_dir=dest)).pair_probabilities(
        [(p["premise"], p["hypothesis"]) for p in PAIRS])
    assert np.allclose(1 / (1 + np.exp(-z)), got, atol=0.03)
    assert distill(["rows", "--dir", str(d), "--out", str(tmp_path / "rows")]) == 0
    # the first N pairs into the folder that holds the pairs: they and the logits would part
    with pytest.raises(SystemExit, match="give another --dir"):
        distill(["targets", "--pairs", str(d / "pairs.jsonl.gz"), "--bundle", str(tiny_bundle),
                 "--weights", str(tmp_path / "w"), "--dir", str(d), "--limit", "4"])


def test_the_round_trains_each_student_from_the_teachers_targets_and_packs_it(
        tiny_bundle: Path, tiny_data: Path, tmp_path: Path) -> None:
    """train/round_distill.sh for real on a tiny teacher (CPU): the hand-off of pairs, the
    targets scored on the device, two students side by side, each packed against the teacher
    read back, with its agreement report; back here the pack unpacks and exports."""
    import os
    import subprocess
    import sys

    from train.export import export
    from train.from_onnx import main as from_onnx
    from train.handoff import write_handoff
    from train.pack import main as pack_main

    repo = Path(__file__).resolve().parents[2]
    teacher = _teacher(tiny_bundle, tiny_data, tmp_path)
    shipped = export(tiny_bundle, teacher, tmp_path / "shipped", {"a": 2.0, "b": -0.5},
                     max_len=48)
    src = tmp_path / "pairs.jsonl.gz"
    with gzip.open(src, "wt", encoding="utf-8") as fh:
        fh.writelines(json.dumps(p) + "\n" for p in PAIRS)
    h = tmp_path / "handoff"
    sizes = dict(write_handoff(shipped, tiny_bundle, None, h, pairs=src))
    assert set(sizes) == {"bundle/base.npz", "bundle/tokenizer.json", "init.onnx",
                          "data/pairs.jsonl.xz"}
    with pytest.raises(ValueError, match="one of them"):
        write_handoff(shipped, tiny_bundle, tiny_data, tmp_path / "h2", pairs=src)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").write_text(f"#!/bin/sh\nexec {sys.executable} \"$@\"\n")
    (bin_dir / "python3").chmod(0o755)  # the venv's python, as python3 (a symlink loses the venv)
    out = tmp_path / "out"
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "PYTHONPATH": str(repo),
           "OUT": str(out), "HANDOFF": str(h), "WORK": str(tmp_path / "work"), "BUDGET": "0",
           "EPOCHS": "1", "BATCH": "4", "DEVICE": "cpu", "STUDENTS": "s1:0 s1b:1",
           "PAIRS_LIMIT": "20"}
    run = subprocess.run(["bash", str(repo / "train" / "round_distill.sh")],
                         capture_output=True, text=True, cwd=repo, env=env)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "s1 agreement:" in run.stdout and "s1b agreement:" in run.stdout
    for n in ("s1", "s1b"):
        # the first 20 pairs (PAIRS_LIMIT), 10 of them the validation split's
        assert json.loads((out / f"{n}.report.json").read_text())["all"]["n"] == 10
        assert (out / f"{n}-0.npz").is_file()
    # back here: unpack against the teacher read back, export with the identity calibration
    assert from_onnx(["--model-dir", str(shipped), "--out", str(tmp_path / "w51")]) == 0
    assert pack_main(["--unpack", str(out / "s1b"), "--weights", str(tmp_path / "ws"),
                      "--base", str(tmp_path / "w51")]) == 0
    dest = export(tiny_bundle, tmp_path / "ws", tmp_path / "student", {"a": 1.0, "b": 0.0},
                  max_len=48)
    assert json.loads((dest / "config.json").read_text())["num_hidden_layers"] == 1
    # a hand-off without its pairs stops the round before anything runs
    (h / "data" / "pairs.jsonl.xz").unlink()
    run = subprocess.run(["bash", str(repo / "train" / "round_distill.sh")],
                         capture_output=True, text=True, cwd=repo, env=env)
    assert run.returncode != 0 and "train.handoff --pairs" in run.stderr
