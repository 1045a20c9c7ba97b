"""The scorer's self-telemetry: its ``stats()`` names, a view of its declarations in
:data:`ragpulse.common.SELF_METRICS` (meaning, kind, unit, the part that counts each).

Stage names are verbs (consume, decode, assemble, sample, evaluate, write, commit). Each counter
is incremented by exactly one thread (the declarations say which), so plain integer updates
under the GIL cannot lose increments and :meth:`Counters.snapshot` may be called from any thread.

:data:`COUNTERS` are counted by :class:`Counters`, one per step and one for the processing loop
(``processor.StreamProcessor``); :data:`GAUGES` are computed by the loop and the steps;
:data:`PARTS` are counted by the parts the steps drive (the trace assembler, the span decoder,
the ClickHouse writer). Each step and the loop report theirs with ``stats()``, and
``Scorer.stats()`` merges them under these names (:func:`merge_stats`).
``ragpulse.deploy.telemetry`` exports all of them (``/metrics``, OTLP) and the
``pipeline_health`` rows hold all of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

from ragpulse.common import self_metrics

__all__ = ["COUNTERS", "GAUGES", "LABELLED", "PARTS", "Counters", "declared", "merge_stats"]

Kind = Literal["counter", "gauge"]

_OWN = [m for m in self_metrics("scorer").values() if not m.part]
COUNTERS: dict[str, str] = {m.name: m.help for m in _OWN if m.kind == "counter"}
GAUGES: dict[str, str] = {m.name: m.help for m in _OWN if m.kind == "gauge"}
PARTS: dict[str, tuple[Kind, str]] = {
    m.name: (m.kind, m.help) for m in self_metrics("scorer").values() if m.part}
LABELLED: dict[str, str] = {
    m.name: f"by {m.split_by}" for m in self_metrics("scorer").values() if m.split_by}
"""Counters also reported split by a label (``Scorer.labelled_counters()``)."""


def declared(kind: Kind) -> tuple[str, ...]:
    """Every declared ``stats()`` name of ``kind``, in declaration order."""
    return tuple(name for name, m in self_metrics("scorer").items() if m.kind == kind)


class Counters:
    """Monotonic counters, each named in :data:`COUNTERS`: every step and the processor keep
    their own (``names``, the ones they count). Unknown names raise ``KeyError``, at
    construction and in :meth:`add`. :meth:`snapshot` is safe from any thread.

    The contract is single writer per name, and no lock: :meth:`add` is one ``+=`` on a key that
    exists from construction, so the dictionary never changes size, and :meth:`snapshot` copies
    it in one C call under the GIL (no increment is lost, none is half-seen). A counter that two
    threads must add to needs an owner of its own instead (one ``Counters`` per thread)."""

    __slots__ = ("_values",)

    def __init__(self, names: Iterable[str]) -> None:
        undeclared = [name for name in names if name not in COUNTERS]
        if undeclared:
            raise KeyError(f"counters not declared in ragpulse.common.SELF_METRICS: {undeclared}")
        self._values: dict[str, int] = dict.fromkeys(names, 0)

    def add(self, name: str, count: int = 1) -> None:
        """Add ``count`` to ``name``; only by that name's one thread. ``KeyError`` if not kept."""
        # Single writer per name (see module docstring), so no lock on the hot path.
        self._values[name] += count

    def __getitem__(self, name: str) -> int:
        return self._values[name]

    def snapshot(self) -> dict[str, int]:
        """A copy of every value. Any thread (see the class docstring)."""
        return dict(self._values)


def merge_stats(parts: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """One ``stats()`` dictionary from the processor's and the steps' own: a counter of
    :data:`COUNTERS` that several of them count (``traces_dropped``: prepare and evaluate) is
    summed; any other name is taken as it is (each gauge has one owner)."""
    out: dict[str, Any] = {}
    for part in parts:
        for name, value in part.items():
            out[name] = out.get(name, 0) + value if name in COUNTERS else value
    return out
