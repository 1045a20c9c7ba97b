"""A stand-in for Grafana, not Grafana: a stdlib HTTP server on 127.0.0.1 that answers like
Grafana's HTTP API for the endpoints `ragpulse dashboards push` uses, keeps state (folders,
dashboards with versions, alert rules, rule groups) and records every request. Grafana itself
cannot run on these machines.

Status codes and response shapes follow Grafana's own docs and API definitions; the shapes the
fake must answer with are recorded, with their sources, in ``test_fake_grafana_upstream.py``,
which checks this server and push's requests against them. 401 without valid credentials, 404
for unknown uids, 409 for an existing folder uid or alert-rule uid, 412 ``name-exists`` for a
dashboard uid that exists when ``overwrite`` is false, 400 for a body missing required fields.
Not imitated: permissions beyond one token, nested folders, dashboard JSON validation, the
rule's queries (Grafana evaluates them; here they are stored as sent)."""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

RULE_REQUIRED = ("title", "folderUID", "ruleGroup", "condition", "data", "noDataState",
                 "execErrState", "for")


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class GrafanaState:
    token: str = "glsa_test"
    version: str = "11.3.0"
    folders: dict[str, dict] = field(default_factory=dict)
    dashboards: dict[str, dict] = field(default_factory=dict)
    rules: dict[str, dict] = field(default_factory=dict)
    groups: dict[tuple[str, str], dict] = field(default_factory=dict)
    requests: list[Recorded] = field(default_factory=list)
    forbid: bool = False
    folder_race: bool = False
    """Answer the folder GET with 404 but the POST with 409 (created concurrently)."""
    dashboard_conflict: bool = False
    """Answer dashboard saves with 412 (version-mismatch), as for a concurrent edit."""


class _Handler(BaseHTTPRequestHandler):
    state: GrafanaState
    lock: threading.Lock

    def log_message(self, *a: Any) -> None:  # quiet
        pass

    def _send(self, code: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _handle(self, method: str) -> None:
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            return self._send(400, {"message": "bad request data"})
        st = self.state
        path = self.path.split("?")[0]
        with self.lock:
            st.requests.append(Recorded(method, path, dict(self.headers.items()), body))
            if path == "/api/health":
                return self._send(200, {"commit": "abc", "database": "ok", "version": st.version})
            if self.headers.get("Authorization") != f"Bearer {st.token}":
                return self._send(401, {"message": "Unauthorized"})
            if st.forbid:
                return self._send(403, {"message": "You'll need additional permissions to perform this action."})
            return self._route(method, path, body)

    def _route(self, method: str, path: str, body: Any) -> None:
        st = self.state
        if (m := re.fullmatch(r"/api/folders/([\w-]+)", path)):
            uid = m.group(1)
            if method == "GET":
                if uid in st.folders and not st.folder_race:
                    return self._send(200, st.folders[uid])
                return self._send(404, {"message": "folder not found"})
            if method == "PUT":
                if uid not in st.folders:
                    return self._send(404, {"message": "folder not found"})
                st.folders[uid]["title"] = body["title"]
                st.folders[uid]["version"] += 1
                return self._send(200, st.folders[uid])
        if path == "/api/folders" and method == "POST":
            if not body or not body.get("title"):
                return self._send(400, {"message": "folder title cannot be empty"})
            uid = body.get("uid")
            if uid in st.folders:
                return self._send(409, {"message": "a folder with the same uid already exists"})
            st.folders[uid] = {"id": len(st.folders) + 1, "uid": uid, "title": body["title"],
                               "url": f"/dashboards/f/{uid}/", "hasAcl": False, "canSave": True,
                               "canEdit": True, "canAdmin": True, "createdBy": "admin",
                               "created": "2026-01-01T00:00:00Z", "updatedBy": "admin",
                               "updated": "2026-01-01T00:00:00Z", "version": 1}
            return self._send(200, st.folders[uid])
        if path == "/api/dashboards/db" and method == "POST":
            dash = (body or {}).get("dashboard") or {}
            if not dash.get("uid") or not dash.get("title"):
                return self._send(400, {"message": "dashboard uid and title required"})
            uid = dash["uid"]
            if st.dashboard_conflict:
                return self._send(412, {"message": "The dashboard has been changed by someone else",
                                        "status": "version-mismatch"})
            if uid in st.dashboards and not body.get("overwrite"):
                return self._send(412, {"message": "A dashboard with the same uid already exists",
                                        "status": "name-exists"})
            version = st.dashboards.get(uid, {}).get("version", 0) + 1
            st.dashboards[uid] = {"dashboard": dash, "folderUid": body.get("folderUid"),
                                  "version": version}
            return self._send(200, {"id": 1, "uid": uid, "url": f"/d/{uid}", "status": "success",
                                    "version": version, "slug": "x"})
        if path == "/api/v1/provisioning/alert-rules" and method == "POST":
            missing = [k for k in RULE_REQUIRED if k not in (body or {})]
            if missing:
                return self._send(400, {"message": f"invalid alert rule: missing {missing}"})
            if body.get("folderUID") not in st.folders:
                return self._send(400, {"message": "folder does not exist"})
            if body.get("uid") in st.rules:
                return self._send(409, {"message": "rule uid already exists"})
            st.rules[body["uid"]] = body
            return self._send(201, {"id": len(st.rules), "orgID": 1, **body,
                                    "updated": "2026-01-01T00:00:00Z"})
        if (m := re.fullmatch(r"/api/v1/provisioning/alert-rules/([\w-]+)", path)):
            uid = m.group(1)
            if uid not in st.rules:
                return self._send(404, {"message": "rule not found"})
            if method == "GET":
                return self._send(200, st.rules[uid])
            if method == "PUT":
                missing = [k for k in RULE_REQUIRED if k not in (body or {})]
                if missing:
                    return self._send(400, {"message": f"invalid alert rule: missing {missing}"})
                st.rules[uid] = body
                return self._send(200, body)
        if (m := re.fullmatch(r"/api/v1/provisioning/folder/([\w-]+)/rule-groups/([^/]+)", path)) \
                and method == "PUT":
            if not isinstance(body, dict) or not isinstance(body.get("interval"), int):
                return self._send(400, {"message": "interval must be an integer (seconds)"})
            st.groups[(m.group(1), m.group(2))] = body
            return self._send(200, body)
        return self._send(404, {"message": f"no route {method} {path}"})

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")


class FakeGrafana:
    def __init__(self) -> None:
        self.state = GrafanaState()
        handler = type("H", (_Handler,), {"state": self.state, "lock": threading.Lock()})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeGrafana:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()
