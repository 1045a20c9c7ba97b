"""Fixtures of the local judge tests: the real multilingual USE model and the shipped support
detector, loaded once per session (loading USE takes about 1.5 s)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from ragpulse.scorer.embeddings import USEEmbedder
from ragpulse.scorer.judges.local import LocalJudge, LocalJudgeSettings


@pytest.fixture(scope="session")
def use_embedder() -> USEEmbedder:
    return USEEmbedder(threads=1).warm()


@pytest.fixture(scope="session")
def support_detector(use_embedder: USEEmbedder):
    from ragpulse.scorer.judges.local.support_detector import SupportDetector

    return SupportDetector(embedder=use_embedder)


@pytest.fixture
async def local_judge(use_embedder: USEEmbedder, support_detector) -> AsyncIterator[LocalJudge]:
    judge = LocalJudge(LocalJudgeSettings(), embedder=use_embedder, detector=support_detector)
    yield judge
    await judge.aclose()
