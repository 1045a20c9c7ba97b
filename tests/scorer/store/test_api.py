"""The store's public surface is curated: everything in __all__ exists and lives in the store."""

from __future__ import annotations

import ragpulse.scorer.store as store


def test_exported_members() -> None:
    assert len(set(store.__all__)) == len(store.__all__)
    assert store.__all__ == sorted(store.__all__, key=lambda n: (not n.isupper(), n))
    for name in store.__all__:
        obj = getattr(store, name)
        module = getattr(obj, "__module__", "ragpulse.scorer.store")
        assert module.startswith("ragpulse.scorer.store"), (name, module)
    # The names other components code against.
    for name in ("ScoreWriter", "ScoreRow", "ScoredTraceMeta", "rows_from_scores", "WriterSettings",
                 "WriterFull", "open_store", "init_schema", "SchemaSettings", "remove_owner",
                 "StoreLockedError", "PipelineHealthSampler", "build_pipeline_health_writer"):
        assert name in store.__all__
