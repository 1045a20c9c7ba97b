"""The USE embedder with its real model: unit rows, cache hits, and a pool of model copies that
serves concurrent callers with the same vectors as one copy."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from ragpulse.scorer.embeddings import USEEmbedder


@pytest.fixture(scope="module")
def pooled() -> USEEmbedder:
    return USEEmbedder(threads=1, instances=2)


def test_rows_are_unit_vectors_and_repeats_hit_the_cache(pooled: USEEmbedder) -> None:
    texts = ["富士山の標高は3776メートルです。", "The tower opened in 1889.", "长城很长。", ""]
    v = pooled.embed(texts)
    assert v.shape == (4, 512) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    hits = pooled.cache_hits
    again = pooled.embed(texts[:2])
    assert pooled.cache_hits == hits + 2
    assert np.array_equal(again, v[:2])


def test_concurrent_callers_get_the_same_vectors_as_one_model(pooled: USEEmbedder) -> None:
    texts = [[f"sentence number {i} about topic {j}" for j in range(6)] for i in range(8)]
    single = USEEmbedder(threads=1, instances=1, cache_size=0)
    expected = [single.embed(t) for t in texts]
    fresh = USEEmbedder(threads=1, instances=2, cache_size=0)
    with ThreadPoolExecutor(4) as ex:
        got = list(ex.map(fresh.embed, texts))
    for a, b in zip(expected, got):
        assert np.allclose(a, b, atol=1e-6)
    assert fresh._created <= 2  # never more copies than asked for


def test_invalid_settings() -> None:
    with pytest.raises(ValueError):
        USEEmbedder(threads=0)
    with pytest.raises(ValueError):
        USEEmbedder(instances=0)
