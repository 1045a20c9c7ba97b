"""What the LLM judge's tests and ``bench/deadlines.py`` score with: a real embedder over a fixed
table, and one faithfulness sample (a refund window, answered from its one context)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ragpulse.scorer.model import Sample

__all__ = ["SAMPLE", "TableEmbedder"]

SAMPLE = Sample(id="s1", question="How long is the refund window?",
                contexts=["Refunds are accepted within 30 days of purchase with a receipt."],
                answer="You can get a refund within 30 days if you have a receipt.")


class TableEmbedder:
    """A real Embedder over a fixed table: each known text gets its vector, any other text a
    deterministic pseudo-random one. Lets a test fix exact cosines."""

    name = "table-embedder"

    def __init__(self, table: dict[str, Sequence[float]] | None = None, dim: int = 8) -> None:
        self.table = {k: np.asarray(v, dtype=np.float32) for k, v in (table or {}).items()}
        self.dim = dim
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        rows = []
        for t in texts:
            v = self.table.get(t)
            if v is None:
                rng = np.random.default_rng(abs(hash(t)) % (2**32))
                v = rng.normal(size=self.dim).astype(np.float32)
            v = np.pad(v, (0, max(0, self.dim - len(v))))[: self.dim]
            rows.append(v / (np.linalg.norm(v) or 1.0))
        return np.stack(rows) if rows else np.zeros((0, self.dim), np.float32)

    async def aembed(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed(texts)
