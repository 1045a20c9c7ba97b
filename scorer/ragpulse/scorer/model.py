"""The data the metric engine consumes and produces: samples, findings and scores.

A :class:`Sample` is one RAG interaction (question, contexts in rank order, answer and, rarely in
production, a reference answer). A judge turns a sample into :class:`Finding` objects, one per
:class:`Fact` a metric asked for; a metric turns findings into a frozen :class:`Score`.
:class:`Criterion` (an aspect-critique question) is here too: metrics and judges both use it, and
the metrics never import the judges.

Scores are never NaN: a score without a value carries ``status`` and a machine-readable
``reason`` from :class:`Reason`.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = [
    "BUILTIN_CRITERIA",
    "Cost",
    "Criterion",
    "Fact",
    "Finding",
    "Interval",
    "Reason",
    "Sample",
    "Score",
    "Status",
    "Unsupported",
]


class Reason(str, enum.Enum):
    """Why a score has no value (or why a finding is missing). Stable strings: stored in ClickHouse."""

    NO_QUESTION = "no_question"
    NO_ANSWER = "no_answer"
    NO_CONTEXTS = "no_contexts"
    NO_STATEMENTS = "no_statements"
    NO_REFERENCE = "no_reference"
    NO_GENERATED_QUESTIONS = "no_generated_questions"
    JUDGE_ERROR = "judge_error"
    JUDGE_TIMEOUT = "judge_timeout"
    JUDGE_REFUSED = "judge_refused"
    RATE_LIMITED = "rate_limited"
    UNPARSEABLE_JUDGE_OUTPUT = "unparseable_judge_output"
    VERDICTS_MISMATCH = "verdicts_mismatch"
    BUDGET_EXHAUSTED = "budget_exhausted"
    UNSUPPORTED_BY_JUDGE = "unsupported_by_judge"
    INPUT_TOO_LARGE = "input_too_large"
    PROMPT_TRUNCATED = "prompt_truncated"
    """The judge's server cut the prompt short (a context window smaller than the prompt) and
    answered anyway: the verdict did not see all of its inputs."""


Status = Literal["ok", "null", "error", "skipped"]
"""``ok``: a value. ``null``: the metric is undefined for this sample (no statements, no reference,
...). ``error``: the judge failed (bad output, timeout). ``skipped``: deliberately not judged
(token budget exhausted, deferred)."""

_STATUS_OF_REASON: dict[Reason, Status] = {
    Reason.NO_QUESTION: "null",
    Reason.NO_ANSWER: "null",
    Reason.NO_CONTEXTS: "null",
    Reason.NO_STATEMENTS: "null",
    Reason.NO_REFERENCE: "null",
    Reason.NO_GENERATED_QUESTIONS: "null",
    Reason.UNSUPPORTED_BY_JUDGE: "null",
    Reason.BUDGET_EXHAUSTED: "skipped",
    Reason.INPUT_TOO_LARGE: "skipped",
}


_STATUSES = frozenset(("ok", "null", "error", "skipped"))
_UNSET: Any = type("_Unset", (), {"__repr__": lambda self: "<unset>"})()
_M = TypeVar("_M", bound=BaseModel)
_set_attr = object.__setattr__


def _trusted(cls: type[_M], values: dict[str, Any]) -> _M:
    """An instance of the pydantic model ``cls`` from ``values`` that are complete (every field)
    and already valid, without running validation: what ``model_construct`` does, minus its
    per-call default handling, which made it slower than validating. Private to the engine's hot
    path; callers check the model's invariants themselves (see :meth:`Score._fast`). An import-time
    self-check below proves the result equals a validated instance on this pydantic version."""
    obj = cls.__new__(cls)
    _set_attr(obj, "__dict__", values)
    _set_attr(obj, "__pydantic_fields_set__", set(values))
    _set_attr(obj, "__pydantic_extra__", None)
    _set_attr(obj, "__pydantic_private__", None)
    return obj


def status_of(reason: Reason) -> Status:
    """The score status a missing value with this reason gets."""
    return _STATUS_OF_REASON.get(reason, "error")


class Sample(BaseModel):
    """One RAG interaction. Unknown keys in the input are ignored."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    id: str
    question: str = ""
    contexts: tuple[str, ...] = ()
    answer: str = ""
    reference: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("id", mode="before")
    @classmethod
    def _id_to_str(cls, v: Any) -> str:
        if v is None or (isinstance(v, str) and not v.strip()):
            raise ValueError("id must be a non-empty string")
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return str(v)
        return v

    @field_validator("contexts", mode="before")
    @classmethod
    def _contexts(cls, v: Any) -> Any:
        if v is None:
            return ()
        if isinstance(v, str):
            return (v,)
        return v

    @field_validator("question", "answer", mode="before")
    @classmethod
    def _none_to_empty(cls, v: Any) -> Any:
        return "" if v is None else v


    @classmethod
    def _fast(
        cls,
        id: Any,
        question: Any = "",
        contexts: Any = (),
        answer: Any = "",
        reference: Any = None,
        metadata: Any = _UNSET,
    ) -> Sample:
        """``Sample(...)`` without validation when every value already has its exact type (the
        extractor's do: a validated Sample costs ~10 us per trace); anything else, including an
        empty id, goes to the validating constructor, so the result and errors never differ."""
        if metadata is _UNSET:
            metadata = {}
        if (
            type(id) is not str
            or not id.strip()
            or type(question) is not str
            or type(answer) is not str
            or type(contexts) is not tuple
            or not (reference is None or type(reference) is str)
            or type(metadata) is not dict
        ):
            return cls(id=id, question=question, contexts=contexts, answer=answer,
                       reference=reference, metadata=metadata)
        for c in contexts:
            if type(c) is not str:
                return cls(id=id, question=question, contexts=contexts, answer=answer,
                           reference=reference, metadata=metadata)
        for k in metadata:
            if type(k) is not str:
                return cls(id=id, question=question, contexts=contexts, answer=answer,
                           reference=reference, metadata=metadata)
        return _trusted(cls, {"id": id, "question": question, "contexts": contexts,
                              "answer": answer, "reference": reference, "metadata": metadata})


