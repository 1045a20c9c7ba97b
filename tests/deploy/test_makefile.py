"""The README's two set-up commands: `make demo` installs the runtime only (ragpulse and the
demo app's OTLP exporter, not the 1.7 GB of dev extras), `make test` the dev extras. Checked on
make's own plan for a fresh checkout (`make -n -B`: every target out of date, nothing run)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _plan(target: str) -> list[str]:
    if shutil.which("make") is None:
        pytest.fail("make is required (the README's set-up commands are make targets)")
    # Under `make test` itself (CI) the outer make's MAKELEVEL/MAKEFLAGS would make this one a
    # sub-make that prints "Entering/Leaving directory" lines: plan as a fresh shell would.
    env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
    out = subprocess.run(["make", "--no-print-directory", "-n", "-B", target], cwd=REPO, env=env,
                         capture_output=True, text=True, check=True, timeout=30).stdout
    return [ln.strip() for ln in out.splitlines() if ln.strip()]


def test_make_demo_installs_the_runtime_only() -> None:
    plan = _plan("demo")
    installs = [ln for ln in plan if " install " in f" {ln} " and "pip" in ln]
    assert any(ln.endswith('-e ".[demo]"') for ln in installs), plan
    assert not any("dev" in ln for ln in installs), plan
    assert plan[-1] == ".venv/bin/ragpulse up --demo"


def test_make_test_installs_the_dev_extras_then_lints_and_tests() -> None:
    plan = _plan("test")
    assert any(ln.endswith('-e ".[dev]"') for ln in plan), plan
    assert plan[-2:] == [".venv/bin/ruff check .", ".venv/bin/python -m pytest -q -p no:cacheprovider"]


def test_the_demo_extra_is_what_the_demo_imports() -> None:
    import tomllib

    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    demo_src = (REPO / "deploy/ragpulse/deploy/demo.py").read_text()
    assert "opentelemetry.exporter.otlp.proto.http" in demo_src
    assert any(d.startswith("opentelemetry-exporter-otlp-proto-http") for d in extras["demo"])
