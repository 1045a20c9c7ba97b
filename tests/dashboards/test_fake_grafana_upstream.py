"""The Grafana stand-in (fake_grafana.py) and `ragpulse dashboards push`'s requests, checked
against what Grafana itself documents for the endpoints push uses. Grafana cannot run here, so
this is the closest check available: the fixtures below are recorded from Grafana's repository
(response keys of the documented examples, the status codes each endpoint lists, the fields its
API model marks required), and both sides are held to them:

* the fake must answer with those statuses and at least those keys, so push never relies on
  something only the fake says;
* push's request bodies must carry the fields Grafana requires.

Sources (grafana/grafana, path @ commit):

* FOLDER: ``docs/sources/developers/http_api/folder.md`` @ 05860939c27cbe5967fa6b5a212a02f08796d286
  ("Create folder", "Get folder by uid", "Update folder");
* DASHBOARD: ``docs/sources/developers/http_api/dashboard.md`` @ 00f489dbba0f67054565a81a61bb9a1cae575043
  ("Create / Update dashboard", its 412 reasons);
* PROVISIONING: ``pkg/services/ngalert/api/tooling/definitions/provisioning_alert_rules.go``
  @ 025b2f3011821bb7e6ab4781e252f3a1ecd19130 (swagger routes RoutePostAlertRule,
  RoutePutAlertRule, RouteGetAlertRule, RoutePutAlertRuleGroup; models ProvisionedAlertRule,
  AlertRuleGroup).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from ragpulse.dashboards.push import push
from ragpulse.dashboards.settings import DashboardsSettings

from .fake_grafana import FakeGrafana

# -- recorded from FOLDER ---------------------------------------------------------------------
FOLDER_RESPONSE_KEYS = {"id", "uid", "title", "url", "hasAcl", "canSave", "canEdit", "canAdmin",
                        "createdBy", "created", "updatedBy", "updated", "version"}
FOLDER_CREATE_BODY_KEYS = {"uid", "title", "parentUid"}
FOLDER_CREATE_STATUSES = {200, 400, 401, 403, 409}
FOLDER_GET_STATUSES = {200, 401, 403, 404}
FOLDER_UPDATE_BODY_KEYS = {"title", "version", "overwrite"}

# -- recorded from DASHBOARD ------------------------------------------------------------------
DASHBOARD_SAVE_BODY_KEYS = {"dashboard", "folderId", "folderUid", "overwrite", "message"}
DASHBOARD_SAVE_RESPONSE_KEYS = {"id", "uid", "url", "status", "version", "slug"}
DASHBOARD_SAVE_STATUSES = {200, 400, 401, 403, 412}
DASHBOARD_412_REASONS = {"version-mismatch", "name-exists", "plugin-dashboard"}

# -- recorded from PROVISIONING ---------------------------------------------------------------
ALERT_RULE_REQUIRED = {"orgID", "folderUID", "ruleGroup", "title", "condition", "data",
                       "noDataState", "execErrState", "for"}
ALERT_RULE_KEYS = ALERT_RULE_REQUIRED | {"id", "uid", "updated", "annotations", "labels",
                                        "provenance", "isPaused"}
ALERT_RULE_POST_STATUSES = {201, 400}
ALERT_RULE_PUT_STATUSES = {200, 400}
ALERT_RULE_GET_STATUSES = {200, 404}
RULE_GROUP_KEYS = {"title", "folderUid", "interval", "rules"}
RULE_GROUP_PUT_STATUSES = {200, 400}

S = DashboardsSettings(database="rag")


def _call(g: FakeGrafana, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    req = urllib.request.Request(
        g.url + path, method=method, data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {g.state.token}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def test_push_sends_what_grafana_documents() -> None:
    with FakeGrafana() as g:
        push(g.url, S, token=g.state.token)
        push(g.url, S.model_copy(update={"folder_title": "ragpulse (renamed)"}),
             token=g.state.token)  # the second push updates the folder and the rules
        requests = g.state.requests
    by = lambda method, prefix: [r for r in requests  # noqa: E731
                                 if r.method == method and r.path.startswith(prefix)]

    (create,) = by("POST", "/api/folders")
    assert "title" in create.body and set(create.body) <= FOLDER_CREATE_BODY_KEYS
    (update,) = by("PUT", "/api/folders/")
    assert set(update.body) <= FOLDER_UPDATE_BODY_KEYS
    # "version" is needed unless overwrite is true (FOLDER, "Update folder")
    assert "version" in update.body or update.body.get("overwrite") is True
    for save in by("POST", "/api/dashboards/db"):
        assert set(save.body) <= DASHBOARD_SAVE_BODY_KEYS and "dashboard" in save.body
    rules = by("POST", "/api/v1/provisioning/alert-rules") + by("PUT",
                                                                "/api/v1/provisioning/alert-rules/")
    assert rules and all(ALERT_RULE_REQUIRED <= set(r.body) <= ALERT_RULE_KEYS for r in rules)
    for group in by("PUT", "/api/v1/provisioning/folder/"):
        assert set(group.body) == RULE_GROUP_KEYS and isinstance(group.body["interval"], int)


def test_the_fake_answers_with_grafanas_documented_shapes() -> None:
    with FakeGrafana() as g:
        status, folder = _call(g, "POST", "/api/folders", {"uid": "f1", "title": "F"})
        assert status == 200 and FOLDER_RESPONSE_KEYS <= set(folder)
        status, again = _call(g, "POST", "/api/folders", {"uid": "f1", "title": "F"})
        assert status == 409 and status in FOLDER_CREATE_STATUSES
        assert _call(g, "GET", "/api/folders/f1") == (200, folder)
        assert _call(g, "GET", "/api/folders/nope")[0] == 404 in FOLDER_GET_STATUSES

        dash = {"dashboard": {"uid": "d1", "title": "D"}, "folderUid": "f1", "overwrite": False}
        status, saved = _call(g, "POST", "/api/dashboards/db", dash)
        assert status == 200 and set(saved) == DASHBOARD_SAVE_RESPONSE_KEYS
        assert saved["status"] == "success" and saved["version"] == 1
        status, refused = _call(g, "POST", "/api/dashboards/db", dash)
        assert status == 412 in DASHBOARD_SAVE_STATUSES
        assert refused["status"] == "name-exists" in DASHBOARD_412_REASONS
        status, resaved = _call(g, "POST", "/api/dashboards/db", {**dash, "overwrite": True})
        assert (status, resaved["version"]) == (200, 2)

        rule = {"uid": "r1", "orgID": 1, "folderUID": "f1", "ruleGroup": "g", "title": "R",
                "condition": "A", "data": [], "noDataState": "OK", "execErrState": "Error",
                "for": "5m"}
        status, created = _call(g, "POST", "/api/v1/provisioning/alert-rules", rule)
        assert status == 201 in ALERT_RULE_POST_STATUSES
        assert ALERT_RULE_REQUIRED | {"id", "uid"} <= set(created) <= ALERT_RULE_KEYS
        missing = {k: v for k, v in rule.items() if k != "condition"} | {"uid": "r2"}
        assert _call(g, "POST", "/api/v1/provisioning/alert-rules", missing)[0] == 400
        assert _call(g, "GET", "/api/v1/provisioning/alert-rules/r1")[0] == 200
        assert _call(g, "GET", "/api/v1/provisioning/alert-rules/nope")[0] == 404 \
            in ALERT_RULE_GET_STATUSES
        assert _call(g, "PUT", "/api/v1/provisioning/alert-rules/r1", rule)[0] == 200 \
            in ALERT_RULE_PUT_STATUSES
        group = {"title": "g", "folderUid": "f1", "interval": 60, "rules": [rule]}
        status, body = _call(g, "PUT", "/api/v1/provisioning/folder/f1/rule-groups/g", group)
        assert status == 200 in RULE_GROUP_PUT_STATUSES and set(body) == RULE_GROUP_KEYS
