"""Strict parsing of judge replies: one JSON object, validated per task with pydantic.

A reply is usable only if it is exactly one JSON object (optionally inside one Markdown code
fence, which some servers add even in JSON mode). Anything around it, or a second object, makes
it unparseable: a model that echoes JSON it found in the data cannot smuggle verdicts in front of
its own. Each task's part is validated on its own, so a bad ``context_used`` array does not void
good ``statement_support`` verdicts. Verdict arrays must be numbered 1..n in order with exactly n
entries for the n items asked about; anything else is ``verdicts_mismatch``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, Strict, ValidationError

from ...model import Reason

__all__ = ["ParseFailure", "TaskParsers", "parse_reply_object", "parse_task"]

# Not Literal[0, 1]: a Literal compares by equality, so it accepts True (True == 1) even in strict
# mode. A strict int rejects bools.
Bit = Annotated[int, Strict(), Field(ge=0, le=1)]


class _Strict(BaseModel):
    # strict: "1" or true are not 1; extra keys are tolerated (models add "reason" fields).
    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)


class _StatementSupport(_Strict):
    statement: int
    supported: Bit
    context: int | str | None = None  # auxiliary: which context; lenient on purpose


class _ContextUseful(_Strict):
    context: int
    useful: Bit


class _ContextUsed(_Strict):
    context: int
    used: Bit


class _Attributed(_Strict):
    statement: int
    attributed: Bit


class _InReference(_Strict):
    statement: int
    in_reference: Bit


class _InAnswer(_Strict):
    statement: int
    in_answer: Bit


class _Decompose(_Strict):
    statements: list[str] = Field(default_factory=list)


class _Questions(_Strict):
    questions: list[str]
    noncommittal: Bit


class _RefStatements(_Strict):
    reference_statements: list[str]


class _Rating(_Strict):
    rating: Literal[0, 1, 2]


class _Needed(_Strict):
    needed: list[int]


class _AspectVerdict(_Strict):
    criterion: str
    verdict: Bit


@dataclass(frozen=True)
class ParseFailure:
    """Why a task's part of a reply is unusable."""

    reason: Reason
    detail: str


_FENCE = re.compile(r"^```[a-zA-Z0-9_-]*\s*\n?(.*?)\n?```$", re.DOTALL)


def parse_reply_object(content: str | None) -> dict[str, Any] | ParseFailure:
    """The reply as a JSON object, or why not (always ``unparseable_judge_output``)."""
    if content is None or not content.strip():
        return ParseFailure(Reason.UNPARSEABLE_JUDGE_OUTPUT, "empty reply")
    text = content.strip()
    if m := _FENCE.match(text):
        text = m.group(1).strip()
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        return ParseFailure(Reason.UNPARSEABLE_JUDGE_OUTPUT, f"invalid JSON: {exc}")
    if not isinstance(obj, dict):
        return ParseFailure(Reason.UNPARSEABLE_JUDGE_OUTPUT, "reply is not a JSON object")
    return obj


def _validate(model: type[BaseModel], value: Any, where: str) -> Any:
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise _Bad(Reason.UNPARSEABLE_JUDGE_OUTPUT, f"{where}.{loc}: {first['msg']}") from None


