"""The corpus round's trip to a GPU machine (issue 40): ``train.handoff`` writes a trimmed bundle
and the model's graph without its word embeddings, from which the continuation starts exactly
as from the whole graph; a trimmed bundle refuses to train without ``--init``; ``train.pack
--base`` brings a small continuation's change back (packing the weights themselves erases it);
``train/round_corpus.sh`` trains and packs each run against the model read back."""

from __future__ import annotations

import gzip
import json
import lzma
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="needs the train extra: make test runs tests/train in bench/.venv-train")
pytest.importorskip("onnx", reason="needs the train extra: make test runs tests/train in bench/.venv-train")

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "train" / "round_corpus.sh"


def _train(bundle: Path, data: Path, out: Path, *extra: str) -> int:
    from train.train import main

    return main(["--bundle", str(bundle), "--train", str(data / "train.jsonl.gz"),
                 "--valid", str(data / "valid.jsonl.gz"), "--out", str(out), "--max-len", "48",
                 "--batch", "4", "--epochs", "1", "--device", "cpu", *extra])


@pytest.fixture(scope="module")
def shipped(tiny_bundle: Path, tiny_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A trained and exported tiny model: what the hand-off continues."""
    from train.export import export

    d = tmp_path_factory.mktemp("shipped")
    assert _train(tiny_bundle, tiny_data, d / "run") == 0
    return export(tiny_bundle, d / "run", d / "model", {"a": 0.5, "b": 0.25}, max_len=48)


def test_the_handoff_continues_as_the_whole_model_does(shipped: Path, tiny_bundle: Path,
                                                       tiny_data: Path, tmp_path: Path) -> None:
    from train.from_onnx import main as from_onnx
    from train.handoff import write_handoff
    from train.pack import read_shards

    h = tmp_path / "handoff"
    sizes = dict(write_handoff(shipped, tiny_bundle, tiny_data, h))
    assert set(sizes) == {"bundle/base.npz", "bundle/tokenizer.json", "init.onnx",
                          "data/train.jsonl.xz", "data/valid.jsonl.gz"}
    with gzip.open(tiny_data / "train.jsonl.gz", "rb") as f, \
            lzma.open(h / "data" / "train.jsonl.xz", "rb") as g:
        assert f.read() == g.read()
    assert "total" in (h / "MANIFEST.txt").read_text()
    with np.load(h / "bundle" / "base.npz") as z:
        assert not [n for n in z.files if n.startswith("l")]  # no encoder layers travel
        assert json.loads(z["config"].tobytes().decode())["trimmed"] is True
    assert sizes["init.onnx"] < (shipped / "model.onnx").stat().st_size
    assert from_onnx(["--onnx", str(h / "init.onnx"), "--out", str(tmp_path / "w_h")]) == 0
    assert from_onnx(["--model-dir", str(shipped), "--out", str(tmp_path / "w_m")]) == 0
    a, b = read_shards(tmp_path / "w_h"), read_shards(tmp_path / "w_m")
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    # training from the trimmed bundle and the read-back model is training from the whole one
    for name, bundle in (("trimmed", h / "bundle"), ("whole", tiny_bundle)):
        assert _train(bundle, tiny_data, tmp_path / name, "--init", str(tmp_path / "w_h"),
                      "--seed", "3") == 0
    t, w = read_shards(tmp_path / "trimmed"), read_shards(tmp_path / "whole")
    assert t.keys() == w.keys() and all(np.array_equal(t[k], w[k]) for k in t)
    # without --init a trimmed bundle has no encoder to train: a clear refusal
    with pytest.raises(SystemExit, match="trimmed bundle"):
        _train(h / "bundle", tiny_data, tmp_path / "none")


def test_a_block8_model_travels_without_its_word_table_and_reads_back_the_same(
        shipped: Path, tiny_bundle: Path, tmp_path: Path) -> None:
    """The shipped model is ``block8`` (word table ``word.int4`` + ``word.scales``)."""
    import onnx

    from train.export import export
    from train.from_onnx import main as from_onnx
    from train.handoff import strip_onnx
    from train.pack import read_shards

    run = shipped.parent / "run"
    m = export(tiny_bundle, run, tmp_path / "b8", {"a": 0.5, "b": 0.25}, max_len=48,
               fmt="block8")
    init = strip_onnx(m / "model.onnx", tmp_path / "init.onnx")
    names = {i.name for i in onnx.load(str(init)).graph.initializer}
    assert not {n for n in names if n.startswith("word.")}
    assert from_onnx(["--onnx", str(init), "--out", str(tmp_path / "w_h")]) == 0
    assert from_onnx(["--model-dir", str(m), "--out", str(tmp_path / "w_m")]) == 0
    a, b = read_shards(tmp_path / "w_h"), read_shards(tmp_path / "w_m")
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def test_a_handoff_over_its_limit_or_without_data_is_refused(shipped: Path, tiny_bundle: Path,
                                                            tmp_path: Path) -> None:
    from train.handoff import write_handoff

    with pytest.raises(ValueError, match="train.jsonl.gz"):
        write_handoff(shipped, tiny_bundle, tmp_path, tmp_path / "h1")
    data = tmp_path / "data"
    data.mkdir()
    for n in ("train.jsonl.gz", "valid.jsonl.gz"):
        with gzip.open(data / n, "wt") as f:
            f.write("{}\n")
    with pytest.raises(ValueError, match="over the"):
        write_handoff(shipped, tiny_bundle, data, tmp_path / "h2", limit_mib=0.001)


def test_a_small_change_survives_the_trip_only_as_a_change(shipped: Path, tiny_bundle: Path,
                                                           tiny_data: Path,
                                                           tmp_path: Path) -> None:
    from train.from_onnx import main as from_onnx
    from train.pack import pack, read_shards, unpack

    assert from_onnx(["--model-dir", str(shipped), "--out", str(tmp_path / "init")]) == 0
    assert _train(tiny_bundle, tiny_data, tmp_path / "run", "--init", str(tmp_path / "init"),
                  "--lr", "1e-6", "--head-lr", "1e-6") == 0
    init, run = read_shards(tmp_path / "init"), read_shards(tmp_path / "run")
    k = "layers.0.q.weight"
    change = run[k].astype(np.float32) - init[k].astype(np.float32)
    assert np.abs(change).max() > 0

    def error(back: Path) -> float:
        got = read_shards(back)[k].astype(np.float32) - init[k].astype(np.float32)
        return float(np.linalg.norm(got - change) / np.linalg.norm(change))

    pack(tmp_path / "run", tmp_path / "w" / "r", parts=2)
    unpack(tmp_path / "w" / "r", tmp_path / "back_w")
    pack(tmp_path / "run", tmp_path / "d" / "r", parts=2, base=tmp_path / "init")
    unpack(tmp_path / "d" / "r", tmp_path / "back_d", base=tmp_path / "init")
    assert error(tmp_path / "back_d") < 0.05 < error(tmp_path / "back_w")
    # a change pack needs its base back, and the same one
    with pytest.raises(SystemExit, match="--base"):
        unpack(tmp_path / "d" / "r", tmp_path / "x")
    with pytest.raises(SystemExit, match="another base"):
        unpack(tmp_path / "d" / "r", tmp_path / "y", base=tmp_path / "run")


def _fake_round(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    """An empty hand-off, a ``python3`` on PATH that records every ``-m`` module run (and runs
    anything else) into the returned log, and the environment a round script runs under."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "modules.txt"
    fake = bin_dir / "python3"
    fake.write_text(f"#!/bin/sh\nif [ \"$1\" = \"-m\" ]; then echo \"$@\" >> {log}; exit 0; fi\n"
                    f"exec {sys.executable} \"$@\"\n")
    fake.chmod(0o755)
    h = tmp_path / "handoff"
    for f in ("bundle/base.npz", "bundle/tokenizer.json", "init.onnx", "data/valid.jsonl.gz"):
        (h / f).parent.mkdir(parents=True, exist_ok=True)
        (h / f).write_bytes(b"")
    with lzma.open(h / "data" / "train.jsonl.xz", "wt") as f:
        f.write('{"premise": "p", "hypothesis": "h", "label": 1}\n')
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "OUT": str(tmp_path / "out"), "HANDOFF": str(h),
           "WORK": str(tmp_path / "work"), "BUDGET": "0"}
    return h, log, env


