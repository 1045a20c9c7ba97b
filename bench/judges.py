"""The ``--judge`` option of the benches and of train's commands, read from the product's one
declaration of the judges (``ragpulse.scorer.judges.registry``): a script names the subset of
the registry's judges it runs, never a list of its own, and an old name (``local-model``,
``local``) is accepted with the registry's warning and read as the judge it stands for, so the
commands in docs/history and in the changelog still run.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from ragpulse.scorer.judges.registry import JUDGE_ALIASES, JUDGE_NAMES, JUDGES, resolve_judge

__all__ = ["add_judge_option", "judge_summary", "judge_type"]


def _supported(names: tuple[str, ...]) -> tuple[str, ...]:
    unknown = [n for n in names if n not in JUDGE_NAMES]
    if unknown:
        raise ValueError(f"not judges of the registry: {', '.join(unknown)} "
                         f"(the judges: {', '.join(JUDGE_NAMES)})")
    return names or JUDGE_NAMES


def judge_type(*supported: str) -> Callable[[str], str]:
    """An argparse ``type``: a judge's name or old name -> the judge's name, one of
    ``supported`` (every judge when none is given). An old name logs the registry's warning;
    an unknown name or a judge the script does not run is an argparse error naming the
    choices. Raises ``ValueError`` when ``supported`` names no judge of the registry."""
    names = _supported(supported)

    def judge(value: str) -> str:
        try:
            name = resolve_judge(value)
        except ValueError:
            name = None
        if name not in names:
            raise argparse.ArgumentTypeError(f"judge {value!r}: this command runs "
                                             f"{', '.join(names)}")
        return name

    return judge


def add_judge_option(parser: argparse.ArgumentParser, *supported: str, flag: str = "--judge",
                     help: str | None = None, **kwargs: Any) -> argparse.Action:
    """Add ``flag`` (``--judge`` unless told) to ``parser``: one of ``supported`` (every judge
    when none is given), old names accepted (:func:`judge_type`); ``kwargs`` go to
    ``add_argument`` (``default``, ``nargs``, ``required``). The help lists the choices and the
    old names after ``help``."""
    names = _supported(supported)
    old = ", ".join(f"{a} = {n}" for a, n in JUDGE_ALIASES.items() if n in names)
    text = " ".join(x for x in (help, f"One of {', '.join(names)}"
                                + (f" (old names: {old})." if old else ".")) if x)
    return parser.add_argument(flag, type=judge_type(*names), metavar="{" + ",".join(names) + "}",
                               help=text, **kwargs)


def judge_summary(name: str) -> str:
    """What the judge ``name`` (a name or an old name, resolved without a warning) is, as the
    registry says it."""
    name = JUDGE_ALIASES.get(name, name)
    for spec in JUDGES:
        if spec.name == name:
            return spec.summary
    raise ValueError(f"unknown judge {name!r}: one of {', '.join(JUDGE_NAMES)}")
