"""The judges, declared once: their names, what they are, the names they had before, what they
store, how fast they run and at what level their faithfulness alerts. The CLI choices and help
of every command, the settings' literals, ``up``'s judge line and default sampling rate, and
the dashboards' alert levels all read this module; adding a judge is one entry here plus its
branch in :func:`~ragpulse.scorer.judges.factory.build_judge`.

Two lines are written by benches (``make judge-figures``), never by hand:
:data:`SAMPLES_PER_S` (``bench/judge_speed.py --write-constants``) and
:data:`FAITHFULNESS_LEVELS` (``bench/faithfulness_distributions.py --write-levels``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import BeforeValidator

__all__ = ["DEFAULT_JUDGE", "FAITHFULNESS_LEVELS", "JUDGES", "JUDGE_ALIASES", "JUDGE_INPUTS",
           "JUDGE_NAMES", "SAMPLES_PER_S", "JudgeName", "JudgeSetting", "JudgeSpec", "judge_help",
           "resolve_judge", "stored_judge_sql"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class JudgeSpec:
    """One judge. ``name`` is both what ``--judge`` takes and what its score rows store in the
    ``judge`` column; ``aliases`` are names it had before (accepted with a warning);
    ``stored_before`` the ``judge`` values its rows had before a rename (the dashboards read
    them as ``name``, so a rename never resets a baseline)."""

    name: str
    summary: str
    aliases: tuple[str, ...] = ()
    stored_before: tuple[str, ...] = ()
    needs_api: bool = False


JUDGES: tuple[JudgeSpec, ...] = (
    JudgeSpec("model", "ragpulse's own faithfulness cross-encoder, bundled (no API, nothing "
              "downloaded); the default", aliases=("local-model",)),
    JudgeSpec("fast", "multilingual USE embeddings and a lexical support detector: the "
              "fastest, less accurate (no API, nothing downloaded)", aliases=("local",),
              stored_before=("local",)),
    JudgeSpec("nli", "an ONNX NLI cross-encoder of your own (--model-dir)"),
    JudgeSpec("llm", "an LLM at any OpenAI-compatible endpoint", needs_api=True),
)
DEFAULT_JUDGE = "model"
JudgeName = Literal["model", "fast", "nli", "llm"]
"""The judge names, for settings; :func:`resolve_judge` maps the aliases onto them."""
JUDGE_NAMES: tuple[str, ...] = tuple(j.name for j in JUDGES)
JUDGE_ALIASES: dict[str, str] = {a: j.name for j in JUDGES for a in j.aliases}
JUDGE_INPUTS: tuple[str, ...] = (*JUDGE_NAMES, *JUDGE_ALIASES)
"""Every value ``--judge`` and ``RAGPULSE_*JUDGE`` accept: the names, then the old names."""

SAMPLES_PER_S: dict[str, float] = {"fast": 9.6, "model": 6.0}
"""Samples/s on 2 free cores for a typical trace (3 answer statements, 5 contexts of about 900
characters, the five default metrics), each judge as ``build_judge`` makes it: what ``up``'s
default sampling rate is sized from. Written by ``bench/judge_speed.py --write-constants``
(docs/benchmarks.md, "Speed of the local judges on a typical trace" has the run and its
machine's load)."""

FAITHFULNESS_LEVELS: dict[str, float] = {"fast": 0.35, "model": 0.35}
"""Default absolute faithfulness alert level per judge, from its measured score distributions
(``bench/faithfulness_distributions.py --write-levels``; the rule is in
``ragpulse.dashboards.levels``). A user's own ``nli`` model and the ``llm`` judge have none:
their rows stay under the generic ``faithfulness_min`` until the user sets a level."""


def resolve_judge(name: str) -> str:
    """The judge ``name`` means: itself, or the judge an old name now stands for (with a warning
    in the log). Raises ``ValueError`` naming the choices for anything else."""
    value = str(getattr(name, "value", name)).strip()
    if value in JUDGE_NAMES:
        return value
    new = JUDGE_ALIASES.get(value)
    if new is None:
        raise ValueError(f"unknown judge {value!r}: one of {', '.join(JUDGE_NAMES)}")
    log.warning("judge %r is now called %r; the old name keeps working (docs/judges.md)", value, new)
    return new


JudgeSetting = Annotated[JudgeName, BeforeValidator(lambda v: resolve_judge(v)
                                                     if isinstance(v, str) else v)]
"""A settings field holding a judge: an old name is read as the judge it stands for."""


def judge_help() -> str:
    """The ``--judge`` help text of every command: each judge with what it is."""
    return " ".join(f"{j.name}: {j.summary}." for j in JUDGES) + (
        " Old names: " + ", ".join(f"{a} = {n}" for a, n in JUDGE_ALIASES.items()) + ".")


def stored_judge_sql(column: str = "judge") -> str:
    """A ClickHouse expression giving a row's judge under today's names: rows stored before a
    rename (``stored_before``) read as the judge's name, so a dashboard's series, a per-judge
    level and the drop alert's baseline go on across it."""
    pairs = [(old, j.name) for j in JUDGES for old in j.stored_before]
    if not pairs:
        return column
    cases = ", ".join(f"{column} = '{old}', '{new}'" for old, new in pairs)
    return f"multiIf({cases}, {column})"