def test_the_round_script_trains_each_run_from_the_model_and_packs_its_change(
        tmp_path: Path) -> None:
    h, log, env = _fake_round(tmp_path)
    run = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, cwd=REPO,
                         env=env)
    assert run.returncode == 0, run.stdout + run.stderr
    calls = [c.split() for c in log.read_text().splitlines()]
    work = tmp_path / "work"
    assert calls[0][:2] == ["-m", "train.from_onnx"] and calls[0][3] == str(h / "init.onnx")
    assert (work / "train.jsonl").read_text().startswith('{"premise": "p"')
    trains = [c for c in calls if c[1] == "train.train"]
    assert all(c[c.index("--train") + 1] == f"{work}/train.jsonl" for c in trains)
    assert sorted((c[c.index("--lr") + 1], c[c.index("--seed") + 1]) for c in trains) == \
        [("1e-5", "0"), ("2e-5", "0")]
    assert all(c[c.index("--init") + 1] == f"{work}/init" for c in trains)
    packs = [c for c in calls if c[1] == "train.pack"]
    assert len(packs) == 2 and all(c[c.index("--base") + 1] == f"{work}/init" for c in packs)
    # a missing hand-off stops it before anything runs
    (h / "init.onnx").unlink()
    log.unlink()
    run = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, cwd=REPO,
                         env=env)
    assert run.returncode != 0 and "python -m train.handoff" in run.stderr
    assert not log.exists()


