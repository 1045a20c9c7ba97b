"""train/round_v6.sh: the xz'd data v6 is unpacked and each seed trains on it (the recipe of
train/gpu_runs.sh, TRAIN_FILE naming the unpacked file); missing data stops the script before any
training starts."""

from __future__ import annotations

import gzip
import json
import lzma
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "train" / "round_v6.sh"



def _fake_python(tmp_path: Path) -> tuple[Path, Path]:
    """A python3 that runs the script's own inline Python (stdin) and records every module run
    (training, packing) instead of running it; ``FAIL_SEED`` makes that seed's training fail."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "modules.txt"
    fake = bin_dir / "python3"
    fake.write_text(f"#!/bin/sh\nif [ \"$1\" = \"-m\" ]; then echo \"$@\" >> {log}; "
                    "case \"$*\" in *\"--seed ${FAIL_SEED:-none} \"*) exit 3;; esac; exit 0; fi\n"
                    f"exec {sys.executable} \"$@\"\n")
    fake.chmod(0o755)
    return bin_dir, log


def _run(tmp_path: Path, data: Path, **env: str) -> subprocess.CompletedProcess[str]:
    bin_dir, _ = _fake_python(tmp_path)
    bundle = tmp_path / "bundle"
    bundle.mkdir(exist_ok=True)
    (bundle / "base.npz").write_bytes(b"")
    (tmp_path / "runs").mkdir(exist_ok=True)
    return subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, cwd=REPO,
                          env={"PATH": f"{bin_dir}:/usr/bin:/bin", "OUT": str(tmp_path / "out"),
                               "DATA": str(data), "WORK": str(tmp_path / "work"),
                               "RUNS": str(tmp_path / "runs"), "BUNDLE": str(bundle),
                               "BUDGET": "0", **env})


def _data(tmp_path: Path, rows: list[dict]) -> Path:
    data = tmp_path / "data8x"
    data.mkdir()
    with lzma.open(data / "train.jsonl.xz", "wt") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    with gzip.open(data / "valid.jsonl.gz", "wt") as f:
        f.write(json.dumps(rows[0]) + "\n")
    return data


def test_each_seed_trains_on_the_unpacked_data(tmp_path: Path) -> None:
    rows = [{"premise": f"p{i}", "hypothesis": f"h{i}", "label": i % 2} for i in range(5)]
    run = _run(tmp_path, _data(tmp_path, rows))
    assert run.returncode == 0, run.stdout + run.stderr
    assert "data v6: 5 training pairs" in run.stdout
    work = tmp_path / "work"
    assert [json.loads(x) for x in (work / "train.jsonl").read_text().splitlines()] == rows
    calls = (tmp_path / "modules.txt").read_text().splitlines()
    trains = [c.split() for c in calls if c.startswith("-m train.train")]
    assert sorted(c[c.index("--seed") + 1] for c in trains) == ["0", "1", "2"]
    for c in trains:
        assert c[c.index("--train") + 1] == f"{work}/train.jsonl"
        assert c[c.index("--valid") + 1] == f"{work}/valid.jsonl.gz"
    assert sum(c.startswith("-m train.pack") for c in calls) == 3


def test_missing_data_stops_before_training(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    run = _run(tmp_path, tmp_path / "empty")
    assert run.returncode != 0 and "needs train.jsonl.xz and valid.jsonl.gz" in run.stderr
    assert not (tmp_path / "modules.txt").exists()


def test_a_failed_seed_fails_the_script(tmp_path: Path) -> None:
    rows = [{"premise": "p", "hypothesis": "h", "label": 1}]
    run = _run(tmp_path, _data(tmp_path, rows), FAIL_SEED="1")
    assert run.returncode != 0 and "failed: s1" in run.stdout, run.stdout
    logs = (tmp_path / "out" / "logs.txt").read_text()
    assert "run s0 rc 0" in logs and "run s1 rc 3" in logs and "run s2 rc 0" in logs


def test_a_missing_bundle_stops_before_training(tmp_path: Path) -> None:
    rows = [{"premise": "p", "hypothesis": "h", "label": 1}]
    run = _run(tmp_path, _data(tmp_path, rows), BUNDLE=str(tmp_path / "nowhere"))
    assert run.returncode != 0 and "no bundle at" in run.stdout
    assert not (tmp_path / "modules.txt").exists()  # nothing trained or packed
