"""Fixtures of the NLI judge tests: a tiny model built in a temporary directory (no download)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragpulse.scorer.embeddings import USEEmbedder

from .tiny import build_tiny_nli


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_nli(tmp_path_factory.mktemp("tiny-nli"))


@pytest.fixture(scope="session")
def use_embedder() -> USEEmbedder:
    return USEEmbedder(threads=1)
