"""The wheel holds every subpackage and data file of the source trees, under ``ragpulse.``
only (no bare ``collector``/``scorer`` modules in site-packages), with one console script."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TREES = ("instrument", "common", "collector", "scorer", "dashboards", "deploy")
DATA_SUFFIXES = {".yaml", ".yml", ".json", ".toml", ".txt", ".sql", ".jinja", ".html"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(out), str(ROOT)],
        check=True, capture_output=True, timeout=300,
    )
    (whl,) = out.glob("ragpulse-*.whl")
    return zipfile.ZipFile(whl)


def _source_files() -> list[str]:
    files = []
    for tree in TREES:
        base = ROOT / tree
        for p in (base / "ragpulse").rglob("*"):
            if p.is_file() and "__pycache__" not in p.parts and (
                p.suffix == ".py" or p.suffix in DATA_SUFFIXES
            ):
                files.append(p.relative_to(base).as_posix())
    return files


def test_every_source_and_data_file_is_in_the_wheel(wheel: zipfile.ZipFile) -> None:
    names = set(wheel.namelist())
    missing = [f for f in _source_files() if f not in names]
    assert not missing, f"not in the wheel: {missing}"


def test_only_the_ragpulse_namespace_is_installed(wheel: zipfile.ZipFile) -> None:
    tops = {n.split("/")[0] for n in wheel.namelist() if not n.startswith("ragpulse-")}
    assert tops == {"ragpulse"}
    assert "ragpulse/__init__.py" not in wheel.namelist()  # a namespace shared by the trees


def test_one_console_script(wheel: zipfile.ZipFile) -> None:
    (ep,) = [n for n in wheel.namelist() if n.endswith("entry_points.txt")]
    text = wheel.read(ep).decode()
    assert "[console_scripts]" in text
    scripts = [line for line in text.split("[console_scripts]")[1].splitlines() if "=" in line]
    assert [s.replace(" ", "") for s in scripts] == ["ragpulse=ragpulse.deploy.cli:main"]


def test_scorer_public_api_is_curated() -> None:
    import ragpulse.scorer as s

    assert len(set(s.__all__)) == len(s.__all__)
    for name in s.__all__:
        obj = getattr(s, name)
        assert not name.startswith("_")
        module = getattr(obj, "__module__", "ragpulse.scorer")
        assert module.startswith("ragpulse.scorer"), (name, module)