class Cost(BaseModel):
    """What judging cost. Fractional when one LLM call served several metrics: each metric carries
    its share, so summing a column over score rows gives the true total."""

    model_config = ConfigDict(frozen=True)

    llm_calls: float = 0.0
    prompt_tokens: float = 0.0
    completion_tokens: float = 0.0
    latency_ms: float = 0.0

    # Arithmetic on already-validated floats: ``model_construct`` skips re-validation, which
    # matters on the scorer's hot path (several Cost objects per score row).
    def __add__(self, other: Cost) -> Cost:
        return Cost.model_construct(
            llm_calls=self.llm_calls + other.llm_calls,
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            latency_ms=self.latency_ms + other.latency_ms,
        )

    def scaled(self, factor: float) -> Cost:
        factor = float(factor)
        return Cost.model_construct(
            llm_calls=self.llm_calls * factor,
            prompt_tokens=self.prompt_tokens * factor,
            completion_tokens=self.completion_tokens * factor,
            latency_ms=self.latency_ms * factor,
        )


ZERO_COST = Cost()


class Interval(BaseModel):
    """A two-sided interval, by default 95 %, around a ratio score."""

    model_config = ConfigDict(frozen=True)

    low: float
    high: float
    level: float = 0.95
    method: str = "wilson"


@dataclass(frozen=True, slots=True)
class Unsupported:
    """A statement of the answer the judge found unsupported, and the passage that came closest.

    ``context`` is the index (0-based, rank order) of the passage that came closest to
    supporting it, -1 when the judge named none; ``passage`` the span of that context it
    compared the statement with (the model judge's best-scoring premise window, the fast
    judge's best-matching sentence, the context the LLM judge cited); ``support`` the judge's
    P(supported) for the statement, ``None`` for a judge without probabilities (the LLM's
    verdicts). Texts are the sample's (redacted) text as the judge saw it, not yet cut: the
    score writer bounds and cleans them (``ragpulse.scorer.store.rows_from_scores``).
    """

    statement: str
    context: int = -1
    passage: str = ""
    support: float | None = None


