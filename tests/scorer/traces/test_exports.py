"""The public surface is what ``__all__`` says, and every name in it exists."""

from __future__ import annotations

import importlib

import pytest

MODULES = [
    "ragpulse.scorer.traces",
    "ragpulse.scorer.traces.span",
    "ragpulse.scorer.traces.decode",
    "ragpulse.scorer.traces.extract",
    "ragpulse.scorer.traces.sampling",
    "ragpulse.scorer.traces.instrument",
]


@pytest.mark.parametrize("name", MODULES)
def test_all_names_exist(name: str) -> None:
    module = importlib.import_module(name)
    missing = [n for n in module.__all__ if not hasattr(module, n)]
    assert not missing
    assert len(set(module.__all__)) == len(module.__all__)


def test_package_reexports_the_submodules_public_names() -> None:
    import ragpulse.scorer.traces as pkg

    for sub in ("span", "decode", "sampling"):
        module = importlib.import_module(f"ragpulse.scorer.traces.{sub}")
        assert set(module.__all__) <= set(pkg.__all__), sub
    # the helper stays out of the scorer's import path
    assert "RagTracer" not in pkg.__all__
