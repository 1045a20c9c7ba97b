"""The compose file, the Kubernetes manifests, the otelcol config and the Dockerfile against the code.

Every ``RAGPULSE_*`` variable they set must be one the settings classes or CLI options read; the
values must validate and take effect; every ragpulse command and flag must parse in the real CLI;
ports must be the settings' defaults; image tags must be pinned (ours = the package version).
"""

from __future__ import annotations

import inspect
import json
import re
import shlex
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from . import manifests as m

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

RAGPULSE_IMAGE = f"ragpulse:{version('ragpulse')}"


def _ragpulse_env_names() -> list[tuple[str, str]]:
    """(where, NAME) of every RAGPULSE_* name the deployment files set or reference."""
    out: list[tuple[str, str]] = []
    doc = m.compose()
    for name, svc in doc["services"].items():
        env = svc.get("environment") or {}
        keys = env if isinstance(env, dict) else [e.split("=", 1)[0] for e in env]
        out += [(f"compose {name}", k) for k in keys]
    out += [("compose ${}", v) for v in re.findall(r"\$\{(\w+)", m.COMPOSE.read_text())]
    out += [("configmap", k) for k in m.configmap_env()]
    out += [("secret", k) for k in m.secret_env()]
    # Commented-out secret keys are documentation a user will uncomment: check them too.
    out += [
        ("secret comment", k)
        for k in re.findall(r"#\s*(RAGPULSE_\w+):", (m.K8S / "secret.yaml").read_text())
    ]
    for c in m.k8s_containers():
        out += [(f"k8s {c['name']}", e["name"]) for e in c.get("env", [])]
        out += [
            (f"k8s {c['name']} args", v)
            for v in re.findall(r"\$\((\w+)\)", json.dumps(c.get("args", [])))
        ]
    for instr, rest in m.dockerfile_instructions():
        if instr == "ENV":
            out += [("Dockerfile ENV", k) for k in re.findall(r"(\w+)=", rest)]
    out += [("otelcol", v) for v in re.findall(r"\$\{env:(\w+)", m.OTELCOL.read_text())]
    return [(w, n) for w, n in out if n.startswith("RAGPULSE_")]


def test_every_ragpulse_variable_exists_in_the_code() -> None:
    known = m.known_env()
    names = _ragpulse_env_names()
    assert len(names) > 30  # the files were read
    # NAME_FILE: NAME read from a file (ragpulse.deploy.secrets), for any known NAME.
    unknown = sorted({f"{w}: {n}" for w, n in names
                      if n not in known and not (n.endswith("_FILE") and n[:-5] in known)})
    assert not unknown, unknown


def test_env_walk_finds_nested_names() -> None:
    # The walker itself: a typo in a manifest must not pass because the walk found nothing.
    from ragpulse.collector.config import CollectorSettings
    from ragpulse.scorer.pipeline.settings import ScorerSettings

    c, s = m.env_names(CollectorSettings), m.env_names(ScorerSettings)
    assert {
        "RAGPULSE_KAFKA__BOOTSTRAP_SERVERS",
        "RAGPULSE_OTLP__HTTP_PORT",
        "RAGPULSE_PRODUCER__PARTITIONS",
    } <= c
    assert {
        "RAGPULSE_CONSUMER__SESSION_TIMEOUT_MS",
        "RAGPULSE_CLICKHOUSE",
        "RAGPULSE_DRAIN_TIMEOUT_S",
        "RAGPULSE_SAMPLING__DEFAULT_RATE",
        "RAGPULSE_WRITER__BATCH_ROWS",
    } <= s
    assert "RAGPULSE_KAFKA__BOOTSTRAP_SERVER" not in c | s