def test_the_joint_round_trains_both_heads_in_each_run(tmp_path: Path) -> None:
    """train/round_multitask.sh: round_corpus.sh's runs, each with the hand-off's answerability
    rows and its own loss weight; refused without those rows or a weight."""
    h, log, env = _fake_round(tmp_path)
    script = REPO / "train" / "round_multitask.sh"
    run = subprocess.run(["bash", str(script)], capture_output=True, text=True, cwd=REPO, env=env)
    assert run.returncode != 0 and "train.handoff --answerability" in run.stderr
    assert not log.exists()
    with lzma.open(h / "data" / "answerability.jsonl.xz", "wt") as f:
        f.write('{"question": "q", "passage": "p", "label": 2, "split": "train"}\n')
    run = subprocess.run(["bash", str(script)], capture_output=True, text=True, cwd=REPO,
                         env={**env, "RUNS": "a:2e-5:0"})
    assert run.returncode != 0 and "no answerability weight" in run.stderr
    run = subprocess.run(["bash", str(script)], capture_output=True, text=True, cwd=REPO, env=env)
    assert run.returncode == 0, run.stdout + run.stderr
    calls = [c.split() for c in log.read_text().splitlines()]
    trains = [c for c in calls if c[1] == "train.train"]
    work = tmp_path / "work"
    assert sorted((c[c.index("--lr") + 1], c[c.index("--answerability-weight") + 1])
                  for c in trains) == [("2e-5", "0.5"), ("2e-5", "1.0")]
    assert all(c[c.index("--answerability") + 1] == f"{h}/data/answerability.jsonl.xz"
               and c[c.index("--init") + 1] == f"{work}/init" for c in trains)
    packs = [c for c in calls if c[1] == "train.pack"]
    assert len(packs) == 2 and all(c[c.index("--base") + 1] == f"{work}/init" for c in packs)


def test_the_handoff_carries_the_answerability_rows(shipped: Path, tiny_bundle: Path,
                                                    tiny_data: Path, tmp_path: Path) -> None:
    from train.handoff import write_handoff

    rows = [{"question": "q", "passage": "p", "label": 2, "split": "train"}] * 3
    src = tmp_path / "pairs.jsonl.gz"
    with gzip.open(src, "wt", encoding="utf-8") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    sizes = dict(write_handoff(shipped, tiny_bundle, tiny_data, tmp_path / "h",
                               answerability=src))
    assert "data/answerability.jsonl.xz" in sizes
    with lzma.open(tmp_path / "h" / "data" / "answerability.jsonl.xz", "rt") as f:
        assert [json.loads(line) for line in f] == rows
    assert "data/answerability.jsonl.xz" in (tmp_path / "h" / "MANIFEST.txt").read_text()
    with pytest.raises(ValueError, match="train.answerability build"):
        write_handoff(shipped, tiny_bundle, tiny_data, tmp_path / "h2",
                      answerability=tmp_path / "missing.jsonl.gz")


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
