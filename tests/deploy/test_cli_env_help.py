"""Issue 42 item 9: ``--help`` names each option's environment variable, for every command, and
says that the options without one have none (the README promises it). Each variable named is
checked against the settings class the command builds: a variable that names no setting (a typo,
a renamed field) fails here, as does an option of ``up``, ``scorer`` or ``collector`` that sets a
setting but names no variable."""

from __future__ import annotations

import re
from typing import Any

import pytest
import typer
from pydantic import BaseModel
from typer.testing import CliRunner

from ragpulse.deploy import cli
from ragpulse.deploy.options import ENV_EPILOG

runner = CliRunner()

# Options that set no setting, per command (everything else of these three must name a variable).
NO_VARIABLE = {
    "up": {"verbose"},
    "scorer": {"log_level"},
    "collector": {"status_interval_s", "log_level"},
}
# Variables read by click itself (declared with envvar=) or by a library, not by a settings class.
READ_ELSEWHERE = {"GRAFANA_URL", "GRAFANA_TOKEN", "OPENAI_BASE_URL"}


def _app() -> typer.Typer:
    if not cli.app.registered_commands:
        cli._register()
    return cli.app


def _leaves(group: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    """Every command under ``group`` with its path (typer ships its own click, so groups are
    told by their ``commands``, not by ``isinstance``)."""
    out = []
    for name, command in sorted(group.commands.items()):
        if hasattr(command, "commands"):
            out += _leaves(command, (*path, name))
        else:
            out.append(((*path, name), command))
    return out


LEAVES = _leaves(typer.main.get_command(_app()))  # type: ignore[arg-type]


def _variables(param: Any) -> list[str]:
    """The variables an option's help names: click's ``envvar`` (typer shows it), or the
    ``[env var: ...]`` that :func:`ragpulse.deploy.options.env_help` appends."""
    if param.envvar:
        return [param.envvar] if isinstance(param.envvar, str) else list(param.envvar)
    m = re.search(r"\\?\[env var: ([^\]]+)\]", getattr(param, "help", None) or "")
    return [v.strip() for v in m.group(1).split(",")] if m else []


def _settings_roots() -> dict[str, type[BaseModel]]:
    from ragpulse.collector import CollectorSettings
    from ragpulse.deploy.embedded import EmbeddedSettings
    from ragpulse.deploy.health import ObservabilitySettings
    from ragpulse.scorer.pipeline.settings import ScorerSettings

    return {"up": EmbeddedSettings, "scorer": ScorerSettings, "collector": CollectorSettings,
            "health": ObservabilitySettings}


def _resolves(variable: str, command: str) -> bool:
    """Whether ``variable`` is a field of a settings class that ``command`` builds, walked the
    way pydantic-settings reads it (prefix, then ``__`` between nested fields)."""
    roots = _settings_roots()
    if variable.startswith("RAGPULSE_UP__"):
        candidates: list[tuple[type[BaseModel], str]] = [(roots["up"], variable[len("RAGPULSE_UP__"):])]
    elif variable.startswith("RAGPULSE_"):
        rest = variable[len("RAGPULSE_"):]
        # up's parts read their own variables too (scorer, collector, health)
        names = {"up": ("scorer", "collector", "health"), "scorer": ("scorer", "health"),
                 "collector": ("collector", "health")}.get(command, ())
        candidates = [(roots[n], rest) for n in names]
    else:
        return False
    for model, rest in candidates:
        node: Any = model
        for part in rest.split("__"):
            fields = getattr(node, "model_fields", None)
            if not fields or part.lower() not in fields:
                node = None
                break
            node = fields[part.lower()].annotation
        if node is not None:
            return True
    return False


@pytest.mark.parametrize("path,command", LEAVES, ids=[" ".join(p) for p, _ in LEAVES])
def test_help_names_each_variable_and_says_the_rest_have_none(path, command) -> None:
    result = runner.invoke(_app(), [*path, "--help"], env={"COLUMNS": "240"})
    assert result.exit_code == 0, result.output
    flat = " ".join(result.output.replace("│", " ").split())
    assert " ".join(re.sub(r"\\\[", "[", ENV_EPILOG).split()) in flat
    named = 0
    for param in command.params:
        if param.param_type_name != "option" or param.hidden or param.name == "help":
            continue
        variables = _variables(param)
        if variables:
            named += 1
            assert f"[env var: {', '.join(variables)}]" in flat, (param.name, flat)
        name = path[0]
        if name in NO_VARIABLE:
            if param.name in NO_VARIABLE[name]:
                assert not variables, param.name
            else:
                assert variables, f"{' '.join(path)} {param.opts[0]} sets a setting but names no variable"
        for v in variables:
            if param.envvar or v in READ_ELSEWHERE:
                continue  # click (or the openai client) reads it itself
            assert _resolves(v, name), f"{' '.join(path)} {param.opts[0]}: {v} is no setting"
    if path[0] in NO_VARIABLE:
        assert named >= 10, path


def test_a_wrong_variable_would_fail() -> None:
    """The walk above rejects a variable that names no field, so the check can fail."""
    assert _resolves("RAGPULSE_UP__HTTP_PORT", "up")
    assert _resolves("RAGPULSE_OTLP__HTTP_PORT", "collector")
    assert _resolves("RAGPULSE_SAMPLING__DEFAULT_RATE", "scorer")
    assert not _resolves("RAGPULSE_UP__HTTP_PROT", "up")
    assert not _resolves("RAGPULSE_SAMPLING__SAMPLE_RATE", "scorer")
    assert not _resolves("RAGPULSE_OTLP__HTTP_PORT", "scorer")


@pytest.mark.parametrize("variable,value,field", [
    ("RAGPULSE_UP__HTTP_PORT", "14318", ("http_port", 14318)),
    ("RAGPULSE_UP__DURABLE", "false", ("durable", False)),
    ("RAGPULSE_UP__SAMPLING_RATE", "0.25", ("sampling_rate", 0.25)),
])
def test_up_reads_the_variables_its_help_names(monkeypatch, variable, value, field) -> None:
    """A few of the named variables, read for real by the settings ``up`` builds."""
    from ragpulse.deploy.embedded import EmbeddedSettings

    monkeypatch.setenv(variable, value)
    assert getattr(EmbeddedSettings(), field[0]) == field[1]
