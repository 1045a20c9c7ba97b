"""The benches that measure a constant the product reads (bench/judge_speed.py's SAMPLES_PER_S,
bench/faithfulness_distributions.py's FAITHFULNESS_LEVELS) rewrite its one line in registry.py
through ``bench.docs_section.write_constant``."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bench.docs_section import write_constant

REGISTRY = Path(__file__).resolve().parents[2] / "scorer/ragpulse/scorer/judges/registry.py"


def test_it_rewrites_the_one_line_and_nothing_else(tmp_path: Path) -> None:
    copy = tmp_path / "registry.py"
    shutil.copy(REGISTRY, copy)
    before = copy.read_text(encoding="utf-8").splitlines()
    write_constant(copy, "SAMPLES_PER_S", {"model": 9.5, "fast": 6.0})
    write_constant(copy, "FAITHFULNESS_LEVELS", {"model": 0.4, "fast": 0.35}, ".2f")
    after = copy.read_text(encoding="utf-8").splitlines()
    changed = [(a, b) for a, b in zip(before, after, strict=True) if a != b]
    assert sorted(b for _, b in changed) == [
        'FAITHFULNESS_LEVELS: dict[str, float] = {"fast": 0.35, "model": 0.40}',
        'SAMPLES_PER_S: dict[str, float] = {"fast": 6.0, "model": 9.5}',
    ]
    ns: dict = {}
    exec("\n".join(b for _, b in changed), ns)  # the lines are Python that reads back
    assert ns["FAITHFULNESS_LEVELS"] == {"fast": 0.35, "model": 0.4}
    assert ns["SAMPLES_PER_S"] == {"fast": 6.0, "model": 9.5}


def test_a_missing_line_writes_nothing(tmp_path: Path) -> None:
    f = tmp_path / "x.py"
    f.write_text("OTHER = 1\n", encoding="utf-8")
    with pytest.raises(SystemExit, match="NOPE line not found"):
        write_constant(f, "NOPE", {"a": 1.0})
    assert f.read_text(encoding="utf-8") == "OTHER = 1\n"
