"""The ``ragpulse`` command: the console script ``ragpulse = ragpulse.deploy.cli:main``. Its
subcommands are in :mod:`ragpulse.deploy.commands`, one module each; the components they run are
imported only when a command runs, so ``ragpulse --help`` stays fast and a missing optional piece
fails only its command."""

from __future__ import annotations

import os
import sys

import typer

app = typer.Typer(
    name="ragpulse",
    help="Reference-free quality time series for production RAG apps.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        typer.echo(f"ragpulse {version('ragpulse')}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", help="Print the version and exit.",
                                 callback=_version, is_eager=True),
) -> None:
    """ragpulse turns the OpenTelemetry traces of RAG apps into quality time series."""


def _register() -> None:
    from ragpulse.deploy.commands import (
        collector,
        dashboards,
        db,
        report,
        score,
        scorer,
        status,
        up,
    )
    from ragpulse.deploy.options import ENV_EPILOG

    # Every command's help ends with ENV_EPILOG (db's and dashboards' subcommands add it
    # themselves): the options that have a variable name it, the others have none.
    app.command("score", help="Score RAG samples from a JSONL file (batch, like ragas.evaluate).",
                epilog=ENV_EPILOG)(score)
    app.command("scorer", help="Run the live scorer: Kafka spans in, scores into ClickHouse.",
                epilog=ENV_EPILOG)(scorer)
    app.command("collector", help="Run the OTLP collector: traces in, per-trace Kafka records out.",
                epilog=ENV_EPILOG)(collector)
    app.add_typer(db, name="db")
    app.command("up", help="Run everything on this machine: broker, collector, scorer, chDB.",
                epilog=ENV_EPILOG)(up)

    app.add_typer(dashboards, name="dashboards")
    app.command("report", help="Render the dashboards from ClickHouse into one self-contained HTML file.",
                epilog=ENV_EPILOG)(report)
    app.command("status", help="Terminal summary per metric: last value, interval, trend, alerts "
                "firing. Exit code 3 when an alert fires (for scripts and cron), 1 on errors.",
                epilog=ENV_EPILOG)(status)


def main() -> None:
    """The ``ragpulse`` console script: load ``*_FILE`` secrets (exit 2 when one cannot be
    read), register the subcommands and run typer on ``sys.argv``."""
    from ragpulse.deploy.secrets import SecretFileError, load_secret_files

    try:
        load_secret_files()
    except SecretFileError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise SystemExit(2) from None
    if ("--help" in sys.argv or "-h" in sys.argv) and not sys.stdout.isatty() \
            and "COLUMNS" not in os.environ:
        # Piped help (`ragpulse up --help | less`) is 80 columns wide by default, where rich cut
        # long option and variable names (--allow-anonymous-inge…, RAGPULSE_UP__CLICKHOUS…).
        os.environ["COLUMNS"] = "130"
    _register()
    app()


if __name__ == "__main__":
    main()
