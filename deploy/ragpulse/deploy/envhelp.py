"""What ``--help`` says about environment variables.

Every option of a ``ragpulse`` command that maps to a setting names that setting's variable in
its help, in the form typer prints for an option declared with ``envvar=`` (``[env var: NAME]``);
every command's help ends with :data:`ENV_EPILOG`, which says that the options without one have
no variable. The variable is written into the help text rather than declared with ``envvar=``
because the settings classes, not click, read the environment (one flag can map to two
variables, as ``collector --http`` does, or to a value of another type, as ``--pass-all``), so
click must not parse it first. ``tests/deploy/test_cli_env_help.py`` checks that each named
variable is a setting the command reads.
"""

from __future__ import annotations

from rich.markup import escape

__all__ = ["ENV_EPILOG", "env_help", "env_name"]

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
