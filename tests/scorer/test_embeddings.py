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


def test_invalid_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError):
        USEEmbedder(threads=0)
    with pytest.raises(ValueError, match="RAGPULSE_EMBEDDINGS_PRECISION"):
        USEEmbedder(precision="fp16")
    monkeypatch.setenv("RAGPULSE_EMBEDDINGS_PRECISION", "Float")
    assert USEEmbedder().precision == "float"
    monkeypatch.setenv("RAGPULSE_EMBEDDINGS_PRECISION", "half")
    with pytest.raises(ValueError, match="int8, float"):
        USEEmbedder()


def test_the_float_forward_pass_runs_with_the_threads_asked_for() -> None:
    """With ``precision="float"``, ``threads`` is the BLAS thread count while the model runs
    (threadpoolctl): numpy's OpenBLAS otherwise starts one per core, which cost 2-6x the CPU a
    sample on 2 shared cores. The vectors do not depend on it."""
    from threadpoolctl import threadpool_info

    texts = [f"The report on topic {i} was published in {1990 + i} by the city council."
             for i in range(40)]
    got: dict[int, list[int]] = {}
    vectors: dict[int, np.ndarray] = {}
    for threads in (1, 2):
        e = USEEmbedder(threads=threads, cache_size=0, precision="float")
        model = e.warm()._model
        forward = model.encode
        seen: list[int] = []

        def spy(batch: list[str], forward=forward, seen=seen) -> np.ndarray:
            seen.extend(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas")
            return forward(batch)

        model.encode = spy
        vectors[threads] = e.embed(texts)
        got[threads] = seen
    assert got[1] and set(got[1]) == {1}
    assert got[2] and set(got[2]) == {2}
    assert np.allclose(vectors[1], vectors[2], rtol=0.0, atol=1e-6)
