"""`ragpulse dashboards push` against a local server answering like Grafana's HTTP API."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from ragpulse.dashboards.alerts import rule_specs
from ragpulse.dashboards.push import GrafanaPushError, push
from ragpulse.dashboards.settings import DashboardsSettings

from .fake_grafana import FakeGrafana

S = DashboardsSettings()
N_RULES = len(rule_specs(S))


def calls(g: FakeGrafana) -> list[tuple[str, str]]:
    return [(r.method, r.path) for r in g.state.requests]


def test_first_push_creates_everything_with_documented_shapes() -> None:
    with FakeGrafana() as g:
        rep = push(g.url, S, token=g.state.token)
        st = g.state
    assert rep.grafana_version == "11.3.0"
    assert list(st.folders) == ["ragpulse"]
    assert {k: st.folders["ragpulse"][k] for k in ("uid", "title", "version", "id")} == {
        "uid": "ragpulse", "title": "ragpulse", "version": 1, "id": 1}
    post_folder = next(r for r in st.requests if (r.method, r.path) == ("POST", "/api/folders"))
    assert post_folder.body == {"title": "ragpulse", "uid": "ragpulse"}
    dash = next(r for r in st.requests if r.path == "/api/dashboards/db")
    assert dash.method == "POST" and dash.body["overwrite"] is True
    assert dash.body["folderUid"] == "ragpulse" and dash.body["dashboard"]["uid"] == "ragpulse-quality"
    assert dash.body["dashboard"]["id"] is None  # upsert by uid, never by numeric id
    assert all(r.headers.get("Authorization") == "Bearer glsa_test"
               for r in st.requests if r.path != "/api/health")
    creates = [r for r in st.requests if (r.method, r.path) == ("POST", "/api/v1/provisioning/alert-rules")]
    assert len(creates) == N_RULES == len(st.rules)
    for r in creates:
        assert r.headers.get("X-Disable-Provenance") == "true"
        assert r.body["folderUID"] == "ragpulse" and r.body["ruleGroup"] == S.alerts.group
        assert r.body["data"][0]["datasourceUid"] == S.datasource_uid
    group = st.groups[("ragpulse", S.alerts.group)]
    assert group["interval"] == 60 and len(group["rules"]) == N_RULES
    put = next(r for r in st.requests if r.path.startswith("/api/v1/provisioning/folder/"))
    assert put.path == f"/api/v1/provisioning/folder/ragpulse/rule-groups/{S.alerts.group}"
    assert put.headers.get("X-Disable-Provenance") == "true"
    # The body is an AlertRuleGroup in Grafana's model (title, folderUid, interval, rules).
    from grafana_foundation_sdk.models import alerting

    from .test_model import _conforms

    _conforms(alerting.RuleGroup.from_json(put.body))
    assert set(put.body) == {"title", "folderUid", "interval", "rules"}
    assert sorted(rep.created) == sorted(["folder ragpulse", "dashboard ragpulse-quality"] +
                                         [f"alert rule {r.uid}" for r in rule_specs(S)])


def test_second_push_is_idempotent() -> None:
    with FakeGrafana() as g:
        push(g.url, S, token=g.state.token)
        before = (dict(g.state.folders), {k: dict(v) for k, v in g.state.rules.items()})
        g.state.requests.clear()
        rep = push(g.url, S, token=g.state.token)
        st = g.state
    # No second folder, no POSTed rules: updates in place by uid.
    assert ("POST", "/api/folders") not in calls(g)
    assert ("POST", "/api/v1/provisioning/alert-rules") not in calls(g)
    assert sum(1 for c in calls(g) if c[0] == "PUT" and "/alert-rules/" in c[1]) == N_RULES
    assert (dict(st.folders), st.rules) == before
    assert st.dashboards["ragpulse-quality"]["version"] == 2
    assert rep.unchanged == ["folder ragpulse"] and not [c for c in rep.created]


def test_folder_created_concurrently_409_is_fine() -> None:
    with FakeGrafana() as g:
        g.state.folders["ragpulse"] = {"uid": "ragpulse", "title": "ragpulse", "version": 1, "id": 1}
        g.state.folder_race = True
        rep = push(g.url, S, token=g.state.token)
    assert "folder ragpulse" in rep.unchanged and len(g.state.rules) == N_RULES


def test_renamed_folder_is_updated() -> None:
    with FakeGrafana() as g:
        g.state.folders["ragpulse"] = {"uid": "ragpulse", "title": "old", "version": 3, "id": 1}
        rep = push(g.url, S, token=g.state.token)
        assert g.state.folders["ragpulse"]["title"] == "ragpulse"
        put = next(r for r in g.state.requests if (r.method, r.path) == ("PUT", "/api/folders/ragpulse"))
        assert put.body["title"] == "ragpulse" and put.body["overwrite"] is True
    assert "folder ragpulse" in rep.updated


@pytest.mark.parametrize("setup, token, message", [
    (lambda st: None, "wrong", "401"),
    (lambda st: None, None, "401"),
    (lambda st: setattr(st, "forbid", True), "glsa_test", "403"),
    (lambda st: setattr(st, "version", "8.5.2"), "glsa_test", "too old"),
    (lambda st: setattr(st, "dashboard_conflict", True), "glsa_test", "412"),
])
def test_clear_errors(setup, token, message: str) -> None:
    with FakeGrafana() as g:
        setup(g.state)
        with pytest.raises(GrafanaPushError, match=message) as exc:
            push(g.url, S, token=token)
    assert exc.value.permanent


def test_unreachable_grafana_is_retryable() -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(GrafanaPushError, match="cannot reach") as exc:
        push(f"http://127.0.0.1:{port}", S, token="x", timeout_s=2)
    assert not exc.value.permanent


def test_push_cli_token_from_env() -> None:
    from ragpulse.deploy.cli import _register, app

    _register()
    with FakeGrafana() as g:
        ok = CliRunner().invoke(app, ["dashboards", "push", "--grafana-url", g.url],
                                env={"GRAFANA_TOKEN": g.state.token})
        bad = CliRunner().invoke(app, ["dashboards", "push", "--grafana-url", g.url,
                                       "--token", "nope"], env={"GRAFANA_TOKEN": ""})
    assert ok.exit_code == 0, ok.output
    assert "created   dashboard ragpulse-quality" in ok.output
    assert bad.exit_code == 1 and "GRAFANA_TOKEN" in bad.output
