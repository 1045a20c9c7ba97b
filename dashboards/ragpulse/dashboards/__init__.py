"""ragpulse.dashboards: Grafana dashboards and alert rules over ClickHouse, and offline reports.

* :mod:`.settings`: :class:`DashboardsSettings` (with :class:`AlertSettings`, :class:`DriftSettings`).
* :mod:`.queries`: every panel query (plugin macros + template variables) and the drift SQL.
* :mod:`.macros`: the plugin's macro and variable expansion, to run those queries without Grafana.
* :mod:`.dashboard` / :mod:`.alerts` / :mod:`.provisioning`: Grafana JSON, alert rules (and a local
  evaluator), provisioning files. :mod:`.push`: the same through Grafana's HTTP API.
* :mod:`.report` / :mod:`.status`: ``ragpulse report`` (self-contained HTML) and ``ragpulse status``.
"""

from .alerts import AlertInstance, RuleSpec, evaluate, evaluate_all, grafana_rule, rule_specs
from .dashboard import build_dashboard
from .frames import since
from .macros import ALL, MacroError, QueryContext, expand
from .provisioning import export, files, write_atomic
from .push import GrafanaPushError, push
from .report import build_report
from .settings import AlertSettings, DashboardsSettings, DriftSettings
from .status import (
    collect_status,
    render_status,
    status_interval,
    status_judges,
    unscorable_traces,
)

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
    "build_dashboard",
    "build_report",
    "collect_status",
    "evaluate",
    "evaluate_all",
    "expand",
    "export",
    "files",
    "grafana_rule",
    "push",
    "render_status",
    "rule_specs",
    "since",
    "status_interval",
    "status_judges",
    "unscorable_traces",
    "write_atomic",
]