def _with_env(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> None:
    import os

    for k in list(os.environ):
        if k.startswith("RAGPULSE_"):
            monkeypatch.delenv(k)
    for k, v in env.items():
        monkeypatch.setenv(k, v)


def _k8s_container(deployment: str) -> dict:
    return m.pod_spec(m.k8s("Deployment", deployment))["containers"][0]


def test_k8s_environment_validates_and_takes_effect(monkeypatch: pytest.MonkeyPatch) -> None:
    from ragpulse.collector.config import CollectorSettings
    from ragpulse.deploy.health import ObservabilitySettings
    from ragpulse.scorer.pipeline.settings import ScorerSettings

    _with_env(monkeypatch, m.container_env(_k8s_container("ragpulse-collector")))
    c = CollectorSettings()
    cm = m.configmap_env()
    assert c.kafka.bootstrap_servers == cm["RAGPULSE_KAFKA__BOOTSTRAP_SERVERS"]
    assert c.producer.partitions == int(cm["RAGPULSE_PRODUCER__PARTITIONS"])
    assert c.otlp.http_host == c.otlp.grpc_host == "0.0.0.0"
    o = ObservabilitySettings()
    assert o.health.enabled and o.health.host == "0.0.0.0"

    _with_env(monkeypatch, m.container_env(_k8s_container("ragpulse-scorer")))
    s = ScorerSettings()
    assert s.clickhouse == m.secret_env()["RAGPULSE_CLICKHOUSE"]
    assert s.init_schema is False and s.judge == "model"
    assert s.consumer.session_timeout_ms == int(cm["RAGPULSE_CONSUMER__SESSION_TIMEOUT_MS"])
    assert s.drain_timeout_s == float(cm["RAGPULSE_DRAIN_TIMEOUT_S"])


def _compose_secret_files(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, service: str) -> dict[str, str]:
    """The service's ``/run/secrets/NAME`` files, written under ``tmp_path`` from the top-level
    secrets' environment variables, and its ``*_FILE`` variables pointed at them, then resolved
    as the CLI does (``load_secret_files``). Returns the secret values by name."""
    import os

    from ragpulse.deploy.secrets import load_secret_files

    doc = m.compose()
    values = {}
    for name in doc["services"][service].get("secrets", []):
        values[name] = f"value-of-{doc['secrets'][name]['environment']}"
        (tmp_path / name).write_text(values[name] + "\n")
    for key, value in m.compose_env(service).items():
        if key.endswith("_FILE") and value.startswith("/run/secrets/"):
            monkeypatch.setenv(key, str(tmp_path / value.removeprefix("/run/secrets/")))
    # resolved into a copy and applied through monkeypatch: resolving os.environ itself left
    # RAGPULSE_OTLP__AUTH_TOKEN set for every later test (their receivers then answered 401)
    env = dict(os.environ)
    load_secret_files(env)
    for key in set(env) | set(os.environ):
        if key not in env:
            monkeypatch.delenv(key)
        elif env[key] != os.environ.get(key):
            monkeypatch.setenv(key, env[key])
    return values


def test_compose_environment_validates(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from ragpulse.collector.config import CollectorSettings
    from ragpulse.scorer.pipeline.settings import ScorerSettings

    _with_env(monkeypatch, m.compose_env("collector"))
    _compose_secret_files(monkeypatch, tmp_path, "collector")
    c = CollectorSettings()
    assert c.kafka.bootstrap_servers == "kafka:9092"
    _with_env(monkeypatch, m.compose_env("scorer"))
    s = ScorerSettings()
    assert s.clickhouse.startswith("http://default:") and s.clickhouse.endswith("@clickhouse:8123")
    assert s.kafka.topic == c.kafka.topic


def _ragpulse_commands() -> list[tuple[str, list[str]]]:
    out = []
    for name, svc in m.compose()["services"].items():
        if svc.get("image") == RAGPULSE_IMAGE and "entrypoint" not in svc:
            out.append((f"compose {name}", [m.interpolate(a) for a in svc["command"]]))
    for c in m.k8s_containers():
        if c["image"] == RAGPULSE_IMAGE:
            out.append((f"k8s {c['name']}", list(c["args"])))
    for instr, rest in m.dockerfile_instructions():
        if instr == "CMD" and rest.startswith("["):
            out.append(("Dockerfile CMD", json.loads(rest)))
    return out


def test_every_command_and_flag_parses_in_the_cli() -> None:
    root = m.cli_root()
    cmds = _ragpulse_commands()
    assert {w for w, _ in cmds} >= {
        "compose collector",
        "compose scorer",
        "compose db-init",
        "compose grafana-provisioning",
        "k8s collector",
        "k8s scorer",
        "k8s db-init",
        "Dockerfile CMD",
    }
    for where, args in cmds:
        ctx = m.parse_command(root, args)  # raises UsageError on unknown commands/flags
        assert ctx.command.name, where
    with pytest.raises(m.UsageError):
        m.parse_command(root, ["scorer", "--no-such-flag"])
    with pytest.raises(m.UsageError):
        m.parse_command(root, ["no-such-command"])


def test_entrypoint_is_the_console_script_and_example_app_flags_exist() -> None:
    import tomllib

    scripts = tomllib.loads((m.REPO / "pyproject.toml").read_text())["project"]["scripts"]
    entry = [
        json.loads(rest) for instr, rest in m.dockerfile_instructions() if instr == "ENTRYPOINT"
    ]
    assert entry == [["ragpulse"]] and "ragpulse" in scripts
    app = m.compose()["services"]["example-app"]
    assert app["entrypoint"] == ["python", "/opt/ragpulse/example-app/app.py"]
    help_text = subprocess.run(
        [sys.executable, str(m.DEPLOY / "example-app" / "app.py"), "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    for flag in app["command"]:
        if flag.startswith("--"):
            assert flag in help_text


def test_images_are_pinned_and_ours_is_the_package_version() -> None:
    images = [svc["image"] for svc in m.compose()["services"].values()]
    images += [c["image"] for c in m.k8s_containers()]
    for image in images:
        repo, _, tag = image.rpartition(":")
        assert repo and tag and tag != "latest", image
        if repo == "ragpulse":
            assert image == RAGPULSE_IMAGE
    kust = __import__("yaml").safe_load((m.K8S / "kustomization.yaml").read_text())
    assert kust["images"] == [{"name": "ragpulse", "newTag": version("ragpulse")}]
    for res in kust["resources"]:
        assert (m.K8S / res).is_file(), res


def test_ports_are_the_settings_defaults() -> None:
    from ragpulse.collector.config import OtlpSettings
    from ragpulse.deploy.health import HealthSettings

    otlp, health = OtlpSettings(), HealthSettings()
    want = {"otlp-grpc": otlp.grpc_port, "otlp-http": otlp.http_port, "health": health.port}
    ports = {p["name"]: p["containerPort"] for p in _k8s_container("ragpulse-collector")["ports"]}
    assert ports == want
    assert {p["name"]: p["containerPort"] for p in _k8s_container("ragpulse-scorer")["ports"]} == {
        "health": health.port
    }
    svc = m.k8s("Service", "ragpulse-collector")["spec"]["ports"]
    assert {p["name"]: p["port"] for p in svc} == want
    for dep in ("ragpulse-collector", "ragpulse-scorer"):
        ann = m.k8s("Deployment", dep)["spec"]["template"]["metadata"]["annotations"]
        assert ann["prometheus.io/port"] == str(health.port)
    assert m.configmap_env()["RAGPULSE_HEALTH__PORT"] == str(health.port)
    coll = m.compose()["services"]["collector"]
    assert sorted(coll["ports"]) == sorted(f"{p}:{p}" for p in (otlp.grpc_port, otlp.http_port))
    expose = [rest for instr, rest in m.dockerfile_instructions() if instr == "EXPOSE"]
    assert expose and set(map(int, expose[0].split())) == set(want.values())
    cmd = next(a for w, a in _ragpulse_commands() if w == "Dockerfile CMD")
    assert f"0.0.0.0:{otlp.http_port}" in cmd and f"0.0.0.0:{otlp.grpc_port}" in cmd


def test_k8s_scaling_probes_and_grace() -> None:
    cm = m.configmap_env()
    partitions = int(cm["RAGPULSE_PRODUCER__PARTITIONS"])
    scorer = m.k8s("Deployment", "ragpulse-scorer")
    assert 1 <= scorer["spec"]["replicas"] <= partitions
    hpa = m.k8s("HorizontalPodAutoscaler", "ragpulse-scorer")["spec"]
    assert hpa["maxReplicas"] <= partitions and hpa["scaleTargetRef"]["name"] == "ragpulse-scorer"
    assert (
        m.k8s("HorizontalPodAutoscaler", "ragpulse-collector")["spec"]["scaleTargetRef"]["name"]
        == "ragpulse-collector"
    )
    assert m.pod_spec(scorer)["terminationGracePeriodSeconds"] > float(
        cm["RAGPULSE_DRAIN_TIMEOUT_S"]
    )
    # The collector drains HTTP, gRPC and the Kafka flush one after the other, each with
    # Collector.shutdown's default budget, after the preStop pause.
    from ragpulse.collector.service import Collector

    stage_s = inspect.signature(Collector.shutdown).parameters["drain_timeout_s"].default
    coll = m.pod_spec(m.k8s("Deployment", "ragpulse-collector"))
    pre_stop = coll["containers"][0]["lifecycle"]["preStop"]["exec"]["command"]
    assert coll["terminationGracePeriodSeconds"] > int(pre_stop[1]) + 3 * stage_s
    for name in ("ragpulse-collector", "ragpulse-scorer"):
        dep = m.k8s("Deployment", name)
        labels = dep["spec"]["selector"]["matchLabels"]
        assert m.k8s("PodDisruptionBudget", name)["spec"]["selector"]["matchLabels"] == labels
        spec = m.pod_spec(dep)
        assert spec["securityContext"]["runAsNonRoot"] is True
        c = spec["containers"][0]
        assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
        assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
        assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert (
        m.k8s("Service", "ragpulse-collector")["spec"]["selector"]
        == m.k8s("Deployment", "ragpulse-collector")["spec"]["selector"]["matchLabels"]
    )
    compose_scorer = m.compose()["services"]["scorer"]
    assert compose_scorer["deploy"]["replicas"] == 2
    grace = int(compose_scorer["stop_grace_period"].rstrip("s"))
    assert grace > float(m.compose_env("scorer")["RAGPULSE_DRAIN_TIMEOUT_S"])


def test_otelcol_config_produces_what_the_scorer_reads() -> None:
    from ragpulse.common import KafkaSettings

    cfg = m.otelcol()
    protocols = cfg["receivers"]["otlp"]["protocols"]
    assert set(protocols) == {"grpc", "http"}
    kafka = cfg["exporters"]["kafka"]
    assert kafka["traces"]["encoding"] == "otlp_proto"
    assert kafka["partition_traces_by_id"] is True
    assert kafka["traces"]["topic"] == KafkaSettings().topic
    assert kafka["producer"]["compression"] == KafkaSettings().compression
    assert "topic" not in kafka and "encoding" not in kafka  # deprecated top-level keys
    filters = {k: v for k, v in cfg["processors"].items() if k.split("/")[0] == "filter"}
    assert len(filters) == 1
    ((fname, filt),) = filters.items()
    # Its conditions: tests/test_conventions_declared.py checks them against the declarations.
    assert filt["traces"]["span"]
    pipe = cfg["service"]["pipelines"]["traces"]
    assert pipe["receivers"] == ["otlp"] and pipe["exporters"] == ["kafka"]
    assert fname in pipe["processors"]
    assert pipe["processors"].index(fname) < pipe["processors"].index("batch")
    compose_otel = m.compose()["services"]["otelcol"]
    assert "./otelcol/config.yaml:/etc/otelcol-contrib/config.yaml:ro" in compose_otel["volumes"]


def test_dockerfile_non_root_healthcheck_offline_install() -> None:
    instrs = m.dockerfile_instructions()
    users = [rest for instr, rest in instrs if instr == "USER"]
    assert users and users[-1].split(":")[0] not in ("0", "root")
    assert any(instr == "HEALTHCHECK" and "/healthz" in rest for instr, rest in instrs)
    runs = " ".join(rest for instr, rest in instrs if instr == "RUN")
    assert "--no-index" in runs and "ragpulse[otlp]" in runs
    # the wheel is built with the collector's C module: its build hook, and a compiler
    copied = " ".join(rest for instr, rest in instrs if instr == "COPY")
    assert "hatch_build.py" in copied and " gcc " in runs
    for instr, rest in instrs:
        if instr == "COPY" and "--from" not in rest:
            parts = [p for p in shlex.split(rest) if not p.startswith("--")]
            for src in parts[:-1]:
                assert (m.REPO / src).exists(), f"COPY {src}: missing in the repository"
    # The CMD/HEALTHCHECK port is the health default (checked against settings above).
    assert any(instr == "ENV" and "RAGPULSE_HEALTH__PORT=9464" in rest for instr, rest in instrs)


def test_the_collector_off_loopback_gets_its_token_from_a_secret(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Issue 38, item 14: compose, Kubernetes and the image ran ``ragpulse collector`` on
    0.0.0.0 without a token. Now it refuses to start so (tests/collector/test_cli.py), and each
    manifest gives it the token from a secret: a compose secret read through
    RAGPULSE_OTLP__AUTH_TOKEN_FILE, a Kubernetes Secret through secretKeyRef; the example app
    sends the same token as its Authorization header."""
    import typer

    from ragpulse.collector.config import CollectorSettings
    from ragpulse.deploy.commands.collector import _require_auth_off_loopback

    # compose: the secret, its file, the collector's settings, and what the example app sends
    _with_env(monkeypatch, m.compose_env("collector"))
    values = _compose_secret_files(monkeypatch, tmp_path, "collector")
    c = CollectorSettings()
    assert c.otlp.http_host == "0.0.0.0" and c.otlp.auth_token is not None
    assert c.otlp.auth_token.get_secret_value() == values["otlp_token"]
    _require_auth_off_loopback(c)  # does not exit
    token_var = m.compose()["secrets"]["otlp_token"]["environment"]
    headers = m.interpolate(m.compose()["services"]["example-app"]["environment"]
                            ["OTEL_EXPORTER_OTLP_HEADERS"], {token_var: "T0K"})
    assert headers == "authorization=Bearer%20T0K"

    # Kubernetes: RAGPULSE_OTLP__AUTH_TOKEN from a key of an existing Secret
    container = _k8s_container("ragpulse-collector")
    (ref,) = [e["valueFrom"]["secretKeyRef"] for e in container["env"]
              if e["name"] == "RAGPULSE_OTLP__AUTH_TOKEN"]
    assert ref["key"] in m.k8s("Secret", ref["name"])["stringData"]
    _with_env(monkeypatch, m.container_env(container))
    c = CollectorSettings()
    assert c.otlp.grpc_host == "0.0.0.0" and c.otlp.auth_token is not None
    _require_auth_off_loopback(c)

    # without the token, the same environment is refused (exit 2)
    monkeypatch.delenv("RAGPULSE_OTLP__AUTH_TOKEN")
    with pytest.raises(typer.Exit) as exited:
        _require_auth_off_loopback(CollectorSettings())
    assert exited.value.exit_code == 2
