"""The metrics, as docs/metrics.md defines them: pure functions of a judge's findings.

Each :class:`Metric` declares the :class:`Fact` values it needs and what the sample must carry;
``compute`` turns the findings into a :class:`Score` value (the evaluator adds judge, model and
cost). Nothing here calls a model, so every formula is unit-testable with exact numbers.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from .model import BUILTIN_CRITERIA, Criterion, Fact, Finding, Reason, Sample, Score, Unsupported
from .stats import average_precision, clamp01, wilson_interval

log = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_METRICS",
    "EVIDENCE",
    "EXPECTED_SHARE",
    "METRICS",
    "UNSUPPORTED_KEPT",
    "Metric",
    "MetricResult",
    "answer_correctness_value",
    "aspect_metric",
    "resolve_metrics",
    "unsupported_statements",
]


@dataclass(frozen=True)
class MetricResult:
    """What a metric computed: a value (or a reason), the counts behind it and an interval."""

    value: float | None
    reason: Reason | None = None
    counts: dict[str, int] = field(default_factory=dict)
    interval_of: tuple[float, float] | None = None  # (successes, n) for a Wilson interval
    explanation: str | None = None
    unsupported: tuple[Unsupported, ...] = ()


Compute = Callable[[Sample, Mapping[Fact, Finding]], MetricResult]


@dataclass(frozen=True)
class Metric:
    """A named metric: the facts it needs, what the sample must carry, and its formula."""

    name: str
    facts: tuple[Fact, ...]
    compute: Compute
    needs_question: bool = False
    needs_contexts: bool = False
    needs_answer: bool = False
    needs_reference: bool = False
    criterion: Criterion | None = None
    description: str = ""
    superseded_by: str | None = None  # a legacy metric: kept for comparability, not a default

    def precondition(self, sample: Sample) -> Reason | None:
        """The reason this metric is undefined for ``sample``, or ``None`` when it can be judged."""
        if self.needs_reference and not (sample.reference and sample.reference.strip()):
            return Reason.NO_REFERENCE
        if self.needs_question and not sample.question.strip():
            return Reason.NO_QUESTION
        if self.needs_contexts and not any(c.strip() for c in sample.contexts):
            return Reason.NO_CONTEXTS
        if self.needs_answer and not sample.answer.strip():
            return Reason.NO_ANSWER
        return None


def _first_missing(findings: Mapping[Fact, Finding], *facts: Fact) -> Reason | None:
    for f in facts:
        finding = findings.get(f)
        if finding is None:
            return Reason.JUDGE_ERROR
        if not finding.ok:
            return finding.reason or Reason.JUDGE_ERROR
    return None


def _ratio(successes: int, n: int, empty: Reason, names: tuple[str, str]) -> MetricResult:
    if n == 0:
        return MetricResult(None, empty, counts={names[0]: 0, names[1]: 0})
    return MetricResult(
        successes / n,
        counts={names[0]: n, names[1]: successes},
        interval_of=(successes, n),
    )


def _faithfulness(sample: Sample, f: Mapping[Fact, Finding]) -> MetricResult:
    if (r := _first_missing(f, Fact.STATEMENTS)) is not None:
        return MetricResult(None, r)
    statements = f[Fact.STATEMENTS].value
    if not statements:
        return MetricResult(None, Reason.NO_STATEMENTS, counts={"statements": 0, "supported": 0})
    if (r := _first_missing(f, Fact.STATEMENT_SUPPORT)) is not None:
        return MetricResult(None, r, counts={"statements": len(statements)})
    support = f[Fact.STATEMENT_SUPPORT]
    verdicts = [int(bool(v)) for v in support.value]
    if len(verdicts) != len(statements):
        return MetricResult(None, Reason.VERDICTS_MISMATCH, counts={"statements": len(statements)})
    probs = _probabilities(support.extra.get("probabilities"), len(verdicts))
    if not support.extra.get(EXPECTED_SHARE):
        result = _ratio(sum(verdicts), len(verdicts), Reason.NO_STATEMENTS,
                        ("statements", "supported"))
        return replace(result, unsupported=unsupported_statements(statements, verdicts, probs,
                                                                  support.extra.get(EVIDENCE)))
    if probs is None:  # the judge promised one probability per statement: its bug, not a NULL
        return MetricResult(None, Reason.VERDICTS_MISMATCH, counts={"statements": len(statements)},
                            explanation="expected_share set without one probability in [0, 1] "
                                        "per statement")
    expected = sum(probs)
    n = len(probs)
    return MetricResult(
        expected / n,
        counts={"statements": n, "supported": sum(verdicts)},
        interval_of=(expected, n),
        explanation=f"expected share: sum of P(supported) {expected:.2f} / {n} statements",
        unsupported=unsupported_statements(statements, verdicts, probs,
                                           support.extra.get(EVIDENCE)),
    )


EVIDENCE = "evidence"
"""``Finding.extra`` key of a ``STATEMENT_SUPPORT`` finding: one entry per statement, ``None``
or ``(context index, passage)``: the context (0-based, rank order) and the span of it that came
closest to supporting the statement, as the judge compared them (the model judge's
best-scoring premise window, the fast judge's best-matching sentence, the context the LLM judge
cited). A judge may fill it for its unsupported statements only."""

UNSUPPORTED_KEPT = 20
"""At most this many unsupported statements travel with a faithfulness score (the score writer
stores fewer: ``write.max_unsupported``)."""


def unsupported_statements(statements: Sequence[object], verdicts: Sequence[int],
                           probs: Sequence[float] | None,
                           evidence: object) -> tuple[Unsupported, ...]:
    """The statements the judge found unsupported (verdict 0: P(supported) below the judge's
    threshold, or the LLM's "not supported"), lowest P first (the answer's order among equal P
    and for a judge without probabilities), at most :data:`UNSUPPORTED_KEPT`, each with the
    passage of ``evidence`` (:data:`EVIDENCE`; context -1 and no passage where it names none or
    is malformed)."""
    n = len(verdicts)
    rows = evidence if isinstance(evidence, (list, tuple)) and len(evidence) == n else [None] * n
    order = [i for i in range(n) if not verdicts[i]]
    if probs is not None:
        order.sort(key=lambda i: probs[i])
    out: list[Unsupported] = []
    for i in order[:UNSUPPORTED_KEPT]:
        ev = rows[i]
        context, passage = -1, ""
        if (isinstance(ev, (list, tuple)) and len(ev) == 2 and type(ev[0]) is int
                and ev[0] >= 0 and isinstance(ev[1], str)):
            context, passage = ev[0], ev[1]
        out.append(Unsupported(str(statements[i]), context, passage,
                               None if probs is None else round(float(probs[i]), 4)))
    return tuple(out)


EXPECTED_SHARE = "expected_share"
"""``Finding.extra`` key of a ``STATEMENT_SUPPORT`` finding. A judge whose verdicts come from
calibrated probabilities sets it to ``True`` and stores ``extra["probabilities"]`` (one
P(supported) in [0, 1] per statement). Faithfulness is then the *expected* share of supported
statements, ``sum(P) / n``: the same definition (supported / statements) with the detector's
uncertainty kept instead of thrown away by the threshold, of which binary verdicts (an LLM
judge's) are the special case P in {0, 1}. The counts stay the thresholded verdicts
(``supported`` = statements at or above the judge's threshold) and the Wilson interval is taken
at ``sum(P)`` successes out of ``n``, so it is centred on the value and its width still comes
from the statement count. Without the key the value is the verdict share, as before."""


def _probabilities(raw: object, n: int) -> list[float] | None:
    """``raw`` as ``n`` finite floats in [0, 1], or ``None`` when it is anything else."""
    if not isinstance(raw, (list, tuple)) or len(raw) != n:
        return None
    out: list[float] = []
    for p in raw:
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
            return None  # NaN fails the range check too
        out.append(float(p))
    return out


def _answer_relevancy(sample: Sample, f: Mapping[Fact, Finding]) -> MetricResult:
    if (r := _first_missing(f, Fact.QUESTION_SIMILARITY)) is not None:
        return MetricResult(None, r)
    qs = f[Fact.QUESTION_SIMILARITY].value
    sims: Sequence[float] = qs.get("similarities") or []
    if qs.get("noncommittal"):
        return MetricResult(0.0, counts={"questions": len(sims), "noncommittal": 1},
                            explanation="non-committal answer")
    if not sims:
        return MetricResult(None, Reason.NO_GENERATED_QUESTIONS, counts={"questions": 0})
    return MetricResult(clamp01(sum(sims) / len(sims)), counts={"questions": len(sims), "noncommittal": 0})


def _ap_metric(fact: Fact, hit_name: str) -> Compute:
    def compute(sample: Sample, f: Mapping[Fact, Finding]) -> MetricResult:
        if (r := _first_missing(f, fact)) is not None:
            return MetricResult(None, r)
        verdicts = [int(bool(v)) for v in f[fact].value]
        if not verdicts:
            return MetricResult(None, Reason.NO_CONTEXTS, counts={"contexts": 0, hit_name: 0})
        return MetricResult(
            average_precision(verdicts), counts={"contexts": len(verdicts), hit_name: sum(verdicts)}
        )

    return compute


def _context_relevance(sample: Sample, f: Mapping[Fact, Finding]) -> MetricResult:
    if (r := _first_missing(f, Fact.CONTEXT_RATINGS)) is not None:
        return MetricResult(None, r)
    ratings = [int(x) for x in f[Fact.CONTEXT_RATINGS].value if x is not None and 0 <= int(x) <= 2]
    if not ratings:
        return MetricResult(None, Reason.UNPARSEABLE_JUDGE_OUTPUT, counts={"ratings": 0})
    return MetricResult(sum(ratings) / len(ratings) / 2.0, counts={"ratings": len(ratings)})


def _context_relevancy(sample: Sample, f: Mapping[Fact, Finding]) -> MetricResult:
    if (r := _first_missing(f, Fact.CONTEXT_SENTENCES)) is not None:
        return MetricResult(None, r)
    v = f[Fact.CONTEXT_SENTENCES].value
    needed, total = int(v["needed"]), int(v["total"])
    return _ratio(min(needed, total), total, Reason.NO_CONTEXTS, ("sentences", "needed"))


def _context_recall(sample: Sample, f: Mapping[Fact, Finding]) -> MetricResult:
    if (r := _first_missing(f, Fact.REFERENCE_ATTRIBUTION)) is not None:
        return MetricResult(None, r)
    v = f[Fact.REFERENCE_ATTRIBUTION].value
    statements, verdicts = v["statements"], [int(bool(x)) for x in v["verdicts"]]
    if len(statements) != len(verdicts):
        return MetricResult(None, Reason.VERDICTS_MISMATCH)
    return _ratio(sum(verdicts), len(verdicts), Reason.NO_STATEMENTS,
                  ("reference_statements", "attributed"))


def _answer_similarity(sample: Sample, f: Mapping[Fact, Finding]) -> MetricResult:
    if (r := _first_missing(f, Fact.ANSWER_SIMILARITY)) is not None:
        return MetricResult(None, r)
    return MetricResult(clamp01(float(f[Fact.ANSWER_SIMILARITY].value)))


def answer_correctness_value(
    tp: int, fp: int, fn: int, similarity: float, weights: tuple[float, float] = (0.75, 0.25)
) -> float:
    """``w_f * F1 + w_s * similarity`` with F1 = TP / (TP + 0.5 (FP + FN)), 0 when TP = 0.

    Weights are normalized to sum to 1.
    """
    f1 = tp / (tp + 0.5 * (fp + fn)) if tp > 0 else 0.0
    wf, ws = weights
    total = wf + ws
    return clamp01((wf * f1 + ws * clamp01(similarity)) / total)


def make_answer_correctness(weights: tuple[float, float] = (0.75, 0.25)) -> Compute:
    def compute(sample: Sample, f: Mapping[Fact, Finding]) -> MetricResult:
        if (r := _first_missing(f, Fact.CORRECTNESS, Fact.ANSWER_SIMILARITY)) is not None:
            return MetricResult(None, r)
        c = f[Fact.CORRECTNESS].value
        tp, fp, fn = len(c["tp"]), len(c["fp"]), len(c["fn"])
        if tp + fp + fn == 0:
            return MetricResult(None, Reason.NO_STATEMENTS, counts={"tp": 0, "fp": 0, "fn": 0})
        sim = float(f[Fact.ANSWER_SIMILARITY].value)
        return MetricResult(
            answer_correctness_value(tp, fp, fn, sim, weights),
            counts={"tp": tp, "fp": fp, "fn": fn},
        )

    return compute


def aspect_metric(criterion: Criterion) -> Metric:
    """The ``aspect_critique:<name>`` metric for one criterion: the majority of its votes."""

    def compute(sample: Sample, f: Mapping[Fact, Finding]) -> MetricResult:
        if (r := _first_missing(f, Fact.ASPECTS)) is not None:
            return MetricResult(None, r)
        votes = [int(bool(v)) for v in (f[Fact.ASPECTS].value.get(criterion.name) or [])]
        if not votes:
            reason = f[Fact.ASPECTS].extra.get("reasons", {}).get(criterion.name)
            return MetricResult(None, Reason(reason) if reason else Reason.JUDGE_ERROR)
        yes = sum(votes)
        return MetricResult(
            1.0 if yes * 2 > len(votes) else 0.0, counts={"votes": len(votes), "yes": yes}
        )

    return Metric(
        name=f"aspect_critique:{criterion.name}",
        facts=(Fact.ASPECTS,),
        compute=compute,
        needs_answer=True,
        criterion=criterion,
        description=f"aspect critique: {criterion.definition}",
    )


_BASE: tuple[Metric, ...] = (
    Metric("faithfulness", (Fact.STATEMENTS, Fact.STATEMENT_SUPPORT), _faithfulness,
           needs_contexts=True, needs_answer=True,
           description="share of the answer's statements supported by the contexts"),
    Metric("answer_relevancy", (Fact.QUESTION_SIMILARITY,), _answer_relevancy,
           needs_question=True, needs_answer=True,
           description="mean cosine between the question and questions the answer answers"),
    Metric("context_precision", (Fact.CONTEXT_USEFUL,), _ap_metric(Fact.CONTEXT_USEFUL, "useful"),
           needs_question=True, needs_contexts=True,
           description="average precision of contexts useful to answer the question"),
    Metric("context_utilization", (Fact.CONTEXT_USED,), _ap_metric(Fact.CONTEXT_USED, "used"),
           needs_question=True, needs_contexts=True, needs_answer=True,
           description="average precision of contexts used in arriving at the answer"),
    Metric("context_relevance", (Fact.CONTEXT_RATINGS,), _context_relevance,
           needs_question=True, needs_contexts=True,
           description="mean of two 0/1/2 relevance ratings, divided by 2"),
    # A different metric from context_relevance, not a spelling of it: ragas' older definition
    # (sentences needed / all sentences), kept so users can compare with runs that used it.
    Metric("context_relevancy", (Fact.CONTEXT_SENTENCES,), _context_relevancy,
           needs_question=True, needs_contexts=True, superseded_by="context_relevance",
           description="(legacy, superseded by context_relevance) share of context sentences "
                       "needed to answer the question"),
    Metric("context_recall", (Fact.REFERENCE_ATTRIBUTION,), _context_recall,
           needs_contexts=True, needs_reference=True,
           description="share of reference statements attributable to the contexts"),
    Metric("answer_similarity", (Fact.ANSWER_SIMILARITY,), _answer_similarity,
           needs_answer=True, needs_reference=True,
           description="cosine similarity of answer and reference embeddings"),
    Metric("answer_correctness", (Fact.CORRECTNESS, Fact.ANSWER_SIMILARITY),
           make_answer_correctness(), needs_question=True, needs_answer=True, needs_reference=True,
           description="0.75 * statement F1 against the reference + 0.25 * answer similarity"),
)

METRICS: dict[str, Metric] = {m.name: m for m in _BASE}
for _c in BUILTIN_CRITERIA.values():
    METRICS[f"aspect_critique:{_c.name}"] = aspect_metric(_c)

DEFAULT_METRICS: tuple[str, ...] = (
    "faithfulness",
    "answer_relevancy",
    "context_precision",
    "context_utilization",
    "context_relevance",
)
"""The reference-free production set, on by default."""

REFERENCE_METRICS: tuple[str, ...] = ("context_recall", "answer_similarity", "answer_correctness")


def resolve_metrics(
    names: Sequence[str] | None,
    *,
    custom_criteria: Sequence[Criterion] = (),
    correctness_weights: tuple[float, float] | None = None,
) -> list[Metric]:
    """Metric objects for names such as ``faithfulness``, ``aspect_critique`` (all five built-in
    criteria), ``aspect_critique:coherence`` or a user-defined criterion's name.

    ``None`` gives the default set. Raises ``ValueError`` naming unknown metrics and the known ones.
    """
    custom = {c.name: c for c in custom_criteria}
    out: list[Metric] = []
    unknown: list[str] = []
    for raw in names if names is not None else DEFAULT_METRICS:
        name = raw.strip()
        if not name:
            continue
        if name == "aspect_critique":
            out.extend(METRICS[f"aspect_critique:{c}"] for c in BUILTIN_CRITERIA)
            out.extend(aspect_metric(c) for c in custom.values())
        elif name == "answer_correctness" and correctness_weights is not None:
            base = METRICS[name]
            out.append(Metric(base.name, base.facts, make_answer_correctness(correctness_weights),
                              needs_question=True, needs_answer=True, needs_reference=True,
                              description=base.description))
        elif name in METRICS:
            out.append(METRICS[name])
            if METRICS[name].superseded_by:
                log.warning("metric %s is legacy: %s is its successor (a different formula)",
                            name, METRICS[name].superseded_by)
        elif name.removeprefix("aspect_critique:") in custom:
            out.append(aspect_metric(custom[name.removeprefix("aspect_critique:")]))
        else:
            unknown.append(name)
    if unknown:
        known = sorted(METRICS) + ["aspect_critique"] + sorted(custom)
        raise ValueError(f"unknown metric(s): {', '.join(unknown)}; known: {', '.join(known)}")
    seen: set[str] = set()
    return [m for m in out if not (m.name in seen or seen.add(m.name))]


def to_score(metric: Metric, result: MetricResult, **kw: object) -> Score:
    """Build the frozen :class:`Score` for a metric result (interval from ``interval_of``)."""
    if result.value is None:
        return Score.missing(metric.name, result.reason or Reason.JUDGE_ERROR,
                             counts=result.counts, explanation=result.explanation, **kw)
    interval = wilson_interval(*result.interval_of) if result.interval_of else None
    # Score._fast: the validating constructor's result and errors, without re-validating values
    # this module computed (clamp01 already made the value a float in [0, 1]).
    return Score._fast(metric=metric.name, value=clamp01(result.value), status="ok",
                       counts=result.counts, interval=interval, explanation=result.explanation,
                       unsupported=result.unsupported, **kw)