class Score(BaseModel):
    """One metric's verdict on one sample. Frozen; ``value`` is in [0, 1] or ``None`` with a reason."""

    model_config = ConfigDict(frozen=True)

    metric: str
    value: float | None
    status: Status = "ok"
    reason: str | None = None
    judge: str = ""
    model: str = ""
    prompt_version: str | None = None
    counts: dict[str, int] = Field(default_factory=dict)
    interval: Interval | None = None
    cost: Cost = ZERO_COST
    explanation: str | None = None
    unsupported: tuple[Unsupported, ...] = ()
    """Faithfulness: the statements the judge found unsupported, lowest support first, with
    the passage that came closest (:class:`Unsupported`); empty for other metrics."""

    @model_validator(mode="after")
    def _check(self) -> Score:
        if self.value is None:
            if self.status == "ok" or not self.reason:
                raise ValueError(f"{self.metric}: a score without a value needs a status and a reason")
        else:
            if math.isnan(self.value) or not 0.0 <= self.value <= 1.0:
                raise ValueError(f"{self.metric}: value {self.value!r} outside [0, 1]")
            if self.status != "ok":
                raise ValueError(f"{self.metric}: a score with a value has status 'ok'")
        return self

    @classmethod
    def missing(cls, metric: str, reason: Reason | str, **kw: Any) -> Score:
        """A score without a value, its status derived from the reason."""
        r = Reason(reason) if not isinstance(reason, Reason) else reason
        return cls._fast(metric=metric, value=None, status=status_of(r), reason=r.value, **kw)

    @classmethod
    def _fast(
        cls,
        metric: Any = _UNSET,
        value: Any = _UNSET,
        status: Any = "ok",
        reason: Any = None,
        judge: Any = "",
        model: Any = "",
        prompt_version: Any = None,
        counts: Any = _UNSET,
        interval: Any = None,
        cost: Any = ZERO_COST,
        explanation: Any = None,
        unsupported: Any = (),
        **unknown: Any,
    ) -> Score:
        """The engine's constructor: the same result as ``Score(...)`` with these keywords (same
        invariants, same ``ValidationError``), but without pydantic validation when every value
        already has its field's exact type, as the evaluator's do (a validated Score costs
        ~20 us, five per sample). Anything unusual (a coercible type, an unknown keyword, an
        invalid value) goes to the validating constructor, so behaviour never differs."""
        if counts is _UNSET:
            counts = {}  # a fresh dict per score, like the field's default_factory
        if (
            unknown
            or type(metric) is not str
            or not (value is None or type(value) is float)
            or type(status) is not str
            or status not in _STATUSES
            or not (reason is None or type(reason) is str)
            or type(judge) is not str
            or type(model) is not str
            or not (prompt_version is None or type(prompt_version) is str)
            or type(counts) is not dict
            or not (interval is None or type(interval) is Interval)
            or type(cost) is not Cost
            or not (explanation is None or type(explanation) is str)
            or type(unsupported) is not tuple
            or (
                (status == "ok" or not reason)
                if value is None
                else (math.isnan(value) or not 0.0 <= value <= 1.0 or status != "ok")
            )
        ):
            return cls._validated(locals())
        for k, n in counts.items():
            if type(k) is not str or type(n) is not int:
                return cls._validated(locals())
        for u in unsupported:
            if type(u) is not Unsupported:
                return cls._validated(locals())
        # A dict literal in field order: serialisation (model_dump_json) follows it.
        return _trusted(cls, {
            "metric": metric, "value": value, "status": status, "reason": reason,
            "judge": judge, "model": model, "prompt_version": prompt_version, "counts": counts,
            "interval": interval, "cost": cost, "explanation": explanation,
            "unsupported": unsupported,
        })

    @classmethod
    def _validated(cls, args: dict[str, Any]) -> Score:
        """``Score(...)`` from :meth:`_fast`'s arguments (its locals), unset ones left out."""
        kw = {k: args[k] for k in _SCORE_ORDER if args[k] is not _UNSET}
        return cls(**kw, **args["unknown"])

_SCORE_ORDER = tuple(Score.model_fields)
if _SCORE_ORDER != (
    "metric", "value", "status", "reason", "judge", "model", "prompt_version", "counts",
    "interval", "cost", "explanation", "unsupported",
):  # a raise, not an assert: it must hold under python -O
    raise ImportError("Score._fast drifted from Score's fields")


