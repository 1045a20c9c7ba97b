"""The Grafana dashboard JSON, built from :mod:`.queries` (plain dicts in Grafana's dashboard
model, schemaVersion 39; the tests check them against grafana-foundation-sdk's model and the
ClickHouse plugin's query model). Pure functions: the same settings always give the same JSON,
which is what lets the committed files be checked for freshness."""

from __future__ import annotations

from typing import Any

from .queries import FORMAT_TIME_SERIES, PanelSpec, sections
from .settings import SEGMENT_DIMENSIONS, DashboardsSettings

__all__ = ["PLUGIN_TYPE", "build_dashboard", "datasource_ref", "target", "variables"]

PLUGIN_TYPE = "grafana-clickhouse-datasource"
SCHEMA_VERSION = 39
DASHBOARD_UID = "ragpulse-quality"


def datasource_ref(settings: DashboardsSettings) -> dict[str, str]:
    """The ClickHouse datasource as a panel or target refers to it."""
    return {"type": PLUGIN_TYPE, "uid": settings.datasource_uid}


def target(settings: DashboardsSettings, sql: str, fmt: int, ref: str = "A") -> dict[str, Any]:
    """A panel target in the plugin's SQL-editor query model (``src/types/sql.ts``)."""
    return {
        "refId": ref,
        "datasource": datasource_ref(settings),
        "editorType": "sql",
        "queryType": "timeseries" if fmt == FORMAT_TIME_SERIES else "table",
        "format": fmt,
        "rawSql": sql,
        "pluginVersion": "4.0.0",
    }


def variable_sql(settings: DashboardsSettings, dim: str) -> str:
    """The query behind the dashboard variable ``dim``: its values in the time range."""
    table = "scores_1m"
    return (f"SELECT DISTINCT {dim} FROM `{settings.database}`.`{table}` "
            f"WHERE $__timeFilter(minute) ORDER BY {dim}")


def variables(settings: DashboardsSettings) -> list[dict[str, Any]]:
    """Query variables (multi-value, "All" by default) for every drill-down dimension and the
    metric. Refreshed on time-range change so a new prompt version shows up by itself."""
    out = []
    for dim in (*SEGMENT_DIMENSIONS, "metric"):
        sql = variable_sql(settings, dim)
        out.append({
            "type": "query",
            "name": dim,
            "label": dim.replace("_", " "),
            "datasource": datasource_ref(settings),
            "query": {"editorType": "sql", "rawSql": sql, "format": 1, "refId": dim},
            "refresh": 2,
            "includeAll": True,
            "multi": True,
            "sort": 1,
            "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
            "options": [],
            "hide": 0,
            "skipUrlSync": False,
        })
    return out


