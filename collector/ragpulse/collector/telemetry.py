"""The collector's ``stats()`` names and meanings: a view of its declarations in
:data:`ragpulse.common.SELF_METRICS` (kinds, units and labels are there). A test checks that
``Collector.stats()`` reports exactly :data:`COUNTERS`.
"""

from __future__ import annotations

from ragpulse.common import self_metrics

__all__ = ["COUNTERS", "PER_WORKER"]

COUNTERS: dict[str, str] = {
    m.name: m.help for m in self_metrics("collector").values() if m.label is None}
"""Every counter and gauge ``Collector.stats()`` reports, with its meaning."""

PER_WORKER: dict[str, str] = {
    m.name: m.help for m in self_metrics("collector").values() if m.label == "worker"}
"""Counters ``ragpulse collector`` reports per worker process (a ``{worker index: value}``
mapping in its stats, label ``worker``), beside the sums in :data:`COUNTERS`; only with
``--workers`` above 1."""