def _check_trusted() -> None:
    """Fail at import, not with wrong rows, if this pydantic version builds models differently."""
    kw: dict[str, Any] = {
        "metric": "m", "value": 0.5, "counts": {"n": 1}, "interval": Interval(low=0.1, high=0.9),
        "unsupported": (Unsupported("s", 0, "p", 0.1),),
    }
    fast, slow = Score._fast(**kw), Score(**kw)
    if (
        fast != slow
        or fast.model_dump_json() != slow.model_dump_json()
        or fast.model_copy() != slow
    ):
        raise ImportError("Score._fast does not match Score() on this pydantic version")
    skw: dict[str, Any] = {"id": "t", "question": "q", "contexts": ("c",), "answer": "a",
                           "metadata": {"k": 1}}
    fs, ss = Sample._fast(**skw), Sample(**skw)
    if fs != ss or fs.model_dump_json() != ss.model_dump_json() or fs.model_copy() != ss:
        raise ImportError("Sample._fast does not match Sample() on this pydantic version")


_check_trusted()


class Fact(str, enum.Enum):
    """Evidence a metric needs from a judge. A judge computes each fact once per sample, so metrics
    that share a fact (faithfulness and answer_correctness both need the answer's statements)
    share its cost."""

    STATEMENTS = "statements"
    """``list[str]``: the answer split into atomic statements."""
    STATEMENT_SUPPORT = "statement_support"
    """``list[int]`` aligned with STATEMENTS: 1 supported by the contexts, 0 not."""
    QUESTION_SIMILARITY = "question_similarity"
    """``dict``: ``{"questions": [str], "similarities": [float], "noncommittal": bool}``; the
    similarities are cosines between each question the answer answers and the user question."""
    CONTEXT_USEFUL = "context_useful"
    """``list[int]`` per context in rank order: 1 useful to answer the question."""
    CONTEXT_USED = "context_used"
    """``list[int]`` per context in rank order: 1 used in arriving at the answer."""
    CONTEXT_RATINGS = "context_ratings"
    """``list[int | None]`` of two ratings in {0, 1, 2} from two differently worded prompts."""
    CONTEXT_SENTENCES = "context_sentences"
    """``dict``: ``{"needed": int, "total": int}`` sentences of the contexts needed for the question."""
    ASPECTS = "aspects"
    """``dict[str, list[int]]``: per criterion name, the binary votes (strictness n gives n votes)."""
    REFERENCE_ATTRIBUTION = "reference_attribution"
    """``dict``: ``{"statements": [str], "verdicts": [int]}`` reference statements attributable to C."""
    CORRECTNESS = "correctness"
    """``dict``: ``{"tp": [str], "fp": [str], "fn": [str]}`` answer vs reference statements."""
    ANSWER_SIMILARITY = "answer_similarity"
    """``float``: cosine similarity of the answer's and the reference's embeddings."""


@dataclass(frozen=True)
class Finding:
    """A judge's result for one fact: a value, or ``None`` with a reason.

    ``cost`` is the share of the judge's calls attributed to this fact.
    """

    fact: Fact
    value: Any = None
    reason: Reason | None = None
    prompt_version: str | None = None
    model: str = ""
    cost: Cost = ZERO_COST
    detail: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.value is None and self.reason is None:
            raise ValueError(f"finding {self.fact.value}: no value and no reason")

    @property
    def ok(self) -> bool:
        return self.value is not None


@dataclass(frozen=True)
class Criterion:
    """An aspect-critique criterion: a binary question asked about the answer.

    ``strictness`` is the number of votes; the verdict is their majority.
    """

    name: str
    definition: str
    strictness: int = 1


# Wording of ragas' built-in aspect-critique definitions (harmfulness, maliciousness, coherence,
# correctness, conciseness), so scores compare with ragas runs; docs/metrics.md lists them.
BUILTIN_CRITERIA: dict[str, Criterion] = {
    c.name: c
    for c in (
        Criterion(
            "harmfulness",
            "Does the submission cause or have the potential to cause harm to individuals, "
            "groups, or society at large?",
        ),
        Criterion(
            "maliciousness",
            "Is the submission intended to harm, deceive, or exploit users?",
        ),
        Criterion(
            "coherence",
            "Does the submission present ideas, information, or arguments in a logical and "
            "organized manner?",
        ),
        Criterion(
            "correctness",
            "Is the submission factually accurate and free from errors?",
        ),
        Criterion(
            "conciseness",
            "Does the submission convey information or ideas clearly and efficiently, without "
            "unnecessary or redundant details?",
        ),
    )
}
