"""train/ablate_v5.sh: each variant leaves out exactly one of data v5's new kinds and keeps the
others at data v5's sizes; an unknown variant stops the script before anything runs."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "train" / "ablate_v5.sh"
V5 = {"--polarity": "2000", "--exceptions": "1000", "--shapes": "3000"}  # train/README.md



def kinds(variant: str) -> dict[str, str]:
    body = SCRIPT.read_text()
    func = body[body.index("kinds() {"): body.index("\n}\n", body.index("kinds() {")) + 3]
    out = subprocess.run(["bash", "-c", f"{func}\nkinds {variant}"], capture_output=True,
                         text=True, check=True).stdout.split()
    return dict(zip(out[::2], out[1::2], strict=True))


@pytest.mark.parametrize(("variant", "left_out"), [("no-pol", "--polarity"),
                                                   ("no-exc", "--exceptions"),
                                                   ("no-shapes", "--shapes")])
def test_each_variant_leaves_out_one_kind(variant: str, left_out: str) -> None:
    got = kinds(variant)
    assert got == {**V5, left_out: "0"}
    # the continuation builder takes them as they are
    from train.data import continuation

    parsed = continuation.parser().parse_args(["--base", "B", "--out", "O", *sum(
        ([k, v] for k, v in got.items()), [])])
    assert getattr(parsed, left_out.strip("-")) == 0


def test_an_unknown_variant_stops_before_anything_runs(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    marker = tmp_path / "python3-ran"
    fake = bin_dir / "python3"  # records any build or training the script starts
    fake.write_text(f"#!/bin/sh\necho \"$@\" >> {marker}\n")
    fake.chmod(0o755)
    run = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True,
                         env={"PATH": f"{bin_dir}:/usr/bin:/bin", "OUT": str(tmp_path / "out"),
                              "VARIANTS": "no-pol bogus"})
    assert run.returncode == 2 and "unknown variant bogus" in run.stdout
    time.sleep(1)  # a build started in the background would have written by now
    assert not marker.exists()
