"""The USE embedder with its real model: unit rows, cache hits, thread-safe concurrent use."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from ragpulse.scorer.embeddings import USEEmbedder


@pytest.fixture(scope="module")
def embedder() -> USEEmbedder:
    return USEEmbedder(threads=1)


def test_rows_are_unit_vectors_and_repeats_hit_the_cache(embedder: USEEmbedder) -> None:
    texts = ["富士山の標高は3776メートルです。", "The tower opened in 1889.", "长城很长。", ""]
    v = embedder.embed(texts)
    assert v.shape == (4, 512) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    hits = embedder.cache_hits
    again = embedder.embed(texts[:2])
    assert embedder.cache_hits == hits + 2
    assert np.array_equal(again, v[:2])


def test_concurrent_callers_get_the_same_vectors(embedder: USEEmbedder) -> None:
    texts = [[f"sentence number {i} about topic {j}" for j in range(6)] for i in range(8)]
    expected = [embedder.embed(t) for t in texts]
    fresh = USEEmbedder(threads=1, cache_size=0)
    with ThreadPoolExecutor(4) as ex:
        got = list(ex.map(fresh.embed, texts))
    for a, b in zip(expected, got):
        assert np.allclose(a, b, atol=1e-6)


def test_invalid_settings() -> None:
    with pytest.raises(ValueError):
        USEEmbedder(threads=0)