class _Bad(Exception):
    def __init__(self, reason: Reason, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


def _array(obj: Mapping[str, Any], key: str) -> list[Any]:
    v = obj.get(key)
    if not isinstance(v, list):
        raise _Bad(Reason.UNPARSEABLE_JUDGE_OUTPUT, f"{key}: expected a JSON array")
    return v


def _verdicts(entries: list[Any], model: type[_Strict], index_key: str, bit_key: str,
              expected: int, where: str) -> list[int]:
    rows = [_validate(model, e, f"{where}[{i}]") for i, e in enumerate(entries)]
    if len(rows) != expected:
        raise _Bad(Reason.VERDICTS_MISMATCH,
                   f"{where}: {len(rows)} verdicts for {expected} items")
    got = [getattr(r, index_key) for r in rows]
    if got != list(range(1, expected + 1)):
        raise _Bad(Reason.VERDICTS_MISMATCH, f"{where}: numbered {got}, expected 1..{expected}")
    return [int(getattr(r, bit_key)) for r in rows]


def _strings(values: list[str], where: str) -> list[str]:
    out = [v.strip() for v in values]
    if any(not v for v in out):
        raise _Bad(Reason.UNPARSEABLE_JUDGE_OUTPUT, f"{where}: empty string")
    return out


# --- one parser per task: (reply object, counts of the items asked about) -> task value ---------

def _p_statements(obj: Mapping[str, Any], n: Mapping[str, int]) -> list[str]:
    return _strings(_validate(_Decompose, {"statements": _array(obj, "statements")},
                              "statements").statements, "statements")


def _p_questions(obj: Mapping[str, Any], n: Mapping[str, int]) -> dict[str, Any]:
    q = _validate(_Questions, {"questions": obj.get("questions"),
                               "noncommittal": obj.get("noncommittal")}, "questions")
    questions = _strings(q.questions, "questions")
    if len(questions) > n.get("questions", len(questions)):
        raise _Bad(Reason.VERDICTS_MISMATCH,
                   f"questions: {len(questions)} given, at most {n['questions']} asked")
    return {"questions": questions, "noncommittal": bool(q.noncommittal)}


def _p_ref_statements(obj: Mapping[str, Any], n: Mapping[str, int]) -> list[str]:
    return _strings(_validate(_RefStatements, {"reference_statements":
                                               _array(obj, "reference_statements")},
                              "reference_statements").reference_statements, "reference_statements")


def _p_support(obj: Mapping[str, Any], n: Mapping[str, int]) -> list[int]:
    return _verdicts(_array(obj, "statement_support"), _StatementSupport, "statement",
                     "supported", n["statements"], "statement_support")


def _p_useful(obj: Mapping[str, Any], n: Mapping[str, int]) -> list[int]:
    return _verdicts(_array(obj, "context_useful"), _ContextUseful, "context", "useful",
                     n["contexts"], "context_useful")


def _p_used(obj: Mapping[str, Any], n: Mapping[str, int]) -> list[int]:
    return _verdicts(_array(obj, "context_used"), _ContextUsed, "context", "used",
                     n["contexts"], "context_used")


def _p_attribution(obj: Mapping[str, Any], n: Mapping[str, int]) -> list[int]:
    return _verdicts(_array(obj, "reference_attribution"), _Attributed, "statement",
                     "attributed", n["reference_statements"], "reference_attribution")


def _p_correctness(obj: Mapping[str, Any], n: Mapping[str, int]) -> dict[str, list[int]]:
    c = obj.get("correctness")
    if not isinstance(c, dict):
        raise _Bad(Reason.UNPARSEABLE_JUDGE_OUTPUT, "correctness: expected a JSON object")
    return {
        "in_reference": _verdicts(_array(c, "answer"), _InReference, "statement",
                                  "in_reference", n["statements"], "correctness.answer"),
        "in_answer": _verdicts(_array(c, "reference"), _InAnswer, "statement", "in_answer",
                               n["reference_statements"], "correctness.reference"),
    }


def _p_rating(obj: Mapping[str, Any], n: Mapping[str, int]) -> int:
    return int(_validate(_Rating, {"rating": obj.get("rating")}, "rating").rating)


def _p_sentences(obj: Mapping[str, Any], n: Mapping[str, int]) -> list[int]:
    needed = _validate(_Needed, {"needed": _array(obj, "needed")}, "needed").needed
    total = n["sentences"]
    bad = [i for i in needed if not 1 <= i <= total]
    if bad:
        raise _Bad(Reason.VERDICTS_MISMATCH, f"needed: sentence numbers {bad} outside 1..{total}")
    return sorted(set(needed))


def _p_aspects(obj: Mapping[str, Any], n: Mapping[str, int]) -> dict[str, int]:
    rows = [_validate(_AspectVerdict, e, f"verdicts[{i}]")
            for i, e in enumerate(_array(obj, "verdicts"))]
    names = [r.criterion for r in rows]
    expected = list(n["criteria_names"])  # type: ignore[arg-type]
    if names != expected:
        raise _Bad(Reason.VERDICTS_MISMATCH, f"verdicts: criteria {names}, expected {expected}")
    return {r.criterion: int(r.verdict) for r in rows}


TaskParsers: dict[str, Callable[[Mapping[str, Any], Mapping[str, Any]], Any]] = {
    "statements": _p_statements,
    "questions": _p_questions,
    "reference_statements": _p_ref_statements,
    "statement_support": _p_support,
    "context_useful": _p_useful,
    "context_used": _p_used,
    "reference_attribution": _p_attribution,
    "correctness": _p_correctness,
    "rating": _p_rating,
    "sentences": _p_sentences,
    "aspects": _p_aspects,
}
"""Task name (as in the prompt files) -> parser of that task's part of a reply object."""


def parse_task(task: str, obj: Mapping[str, Any], counts: Mapping[str, Any]) -> Any:
    """The validated value of ``task`` in ``obj``, or a :class:`ParseFailure`. Never raises for
    bad model output; raises ``KeyError`` for an unknown task (a programming error)."""
    parser = TaskParsers[task]
    try:
        return parser(obj, counts)
    except _Bad as exc:
        return ParseFailure(exc.reason, exc.detail)
