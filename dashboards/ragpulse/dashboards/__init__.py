"""ragpulse.dashboards: Grafana dashboards and alert rules over ClickHouse, and offline reports.

* :mod:`.settings`: :class:`DashboardsSettings` (with :class:`AlertSettings`, :class:`DriftSettings`).
* :mod:`.queries`: every panel query (plugin macros + template variables) and the drift SQL.
* :mod:`.macros`: the plugin's macro and variable expansion, to run those queries without Grafana.
* :mod:`.dashboard` / :mod:`.alerts` / :mod:`.provisioning`: Grafana JSON, alert rules (and a local
  evaluator), provisioning files. :mod:`.push`: the same through Grafana's HTTP API.
* :mod:`.report` / :mod:`.status`: ``ragpulse report`` (self-contained HTML) and ``ragpulse status``.
* :mod:`.why`: which segment drove a change (``ragpulse status --why``, the "What changed" panel).
"""

from .alerts import AlertInstance, RuleSpec, evaluate, evaluate_all, grafana_rule, rule_specs
from .dashboard import build_dashboard
from .frames import since
from .macros import ALL, MacroError, QueryContext, expand
from .provisioning import export, files, write_atomic
from .push import GrafanaPushError, push
from .report import build_report
from .settings import AlertSettings, DashboardsSettings, DriftSettings, WhySettings
from .status import (
    collect_status,
    render_status,
    status_interval,
    status_judges,
    unscorable_traces,
)
from .why import WhyResult, explain_change, render_why, why_windows

__all__ = [
    "ALL",
    "AlertInstance",
    "AlertSettings",
    "DashboardsSettings",
    "DriftSettings",
    "GrafanaPushError",
    "MacroError",
    "QueryContext",
    "RuleSpec",
    "WhyResult",
    "WhySettings",
    "build_dashboard",
    "build_report",
    "collect_status",
    "evaluate",
    "evaluate_all",
    "expand",
    "explain_change",
    "export",
    "files",
    "grafana_rule",
    "push",
    "render_status",
    "render_why",
    "rule_specs",
    "since",
    "status_interval",
    "status_judges",
    "unscorable_traces",
    "why_windows",
    "write_atomic",
]
