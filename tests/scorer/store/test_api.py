"""The store's public surface holds the names other components code against (tests/test_layers.py
checks every package's __all__ in general)."""

from __future__ import annotations

import ragpulse.scorer.store as store


def test_exported_members() -> None:
    for name in ("ScoreWriter", "ScoreRow", "ScoredTraceMeta", "rows_from_scores", "WriterSettings",
                 "WriterFull", "open_store", "init_schema", "SchemaSettings", "remove_owner",
                 "StoreLockedError", "PipelineHealthSampler", "build_pipeline_health_writer"):
        assert name in store.__all__
