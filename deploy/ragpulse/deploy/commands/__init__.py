"""The ``ragpulse`` subcommands, one module each (typer functions and groups).

Each module imports its component (collector, scorer, store, dashboards, embedded stack) inside
the command function, so registering every command costs only typer. The ``ragpulse`` entry
point (:mod:`ragpulse.deploy.cli`) registers them.
"""

from .collector import collector
from .dashboards import dashboards, report, status
from .db import db
from .score import score
from .scorer import scorer
from .up import up

__all__ = ["collector", "dashboards", "db", "report", "score", "scorer", "status", "up"]
