"""Judges turn samples into findings: an LLM over any OpenAI-compatible API, or local models.

:func:`build_judge` makes one from user-facing options; :class:`Judge` is the interface the
evaluator calls.
"""

from .base import BUILTIN_CRITERIA, Criterion, Judge, Needs
from .factory import JudgeChoice, build_judge

__all__ = [
    "BUILTIN_CRITERIA",
    "Criterion",
    "Judge",
    "JudgeChoice",
    "Needs",
    "build_judge",
]
