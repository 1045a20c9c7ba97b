"""Issue 43 item 4: every counter and gauge is declared once (``ragpulse.common.SELF_METRICS``).
Each component reports exactly its declared names, ``/metrics`` exposes every one of them with
the declared kind, and docs/telemetry.md's table is the declarations."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from ragpulse.common import SELF_METRICS, self_metric, self_metrics, self_metrics_table
from ragpulse.deploy.telemetry import StatsSource, render_prometheus

from .deploy import promtext

DOC = Path(__file__).resolve().parents[1] / "docs" / "telemetry.md"
NOT_METRICS = {"scorer": {"last_write_error"}}
"""``stats()`` keys that are text, not metrics."""


def _collector(_: Any) -> Mapping[str, Any]:
    """A never-started collector's stats as ``ragpulse collector --workers 2`` reports them:
    its own, and per worker (the worker's report and the shared listener's connections)."""
    from ragpulse.collector import CollectorSettings, build_collector
    from ragpulse.deploy.commands.collector import _Workers

    collector = build_collector(CollectorSettings())
    try:
        workers = _Workers(1, http_shared=SimpleNamespace(connections=lambda: [3, 2]))
        workers.own_stats = collector.stats
        return workers.stats()
    finally:
        collector.shutdown()


def _scorer(request: pytest.FixtureRequest) -> Mapping[str, Any]:
    from ragpulse.scorer.pipeline import ScorerSettings, build_scorer

    from .scorer.doubles import TableJudge

    settings = ScorerSettings(database=request.getfixturevalue("rag_database"))
    scorer = build_scorer(settings, judge=TableJudge({}),
                          client=request.getfixturevalue("chdb_client"))
    try:
        labelled = scorer.labelled_counters()
        assert set(labelled) == {n for n, m in self_metrics("scorer").items() if m.split_by}
        return scorer.stats()
    finally:
        scorer.shutdown()


def _facade(request: pytest.FixtureRequest) -> Mapping[str, Any]:
    from ragpulse.deploy.facade import FacadeSettings, build_facade

    facade = build_facade(str(request.getfixturevalue("chdb_dir")), FacadeSettings(advertise=False))
    try:
        return facade.stats()
    finally:
        facade.shutdown()


STATS: dict[str, Callable[[pytest.FixtureRequest], Mapping[str, Any]]] = {
    "collector": _collector, "scorer": _scorer, "facade": _facade}


@pytest.mark.parametrize("component", sorted(STATS))
def test_each_component_reports_and_exposes_exactly_its_declared_names(
        component: str, request: pytest.FixtureRequest) -> None:
    stats = STATS[component](request)
    declared = self_metrics(component)  # type: ignore[arg-type]
    assert set(stats) - NOT_METRICS.get(component, set()) == set(declared)

    fams = promtext.parse(render_prometheus([StatsSource(component, lambda: stats)]))  # type: ignore[arg-type]
    exposed = {n for n in fams if n.startswith(f"ragpulse_{component}_")}
    assert exposed == {m.prometheus_name for m in declared.values()}
    for m in declared.values():
        fam = fams[m.prometheus_name]
        assert fam.type == m.kind and fam.help == m.help, m.name
        assert all(set(labels) == ({m.label} if m.label else set()) for labels, _ in fam.samples)


def test_docs_table_is_the_declarations() -> None:
    found = re.search(r"<!-- self-metrics:[^>]*-->\n(.*?)\n<!-- /self-metrics -->",
                      DOC.read_text(encoding="utf-8"), re.DOTALL)
    assert found is not None, "docs/telemetry.md lost its self-metrics block"
    assert found.group(1) == self_metrics_table(), (
        "docs/telemetry.md's table differs from the declarations; paste "
        "ragpulse.common.self_metrics_table() between the markers")


def test_a_name_is_looked_up_loudly() -> None:
    assert self_metric("consumer_lag").kind == "gauge"
    with pytest.raises(KeyError, match="'consumer_lagg' is declared by no component"):
        self_metric("consumer_lagg")
    # pipeline_health rows and the dashboards name a counter without its component
    writers = [m.name for m in SELF_METRICS if m.component != "facade"]
    assert len(writers) == len(set(writers))
