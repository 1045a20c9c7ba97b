"""Push the folder, dashboard and alert rules to a running Grafana through its HTTP API
(grafana-client), idempotently: running it twice changes nothing the second time except
updating in place.

Requests (Grafana HTTP API docs: folder, dashboard, alerting provisioning):

* ``GET /api/health`` — version check (the alerting provisioning API needs Grafana >= 9.1).
* ``GET /api/folders/{uid}`` → 404: ``POST /api/folders`` ``{"uid", "title"}`` (409: someone
  created it meanwhile, fine); else ``PUT /api/folders/{uid}`` when the title differs.
* ``POST /api/dashboards/db`` ``{"dashboard", "folderUid", "overwrite": true, "message"}``.
* per rule ``GET /api/v1/provisioning/alert-rules/{uid}`` → 404: ``POST …/alert-rules``, else
  ``PUT …/alert-rules/{uid}``; both with ``X-Disable-Provenance: true`` so people can still
  edit them in the UI. Then ``PUT /api/v1/provisioning/folder/{uid}/rule-groups/{group}``
  sets the group's evaluation interval.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from .alerts import grafana_rule, rule_specs
from .dashboard import build_dashboard
from .settings import DashboardsSettings

__all__ = ["GrafanaPushError", "PushReport", "push"]

log = logging.getLogger(__name__)

MIN_VERSION = (9, 1)


class GrafanaPushError(RuntimeError):
    """The push failed; the message says why and what to do. ``permanent`` is False only for
    server errors and timeouts, which are worth retrying."""

    def __init__(self, message: str, *, permanent: bool = True) -> None:
        super().__init__(message)
        self.permanent = permanent


@dataclass
class PushReport:
    """What :func:`push` did to each object: created, updated or left unchanged."""

    grafana_version: str = ""
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        """The report as lines for a terminal."""
        out = [f"Grafana {self.grafana_version}"]
        out += [f"  created   {x}" for x in self.created]
        out += [f"  updated   {x}" for x in self.updated]
        out += [f"  unchanged {x}" for x in self.unchanged]
        return out


def _version_tuple(v: str) -> tuple[int, ...]:
    parts = []
    for p in v.split("-")[0].split("."):
        if not p.isdigit():
            break
        parts.append(int(p))
    return tuple(parts)


def _api(url: str, token: str | None, timeout_s: float) -> Any:
    from grafana_client import GrafanaApi
    from grafana_client.client import TokenAuth

    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise GrafanaPushError(f"--grafana-url {url!r} must be http(s)://host[:port][/prefix]")
    auth: Any = TokenAuth(token) if token else None
    if not token and parts.username:
        auth = (parts.username, parts.password or "")
    return GrafanaApi(auth=auth, host=parts.hostname, port=parts.port,
                      url_path_prefix=parts.path.strip("/"), protocol=parts.scheme,
                      timeout=timeout_s)


def _explain(exc: Exception, what: str) -> GrafanaPushError:
    from grafana_client.client import GrafanaException, GrafanaTimeoutError

    if isinstance(exc, GrafanaTimeoutError):
        return GrafanaPushError(f"{what}: Grafana did not answer in time", permanent=False)
    status = getattr(exc, "status_code", None)
    msg = str(getattr(exc, "message", "") or exc)
    if status == 401:
        return GrafanaPushError(
            f"{what}: Grafana refused the credentials (401). Set GRAFANA_TOKEN (or --token) to a "
            "service-account token, or put user:password in the URL.")
    if status == 403:
        return GrafanaPushError(
            f"{what}: the token is valid but not allowed (403). It needs the Editor role (or "
            "folders:write, dashboards:write, alert.provisioning:write).")
    if status == 412:
        return GrafanaPushError(
            f"{what}: Grafana reports a version conflict (412: the dashboard changed or another "
            f"one has the same name in the folder): {msg}")
    if status == 404:
        return GrafanaPushError(f"{what}: not found (404): is the URL Grafana's root? {msg}")
    if isinstance(exc, GrafanaException) and status is not None and status >= 500:
        return GrafanaPushError(f"{what}: Grafana server error {status}: {msg}", permanent=False)
    if isinstance(exc, GrafanaException):
        return GrafanaPushError(f"{what}: HTTP {status}: {msg}")
    return GrafanaPushError(f"{what}: cannot reach Grafana: {exc}", permanent=False)


def _status(exc: Exception) -> int | None:
    return getattr(exc, "status_code", None)


def push(url: str, settings: DashboardsSettings, *, token: str | None = None,
         timeout_s: float = 10.0) -> PushReport:
    """Create or update the folder, dashboard and alert rules on the Grafana at ``url``.

    Blocks on HTTP (each request bounded by ``timeout_s``). Raises :class:`GrafanaPushError` with
    a clear message (auth 401/403, version conflicts 412, too-old Grafana, unreachable). Not
    thread-safe against a concurrent push of the same objects (Grafana's last write wins).
    """
    api = _api(url, token, timeout_s)
    report = PushReport()
    report.grafana_version = _check_version(api)
    _push_folder(api, settings, report)
    _push_dashboard(api, settings, report)
    _push_rules(api, settings, report)
    return report


def _check_version(api: Any) -> str:
    """Grafana's version; raises :class:`GrafanaPushError` when it is unknown or too old."""
    try:
        health = api.client.GET("/health")
    except Exception as exc:
        raise _explain(exc, "GET /api/health") from exc
    version = str((health or {}).get("version", "")) if isinstance(health, dict) else ""
    vt = _version_tuple(version)
    if not vt:
        raise GrafanaPushError(f"cannot tell the Grafana version from /api/health: {health!r}")
    if vt < MIN_VERSION:
        raise GrafanaPushError(
            f"Grafana {version} is too old: the alerting provisioning API needs >= "
            f"{'.'.join(map(str, MIN_VERSION))}. Use `ragpulse dashboards export` and file "
            "provisioning, or upgrade Grafana.")
    return version


def _push_folder(api: Any, s: DashboardsSettings, report: PushReport) -> None:
    what = f"folder {s.folder_uid}"
    try:
        try:
            folder = api.folder.get_folder(s.folder_uid)
        except Exception as exc:
            if _status(exc) != 404:
                raise
            folder = None
        if folder is None:
            try:
                api.folder.create_folder(s.folder_title, uid=s.folder_uid)
                report.created.append(what)
            except Exception as exc:
                if _status(exc) != 409:  # created concurrently: the same end state
                    raise
                report.unchanged.append(what)
        elif folder.get("title") != s.folder_title:
            api.folder.update_folder(s.folder_uid, title=s.folder_title, overwrite=True)
            report.updated.append(what)
        else:
            report.unchanged.append(what)
    except GrafanaPushError:
        raise
    except Exception as exc:
        raise _explain(exc, what) from exc


def _push_dashboard(api: Any, s: DashboardsSettings, report: PushReport) -> None:
    # overwrite=true makes the POST an upsert by uid.
    dash = build_dashboard(s)
    what = f"dashboard {dash['uid']}"
    try:
        res = api.dashboard.update_dashboard({
            "dashboard": {**dash, "id": None}, "folderUid": s.folder_uid, "overwrite": True,
            "message": "ragpulse dashboards push"})
        (report.created if (res or {}).get("version", 1) == 1 else report.updated).append(what)
    except Exception as exc:
        raise _explain(exc, f"POST /api/dashboards/db ({what})") from exc


def _push_rules(api: Any, s: DashboardsSettings, report: PushReport) -> None:
    """The alert rules one by one (create or update by uid), then the group's interval."""
    rules = [grafana_rule(spec, s) for spec in rule_specs(s)]
    for rule in rules:
        what = f"alert rule {rule['uid']}"
        try:
            try:
                api.alertingprovisioning.get_alertrule(rule["uid"])
                exists = True
            except Exception as exc:
                if _status(exc) != 404:
                    raise
                exists = False
            if exists:
                api.alertingprovisioning.update_alertrule(rule["uid"], rule,
                                                          disable_provenance=True)
                report.updated.append(what)
            else:
                api.alertingprovisioning.create_alertrule(rule, disable_provenance=True)
                report.created.append(what)
        except Exception as exc:
            raise _explain(exc, what) from exc
    what = f"rule group {s.alerts.group}"
    try:
        api.alertingprovisioning.update_rule_group(
            s.folder_uid, s.alerts.group,
            {"title": s.alerts.group, "folderUid": s.folder_uid,
             "interval": s.alerts.interval_s, "rules": rules},
            disable_provenance=True)
        report.updated.append(what)
    except Exception as exc:
        raise _explain(exc, what) from exc
