"""How a command's options become its settings, and what ``--help`` says about them.

Each command with settings (``up``, ``scorer``, ``collector``, and the ``--health-port`` of the
last two: :data:`HEALTH`) declares one :class:`Options`: the setting (a dotted field of its
pydantic-settings class, ``otlp.http_port``) each option sets. That map feeds both the
option's help, which names the setting's variable as typer prints one declared with
``envvar=`` (``[env var: NAME]``), and the settings object the command runs with
(:meth:`Options.settings`): the options given on the command line become init arguments,
which pydantic-settings merges over its environment variables field by field, nested
sections too. So a flag wins over its variable, the variable over the default, and an option
left at its default changes nothing. Click must not read the variables itself (no ``envvar=``):
one flag can set two settings (``collector --http``) or a value of another type
(``--pass-all``). Every command's help ends with :data:`ENV_EPILOG`.
``tests/deploy/test_cli_env_help.py`` checks each named variable against the settings class and
that every option reaches its setting, from the flag and from the variable.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

import typer
from pydantic import ValidationError
from rich.markup import escape

__all__ = ["ENV_EPILOG", "HEALTH", "Options", "Sets", "env_help", "env_name"]

ENV_EPILOG = escape("An option marked [env var: NAME] can also be set with that variable (the "
                    "option wins); the options without one have no variable.")


def env_name(dotted: str, prefix: str = "RAGPULSE_") -> str:
    """The variable of the setting ``dotted`` (``otlp.http_port``) under ``prefix``, as
    pydantic-settings reads it: ``RAGPULSE_OTLP__HTTP_PORT``."""
    return prefix + dotted.upper().replace(".", "__")


def env_help(text: str, *names: str) -> str:
    """``text`` followed by ``[env var: NAME, ...]``, escaped so that rich prints the brackets
    (unescaped, rich would read them as a style tag and drop them)."""
    if not names:
        raise ValueError("env_help needs at least one variable name")
    return f"{text} " + escape(f"[env var: {', '.join(names)}]")


@dataclass(frozen=True)
class Sets:
    """The settings one option sets (dotted fields) and how its value becomes theirs:
    ``convert(value)``, a tuple of one value per field when there are several."""

    fields: tuple[str, ...]
    convert: Callable[[Any], Any] | None = None


class Options:
    """A command's options that set settings: ``sets`` maps each option's parameter name to the
    dotted field it sets, or to a :class:`Sets`; ``prefix`` is the settings class's
    ``env_prefix``; ``also_env`` names variables a part of the command also reads for an
    option's setting (shown in its help only)."""

    def __init__(self, sets: Mapping[str, str | Sets], prefix: str = "RAGPULSE_",
                 also_env: Mapping[str, tuple[str, ...]] | None = None) -> None:
        self.sets = {p: s if isinstance(s, Sets) else Sets((s,)) for p, s in sets.items()}
        self.prefix = prefix
        self.also_env = dict(also_env or {})

    def help(self, text: str, param: str) -> str:
        """``text`` with the variables of the settings the option ``param`` sets."""
        names = (env_name(f, self.prefix) for f in self.sets[param].fields)
        return env_help(text, *names, *self.also_env.get(param, ()))

    def given(self, ctx: typer.Context) -> dict[str, Any]:
        """The settings of the options given on the command line (not left at their default),
        nested as the settings class takes them: ``{"otlp": {"http_port": 4318}}``."""
        out: dict[str, Any] = {}
        for param, sets in self.sets.items():
            source = ctx.get_parameter_source(param)
            # by name: typer ships its own click, whose ParameterSource enum is not public
            if source is None or source.name != "COMMANDLINE":
                continue
            value = ctx.params[param] if sets.convert is None else sets.convert(ctx.params[param])
            for dotted, v in zip(sets.fields, value if len(sets.fields) > 1 else (value,),
                                 strict=True):
                *parents, leaf = dotted.split(".")
                node = out
                for part in parents:
                    node = node.setdefault(part, {})
                node[leaf] = v
        return out

    def settings(self, ctx: typer.Context, cls: type[Any]) -> Any:
        """``cls`` (a pydantic-settings class) from the options given over its environment;
        exits with status 2 naming each invalid setting (:meth:`exit_invalid`)."""
        try:
            return cls(**self.given(ctx))
        except ValidationError as exc:
            self.exit_invalid(ctx, exc, cls)

    def exit_invalid(self, ctx: typer.Context, exc: ValidationError,
                     cls: type[Any] | None = None) -> NoReturn:
        """Print one line per error of ``exc`` and exit with status 2. Where the error is of a
        field of ``cls`` (this command's settings), the line names its option and variable; an
        error of a part's settings (``up`` building the scorer's) is printed as written."""
        for e in exc.errors():
            loc = tuple(str(p) for p in e["loc"])
            self.echo_invalid(ctx, ".".join(loc), str(e["msg"]).removeprefix("Value error, "),
                              cls if cls is not None and _is_leaf(cls, loc) else None)
        raise typer.Exit(2)

    def echo_invalid(self, ctx: typer.Context, dotted: str, message: str,
                     cls: type[Any] | None = None) -> None:
        """``ragpulse COMMAND: invalid setting DOTTED (--flag, VARIABLE): MESSAGE`` on stderr;
        the option and variable only when ``cls`` is given, ``invalid settings: MESSAGE`` for an
        error of the whole (no ``dotted``)."""
        where = f"setting {dotted}" if dotted else "settings"
        if cls is not None and dotted:
            flags = [p.opts[0] for p in ctx.command.params
                     if p.name in self.sets and dotted in self.sets[p.name].fields]
            where += f" ({', '.join([*flags, env_name(dotted, self.prefix)])})"
        typer.echo(f"ragpulse {ctx.info_name}: invalid {where}: {message}", err=True)


def _is_leaf(cls: type[Any], loc: tuple[str, ...]) -> bool:
    """Whether ``loc`` names a field of ``cls`` that is not itself a section (a variable sets
    it)."""
    node: Any = cls
    for part in loc:
        field = getattr(node, "model_fields", {}).get(part)
        if field is None:
            return False
        node = field.annotation
    return bool(loc) and not hasattr(node, "model_fields")


HEALTH = Options({"health_port": Sets(("health.enabled", "health.port"),
                                      lambda port: (True, port))})
"""``--health-port`` of ``scorer`` and ``collector``: it enables the health endpoint
(:class:`~ragpulse.deploy.health.ObservabilitySettings`) on that port."""
