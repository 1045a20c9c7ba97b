"""The generated JSON against Grafana's models: grafana-foundation-sdk's dashboard and alerting
types (every emitted field must be one the model knows, with a value of the declared type) and
the ClickHouse plugin's query model (registered as the SDK's dataquery variant for the plugin
type, so the SDK hands every target to it). Also the provisioning files and their freshness."""

from __future__ import annotations

import enum
import json
import types
import typing
from pathlib import Path
from typing import Any, Literal

import pytest
import yaml
from grafana_foundation_sdk.cog import runtime as cogruntime
from grafana_foundation_sdk.cog import variants as cogvariants
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import alerting
from grafana_foundation_sdk.models import dashboard as sdk_dashboard
from pydantic import BaseModel, ConfigDict, Field

from ragpulse.dashboards.alerts import grafana_rule, rule_specs
from ragpulse.dashboards.dashboard import PLUGIN_TYPE, build_dashboard
from ragpulse.dashboards.provisioning import files
from ragpulse.dashboards.settings import DashboardsSettings

REPO = Path(__file__).resolve().parents[2]
GENERATED = REPO / "dashboards" / "generated"


class _DS(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: str
    uid: str


class ClickHouseQuery(BaseModel):
    """The plugin's SQL-editor query (grafana/clickhouse-datasource ``src/types/sql.ts``)."""

    model_config = ConfigDict(extra="forbid")
    refId: str
    datasource: _DS | None = None
    editorType: Literal["sql", "builder"]
    queryType: Literal["table", "logs", "timeseries", "traces"] | None = None
    format: int = Field(ge=0, le=4)  # sqlutil.FormatQueryOption: 0 TimeSeries, 1 Table, 2 Logs, 3 Trace, 4 Multi
    rawSql: str = Field(min_length=1)
    pluginVersion: str | None = None
    intervalMs: int | None = None
    maxDataPoints: int | None = None


class ExprQuery(BaseModel):
    """Server-side expressions (``__expr__``): reduce and threshold, as the alert rules use."""

    model_config = ConfigDict(extra="forbid")
    refId: str
    type: Literal["reduce", "threshold", "math", "classic_conditions", "resample"]
    expression: str
    reducer: Literal["last", "mean", "min", "max", "sum", "count"] | None = None
    settings: dict[str, Any] | None = None
    conditions: list[dict[str, Any]] | None = None
    datasource: _DS | None = None


seen: list[BaseModel] = []


class _Validated(cogvariants.Dataquery):
    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    def to_json(self) -> dict[str, Any]:
        return self.data


def _hook(model: type[BaseModel]):
    def hook(data: dict[str, Any]) -> cogvariants.Dataquery:
        seen.append(model.model_validate(data))  # raises on a field or value the model rejects
        return _Validated(data)
    return hook


cogruntime.register_dataquery_variant(cogruntime.DataqueryConfig(PLUGIN_TYPE, _hook(ClickHouseQuery)))
cogruntime.register_dataquery_variant(cogruntime.DataqueryConfig("__expr__", _hook(ExprQuery)))


def _conforms(obj: Any, path: str = "$") -> None:
    """Check every attribute of an SDK model object against its constructor's type hints
    (Literal values, scalars, lists, nested models). from_json itself does not validate."""
    hints = typing.get_type_hints(type(obj).__init__, vars(type(obj).__module__ and
                                                           __import__(type(obj).__module__, fromlist=["x"])))
    for name, hint in hints.items():
        if name == "return":
            continue
        _check(getattr(obj, name, None), hint, f"{path}.{name}")


def _check(value: Any, hint: Any, path: str) -> None:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if hint is typing.Any or hint is object:
        return
    if origin in (typing.Union, types.UnionType):
        errors = []
        for a in args:
            try:
                _check(value, a, path)
                return
            except AssertionError as e:
                errors.append(str(e))
        raise AssertionError(f"{path}: {value!r} fits none of {args}: {errors}")
    if hint is type(None):
        assert value is None, f"{path}: expected None"
        return
    if origin is Literal:
        assert value in args, f"{path}: {value!r} not in {args}"
        return
    if origin is list:
        assert isinstance(value, list), f"{path}: expected a list, got {value!r}"
        for i, v in enumerate(value):
            _check(v, args[0], f"{path}[{i}]")
        return
    if origin is dict:
        assert isinstance(value, dict), f"{path}: expected a dict"
        for k, v in value.items():
            _check(v, args[1], f"{path}.{k}")
        return
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        # from_json keeps the raw JSON value of an enum field: it must be one of its values.
        assert value in {e.value for e in hint} or isinstance(value, hint), f"{path}: {value!r}"
        return
    if hint is float:
        assert isinstance(value, (int, float)) and not isinstance(value, bool), f"{path}: {value!r}"
        return
    if isinstance(hint, type):
        assert isinstance(value, hint), f"{path}: {value!r} is not {hint.__name__}"
        if hasattr(value, "to_json") and not isinstance(value, cogvariants.Dataquery):
            _conforms(value, path)
        return


def _known(original: Any, roundtrip: Any, path: str = "$") -> None:
    """Every field we emit survives the SDK round trip (i.e. the model knows it)."""
    if isinstance(original, dict):
        assert isinstance(roundtrip, dict), path
        for k, v in original.items():
            assert k in roundtrip, f"{path}.{k} is not a field of Grafana's model"
            _known(v, roundtrip[k], f"{path}.{k}")
    elif isinstance(original, list):
        assert isinstance(roundtrip, list) and len(roundtrip) == len(original), path
        for i, (a, b) in enumerate(zip(original, roundtrip)):
            _known(a, b, f"{path}[{i}]")
    else:
        assert original == roundtrip or original is None, f"{path}: {original!r} -> {roundtrip!r}"


def _roundtrip(obj: Any) -> Any:
    return json.loads(json.dumps(obj, cls=JSONEncoder))


def test_dashboard_conforms_to_grafana_model_and_plugin_query_model() -> None:
    s = DashboardsSettings()
    d = build_dashboard(s)
    seen.clear()
    model = sdk_dashboard.Dashboard.from_json(d)
    _conforms(model)
    _known({k: v for k, v in d.items()}, _roundtrip(model))
    n_targets = sum(len(p.get("targets", [])) for p in d["panels"])
    assert len([q for q in seen if isinstance(q, ClickHouseQuery)]) == n_targets > 20
    for v in d["templating"]["list"]:
        ClickHouseQuery.model_validate(v["query"])  # variable queries use the same model
    assert d["schemaVersion"] >= 36 and d["uid"] and d["title"]


def test_panel_layout() -> None:
    d = build_dashboard(DashboardsSettings())
    ids = [p["id"] for p in d["panels"]]
    assert len(ids) == len(set(ids))
    cells: set[tuple[int, int]] = set()
    for p in d["panels"]:
        g = p["gridPos"]
        assert 0 <= g["x"] and g["x"] + g["w"] <= 24 and g["h"] > 0
        mine = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert not (mine & cells), f"panel {p['title']} overlaps another"
        cells |= mine
    kinds = {p["type"] for p in d["panels"]}
    assert {"row", "timeseries", "histogram", "table"} <= kinds


def test_no_trace_link_without_a_template() -> None:
    """Unset by default: nothing serves a tracing UI in the embedded mode, so no dead link."""
    table = next(p for p in build_dashboard(DashboardsSettings())["panels"]
                 if p["title"] == "Worst recent traces")
    assert not any(prop["id"] == "links" for o in table["fieldConfig"]["overrides"]
                   for prop in o["properties"])
    assert "links to the tracing UI" not in table["description"]


def test_trace_link_uses_the_configured_template() -> None:
    s = DashboardsSettings(trace_url_template="https://tempo.example/explore?trace={trace_id}&x=1")
    table = next(p for p in build_dashboard(s)["panels"] if p["title"] == "Worst recent traces")
    links = [prop["value"] for o in table["fieldConfig"]["overrides"]
             if o["matcher"] == {"id": "byName", "options": "trace_id"} for prop in o["properties"]
             if prop["id"] == "links"]
    assert links == [[{"title": "Open trace", "targetBlank": True,
                       "url": "https://tempo.example/explore?trace=${__value.raw}&x=1"}]]


def test_alert_rules_conform_to_grafana_model() -> None:
    s = DashboardsSettings()
    seen.clear()
    for spec in rule_specs(s):
        body = grafana_rule(spec, s)
        model = alerting.Rule.from_json(body)
        _conforms(model)
        _known(body, _roundtrip(model))
        assert body["condition"] == "C" and [q["refId"] for q in body["data"]] == ["A", "B", "C"]
        assert body["orgID"] == 1 and body["folderUID"] == s.folder_uid
        assert body["data"][0]["relativeTimeRange"]["from"] == spec.range_s > 0
        assert "$" not in body["data"][0]["model"]["rawSql"].replace("$__", "")  # no dashboard variables
    assert sum(isinstance(q, ClickHouseQuery) for q in seen) == len(rule_specs(s))
    assert sum(isinstance(q, ExprQuery) for q in seen) == 2 * len(rule_specs(s))


def test_provisioning_files() -> None:
    s = DashboardsSettings()
    f = files(s)
    ds = yaml.safe_load(f["provisioning/datasources/ragpulse-clickhouse.yaml"])
    assert ds["apiVersion"] == 1
    assert ds["datasources"][0]["type"] == PLUGIN_TYPE
    assert ds["datasources"][0]["uid"] == s.datasource_uid
    assert set(ds["datasources"][0]["jsonData"]) >= {"host", "port", "protocol", "defaultDatabase"}
    prov = yaml.safe_load(f["provisioning/dashboards/ragpulse.yaml"])["providers"][0]
    assert prov["type"] == "file" and prov["options"]["path"]
    rules = yaml.safe_load(f["provisioning/alerting/ragpulse-rules.yaml"])
    group = rules["groups"][0]
    assert group["folder"] == s.folder_title and group["interval"] == "60s"
    uids = [r["uid"] for r in group["rules"]]
    assert uids == [r.uid for r in rule_specs(s)] and len(set(uids)) == len(uids)
    for r in group["rules"]:
        alerting.Rule.from_json({**r, "folderUID": "x", "ruleGroup": group["name"], "orgID": 1})
        assert set(r) >= {"uid", "title", "condition", "data", "noDataState", "execErrState", "for"}
    cp = yaml.safe_load(f["provisioning/alerting/ragpulse-contact-points.yaml"])
    assert cp["contactPoints"][0]["receivers"][0]["type"] == "webhook"
    assert json.loads(f["dashboards/ragpulse-quality.json"]) == build_dashboard(s)


def test_committed_generated_files_are_fresh() -> None:
    """dashboards/generated is `ragpulse dashboards export dashboards/generated` with defaults."""
    for rel, text in files(DashboardsSettings()).items():
        p = GENERATED / rel
        assert p.exists(), f"{p} missing: run `ragpulse dashboards export dashboards/generated`"
        assert p.read_text(encoding="utf-8") == text, \
            f"{p} is stale: run `ragpulse dashboards export dashboards/generated`"


def test_export_cli(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from ragpulse.deploy.cli import _register, app

    _register()
    out = tmp_path / "grafana"
    res = CliRunner().invoke(app, ["dashboards", "export", str(out), "--database", "rag_x",
                                   "--trace-url", "https://jaeger.example/trace/{trace_id}"])
    assert res.exit_code == 0, res.output
    d = json.loads((out / "dashboards/ragpulse-quality.json").read_text())
    assert "`rag_x`.`scores_1m`" in d["panels"][1]["targets"][0]["rawSql"]
    assert "jaeger.example" in (out / "dashboards/ragpulse-quality.json").read_text()
    bad = CliRunner().invoke(app, ["dashboards", "export", str(out), "--trace-url", "nope"])
    assert bad.exit_code == 2 and "trace_url_template" in bad.output


def test_export_never_writes_through_a_planted_temp_symlink(tmp_path: Path) -> None:
    """As `report --out`: export wrote each file through a fixed `NAME.tmp` opened following
    symlinks, so a planted link made it overwrite the link's target."""
    from ragpulse.dashboards import export

    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    out = tmp_path / "grafana"
    (out / "dashboards").mkdir(parents=True)
    (out / "dashboards" / "ragpulse-quality.json.tmp").symlink_to(victim)
    written = export(out, DashboardsSettings())
    assert victim.read_text() == "keep me"
    board = out / "dashboards" / "ragpulse-quality.json"
    assert board in written and not board.is_symlink() and json.loads(board.read_text())["panels"]


@pytest.mark.parametrize("text, message", [
    ("alerts: {faithfulness_min: 2}", "alerts.faithfulness_min"),
    ("- a list", "must be a mapping"),
])
def test_settings_file_errors(tmp_path: Path, text: str, message: str) -> None:
    from typer.testing import CliRunner

    from ragpulse.deploy.cli import _register, app

    _register()
    p = tmp_path / "s.yaml"
    p.write_text(text)
    res = CliRunner().invoke(app, ["dashboards", "export", str(tmp_path / "o"), "--settings", str(p)])
    assert res.exit_code == 2 and message in res.output, res.output
