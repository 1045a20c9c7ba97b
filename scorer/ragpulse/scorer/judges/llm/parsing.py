"""Strict parsing of judge replies: one JSON object, validated per task with pydantic.

A reply is usable only if it is exactly one JSON object (optionally inside one Markdown code
fence, which some servers add even in JSON mode). Anything around it, or a second object, makes
it unparseable: a model that echoes JSON it found in the data cannot smuggle verdicts in front of
its own. Each task's part is validated on its own, so a bad ``context_used`` array does not void
good ``claims`` verdicts. Verdict arrays must be numbered 1..n in order with exactly n
entries for the n items asked about; anything else is ``verdicts_mismatch``.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, Strict, ValidationError

from ...model import Reason

__all__ = ["ParseFailure", "TaskParsers", "parse_reply_object", "parse_task", "response_schema",
           "strip_reasoning"]

# Not Literal[0, 1]: a Literal compares by equality, so it accepts True (True == 1) even in strict
# mode. A strict int rejects bools.
Bit = Annotated[int, Strict(), Field(ge=0, le=1)]


class _Strict(BaseModel):
    # strict: "1" or true are not 1; extra keys are tolerated (models add "reason" fields).
    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)


class _Claim(_Strict):
    statement: str
    reason: str = ""  # asked before the verdict (reason-then-verdict); not used in scores
    contexts: list[int] = Field(default_factory=list)  # the contexts it rests on (auxiliary)
    supported: Bit


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


class _ContextUsefulOut(_Strict):
    context_useful: list[_ContextUseful]


class _ContextUsedOut(_Strict):
    context_used: list[_ContextUsed]


class _ClaimsOut(_Strict):
    claims: list[_Claim]


class _AttributionOut(_Strict):
    reference_attribution: list[_Attributed]


class _Correctness(_Strict):
    answer: list[_InReference]
    reference: list[_InAnswer]


class _CorrectnessOut(_Strict):
    correctness: _Correctness


class _AspectsOut(_Strict):
    verdicts: list[_AspectVerdict]


# The reply shape of each task, from the same models the parsers validate with: the source of the
# ``json_schema`` response format.
TASK_MODELS: dict[str, type[BaseModel]] = {
    "statements": _Decompose,
    "questions": _Questions,
    "reference_statements": _RefStatements,
    "claims": _ClaimsOut,
    "context_useful": _ContextUsefulOut,
    "context_used": _ContextUsedOut,
    "reference_attribution": _AttributionOut,
    "correctness": _CorrectnessOut,
    "rating": _Rating,
    "sentences": _Needed,
    "aspects": _AspectsOut,
}


def _closed(node: Any) -> Any:
    """A JSON schema as strict structured outputs want it: every object closed
    (``additionalProperties: false``) with all its properties required, no defaults."""
    if isinstance(node, list):
        return [_closed(x) for x in node]
    if not isinstance(node, dict):
        return node
    out = {k: _closed(v) for k, v in node.items() if k != "default"}
    if out.get("type") == "object" and "properties" in out:
        out["additionalProperties"] = False
        out["required"] = list(out["properties"])
    return out


def response_schema(name: str, tasks: Sequence[str]) -> dict[str, Any]:
    """The ``response_format`` of type ``json_schema`` for a request asking ``tasks``: one
    object with the keys of every task, built from the parsers' pydantic models. Cached: the
    same dict (treat it as read-only) for the same name and tasks."""
    return _response_schema(name, tuple(tasks))


@functools.lru_cache(maxsize=256)
def _response_schema(name: str, tasks: tuple[str, ...]) -> dict[str, Any]:
    props: dict[str, Any] = {}
    defs: dict[str, Any] = {}
    for t in tasks:
        schema = TASK_MODELS[t].model_json_schema(ref_template="#/$defs/{model}")
        defs.update(schema.pop("$defs", {}))
        props.update(schema["properties"])
    root: dict[str, Any] = {"type": "object", "properties": props}
    if defs:
        root["$defs"] = defs
    safe = re.sub(r"[^a-zA-Z0-9_-]", "_", name)[:64]
    return {"type": "json_schema",
            "json_schema": {"name": safe, "strict": True, "schema": _closed(root)}}


_THINK = re.compile(r"^\s*<think>.*?</think>", re.DOTALL)


def strip_reasoning(content: str | None) -> str | None:
    """``content`` without a leading ``<think>...</think>`` block (reasoning models served
    without a reasoning parser, e.g. DeepSeek-R1 or Qwen3 on vLLM/Ollama, put their reasoning
    there). An unclosed ``<think>`` (the reply ran out of tokens while reasoning) leaves
    nothing."""
    if content is None:
        return None
    stripped = _THINK.sub("", content, count=1)
    if stripped.lstrip().startswith("<think>"):
        return ""
    return stripped


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
    except RecursionError:  # "[[[[..." thousands deep (a reply steered by the text it judges)
        return ParseFailure(Reason.UNPARSEABLE_JUDGE_OUTPUT, "invalid JSON: nested too deeply")
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


_NOT_TEXT = re.compile(r"[\W_]+", re.UNICODE)


def _bigrams(text: str) -> set[str]:
    t = _NOT_TEXT.sub("", text.lower())
    return {t[i:i + 2] for i in range(len(t) - 1)}


DRAWN_FROM_ANSWER = 0.5
"""Least share of a claim's character bigrams that must occur in the question + answer."""


def _p_claims(obj: Mapping[str, Any], n: Mapping[str, Any]) -> dict[str, list[Any]]:
    rows = [_validate(_Claim, e, f"claims[{i}]") for i, e in enumerate(_array(obj, "claims"))]
    statements = _strings([r.statement for r in rows], "claims.statement")
    # The statements come from the same reply as their verdicts, so no count can be checked
    # against them; instead each must be drawn from the answer (restored subjects from the
    # question): character bigrams, so it works without spaces (CJK) and rejects translations
    # and verdicts an obeyed injection invents for statements the answer never made.
    source = _bigrams(str(n.get("source_text", "")))
    if source:
        for i, st in enumerate(statements, start=1):
            grams = _bigrams(st)
            if not grams or len(grams & source) < DRAWN_FROM_ANSWER * len(grams):
                raise _Bad(Reason.VERDICTS_MISMATCH,
                           f"claims[{i}]: statement not drawn from the answer: {st[:80]!r}")
    k = int(n.get("contexts", 0))
    return {"statements": statements, "verdicts": [int(r.supported) for r in rows],
            "contexts": [sorted({c for c in r.contexts if 1 <= c <= k}) for r in rows],
            "reasons": [r.reason for r in rows]}


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
    "claims": _p_claims,
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