def _field_config(p: PanelSpec, s: DashboardsSettings) -> dict[str, Any]:
    defaults: dict[str, Any] = {"unit": p.unit, "custom": {}}
    if p.min is not None:
        defaults["min"] = p.min
    if p.max is not None:
        defaults["max"] = p.max
    if p.kind == "timeseries":
        defaults["custom"] = {"drawStyle": "line", "lineWidth": 2, "fillOpacity": 0,
                              "showPoints": "never", "spanNulls": False,
                              "axisPlacement": "auto"}
    if p.thresholds:
        defaults["thresholds"] = {"mode": "absolute", "steps": [
            {"color": "red", "value": None}, {"color": "green", "value": p.thresholds[0]}]}
        # Quality panels: just the alert level as a line (a red area under 0.7 would drown the band).
        defaults["custom"]["thresholdsStyle"] = {"mode": "line" if p.band else "line+area"}
    overrides: list[dict[str, Any]] = []
    if p.band:
        overrides.append({"matcher": {"id": "byRegexp", "options": "^ci_(low|high).*"},
                          "properties": [
                              {"id": "custom.lineStyle", "value": {"fill": "dash", "dash": [4, 4]}},
                              {"id": "custom.lineWidth", "value": 1},
                              {"id": "custom.hideFrom",
                               "value": {"legend": True, "tooltip": False, "viz": False}}]})
        overrides.append({"matcher": {"id": "byRegexp", "options": "^samples.*"},
                          "properties": [
                              {"id": "custom.drawStyle", "value": "bars"},
                              {"id": "custom.fillOpacity", "value": 30},
                              {"id": "custom.axisPlacement", "value": "right"},
                              {"id": "custom.axisLabel", "value": "samples"},
                              {"id": "unit", "value": "short"},
                              {"id": "min", "value": 0},
                              {"id": "max"}]})
    if p.text_columns:  # statements and passages: wide, and a click shows a long one whole
        overrides.append({"matcher": {"id": "byRegexp",
                                      "options": "^(" + "|".join(p.text_columns) + ")$"},
                          "properties": [{"id": "custom.minWidth", "value": 260},
                                         {"id": "custom.inspect", "value": True}]})
    if p.trace_link and s.trace_url_template:
        url = s.trace_url_template.replace("{trace_id}", "${__value.raw}")
        overrides.append({"matcher": {"id": "byName", "options": "trace_id"},
                          "properties": [{"id": "links", "value": [
                              {"title": "Open trace", "url": url, "targetBlank": True}]}]})
    return {"defaults": defaults, "overrides": overrides}


def _options(p: PanelSpec) -> dict[str, Any]:
    if p.kind == "timeseries":
        return {"legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
                "tooltip": {"mode": "multi", "sort": "none"}}
    if p.kind == "histogram":
        return {"bucketSize": 0.05, "bucketOffset": 0, "combine": False,
                "legend": {"displayMode": "list", "placement": "bottom", "showLegend": False}}
    if p.kind == "table":
        # rows in the query's order (the worst traces: faithfulness first); the drop
        # decomposition by its rank
        out: dict[str, Any] = {"showHeader": True, "cellHeight": "sm"}
        if p.key.startswith("why_"):
            out["sortBy"] = [{"displayName": "rank", "desc": False}]
        return out
    return {}


def build_dashboard(settings: DashboardsSettings) -> dict[str, Any]:
    """The quality dashboard (all sections as rows). Pure."""
    panels: list[dict[str, Any]] = []
    pid, y = 1, 0
    for sec in sections(settings):
        panels.append({"id": pid, "type": "row", "title": sec.title, "collapsed": False,
                       "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}, "panels": []})
        pid, y, x, row_h = pid + 1, y + 1, 0, 0
        for p in sec.panels:
            if x + p.width > 24:
                x, y, row_h = 0, y + row_h, 0
            panels.append({
                "id": pid,
                "type": p.kind,
                "title": p.title,
                "description": p.description,
                "datasource": datasource_ref(settings),
                "gridPos": {"h": p.height, "w": p.width, "x": x, "y": y},
                "targets": [target(settings, p.sql, p.format)],
                "fieldConfig": _field_config(p, settings),
                "options": _options(p),
                "pluginVersion": "10.4.0",
            })
            pid, x, row_h = pid + 1, x + p.width, max(row_h, p.height)
        y += row_h
    return {
        "uid": DASHBOARD_UID,
        "title": "ragpulse: RAG quality",
        "description": "Reference-free quality of production RAG traffic, judge cost, drift and "
                       "pipeline health (generated by `ragpulse dashboards export`).",
        "tags": ["ragpulse", "rag", "quality"],
        "timezone": "utc",
        "editable": True,
        "graphTooltip": 1,
        "refresh": settings.refresh,
        "schemaVersion": SCHEMA_VERSION,
        "time": {"from": settings.default_range, "to": "now"},
        "timepicker": {},
        "fiscalYearStartMonth": 0,
        "liveNow": False,
        "templating": {"list": variables(settings)},
        "annotations": {"list": []},
        "links": [],
        "panels": panels,
    }
