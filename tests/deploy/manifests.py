"""Readers for the deployment files and for what the code accepts, shared by the deploy tests.

Both sides are read, never restated: environment variable names come from walking the real
pydantic settings classes (``env_prefix`` + ``__`` nesting) and the typer options' ``envvar``;
commands and flags come from the real ``ragpulse`` click tree.
"""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer
import yaml
from pydantic import BaseModel
from pydantic_settings import BaseSettings

# typer >= 0.2x vendors click (``typer._click``); reach its classes through public typer names.
UsageError: type[Exception] = next(
    c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError"
)

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
COMPOSE = DEPLOY / "compose.yaml"
OTELCOL = DEPLOY / "otelcol" / "config.yaml"
DOCKERFILE = DEPLOY / "Dockerfile"
K8S = DEPLOY / "k8s"


def settings_classes() -> list[type[BaseSettings]]:
    from ragpulse.collector.config import CollectorSettings
    from ragpulse.deploy.health import ObservabilitySettings
    from ragpulse.scorer.pipeline.settings import ScorerSettings

    return [CollectorSettings, ScorerSettings, ObservabilitySettings]


def _models(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return [m for a in typing.get_args(annotation) for m in _models(a)]
    return []


def env_names(cls: type[BaseSettings]) -> set[str]:
    """Every variable ``cls`` reads: each field (a whole nested model may be given as JSON) and,
    through nested models, each leaf, as ``PREFIX`` + names joined by the nested delimiter."""
    config = cls.model_config
    prefix = str(config.get("env_prefix", "")).upper()
    sep = config.get("env_nested_delimiter") or ""
    out: set[str] = set()

    def walk(model: type[BaseModel], path: str) -> None:
        for name, field in model.model_fields.items():
            full = f"{path}{name.upper()}"
            out.add(full)
            if sep:
                for sub in _models(field.annotation):
                    walk(sub, full + sep)

    walk(cls, prefix)
    return out


def cli_root() -> Any:
    """The ``ragpulse`` click group, with every subcommand registered."""
    from ragpulse.deploy import cli

    if not cli.app.registered_commands:
        cli._register()
    group = typer.main.get_command(cli.app)
    assert hasattr(group, "commands")
    return group


def cli_envvars(root: Any) -> set[str]:
    out: set[str] = set()
    for cmd in _commands(root):
        for p in cmd.params:
            env = getattr(p, "envvar", None)
            if isinstance(env, str):
                out.add(env)
            elif env:
                out.update(env)
    return out


def _commands(cmd: Any) -> Iterator[Any]:
    yield cmd
    if hasattr(cmd, "commands"):
        for sub in cmd.commands.values():
            yield from _commands(sub)


def parse_command(root: Any, args: list[str]) -> Any:
    """Resolve ``ragpulse ARGS`` to its subcommand and parse its options without running it.

    Raises :data:`UsageError` for an unknown command, an unknown flag or an invalid value.
    """
    cmd = root
    rest = list(args)
    path = ["ragpulse"]
    while hasattr(cmd, "commands"):
        if not rest:
            raise UsageError(f"{' '.join(path)} needs a subcommand")
        name = rest.pop(0)
        sub = cmd.get_command(typer.Context(cmd), name)
        if sub is None:
            raise UsageError(f"no command {name!r} under {' '.join(path)}")
        cmd = sub
        path.append(name)
    return cmd.make_context(" ".join(path), rest)


def provisioning_env_refs() -> set[str]:
    """``$RAGPULSE_*`` variables the exported Grafana provisioning files expand."""
    from ragpulse.dashboards.provisioning import files
    from ragpulse.dashboards.settings import DashboardsSettings

    text = "\n".join(files(DashboardsSettings()).values())
    return set(re.findall(r"\$\{?(RAGPULSE_[A-Z0-9_]+)", text))


def known_env() -> set[str]:
    names: set[str] = set()
    for cls in settings_classes():
        names |= env_names(cls)
    return names | cli_envvars(cli_root()) | provisioning_env_refs()


# --------------------------------------------------------------------------------------------
# The deployment files


def compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text())


def otelcol() -> dict[str, Any]:
    return yaml.safe_load(OTELCOL.read_text())


def k8s_objects() -> list[dict[str, Any]]:
    out = []
    for path in sorted(K8S.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        out += [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
    return out


def k8s(kind: str, name: str) -> dict[str, Any]:
    for obj in k8s_objects():
        if obj["kind"] == kind and obj["metadata"]["name"] == name:
            return obj
    raise KeyError(f"{kind}/{name}")


def pod_spec(obj: dict[str, Any]) -> dict[str, Any]:
    return obj["spec"]["template"]["spec"]


def k8s_containers() -> list[dict[str, Any]]:
    return [
        c
        for obj in k8s_objects()
        if obj["kind"] in ("Deployment", "Job", "StatefulSet")
        for c in pod_spec(obj)["containers"]
    ]


def configmap_env() -> dict[str, str]:
    return dict(k8s("ConfigMap", "ragpulse")["data"])


def secret_env() -> dict[str, str]:
    return dict(k8s("Secret", "ragpulse")["stringData"])


def container_env(container: dict[str, Any]) -> dict[str, str]:
    """The literal environment of a k8s container: its envFrom ConfigMap/Secret, then ``env``."""
    env: dict[str, str] = {}
    for src in container.get("envFrom", []):
        if "configMapRef" in src:
            env.update(configmap_env())
        if "secretRef" in src:
            env.update(secret_env())
    for item in container.get("env", []):
        value = item.get("value", f"<{item['name']} from the downward API>")
        # Kubernetes expands $(VAR) from the variables defined before (envFrom included).
        env[item["name"]] = re.sub(
            r"\$\((\w+)\)", lambda mm: env.get(mm.group(1), mm.group(0)), value
        )
    return env


_INTERP = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?([-?])([^}]*))?\}")


def interpolate(value: str, env: dict[str, str] | None = None) -> str:
    """Compose's ``${VAR:-default}`` interpolation (defaults only, unless ``env`` gives one);
    a required ``${VAR:?message}`` without a value becomes ``<VAR>``."""
    env = env or {}
    return _INTERP.sub(lambda m: env.get(m.group(1), f"<{m.group(1)}>" if m.group(2) == "?"
                                         else m.group(3) or ""), value)


def compose_env(service: str) -> dict[str, str]:
    raw = compose()["services"][service].get("environment") or {}
    if isinstance(raw, list):
        raw = dict(item.split("=", 1) for item in raw)
    return {k: interpolate(str(v)) for k, v in raw.items()}


def dockerfile_instructions() -> list[tuple[str, str]]:
    """``(INSTRUCTION, arguments)`` pairs with line continuations joined and comments dropped."""
    lines: list[str] = []
    buf = ""
    for raw in DOCKERFILE.read_text().splitlines():
        line = raw.strip()
        if not buf and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        lines.append(buf + line)
        buf = ""
    out = []
    for line in lines:
        instr, _, rest = line.partition(" ")
        out.append((instr.upper(), rest.strip()))
    return out
