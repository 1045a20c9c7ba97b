"""The call plan: which prompts and tasks a sample's needed facts take, and the exact messages.

The card's four metrics (faithfulness, answer_relevancy, context_precision, context_utilization)
take two calls: ``decompose`` (question + answer -> statements, generated questions,
noncommittal) then ``assess`` (question + all contexts + answer + statements -> every verdict).
Other facts add their own calls: ``context_rating_a``/``_b`` (two wordings, context_relevance),
``context_sentences`` (legacy context_relevancy) and ``aspects``. Reference facts ride on the same
two calls (reference statements in ``decompose``, attribution and TP/FP/FN in ``assess``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ...model import Fact, Sample
from ...segment import split_sentences, split_statements
from ..base import Criterion, Needs
from .prompts import PromptLibrary, new_nonce
from .settings import LLMJudgeSettings

__all__ = ["CallSpec", "SampleInputs", "assess_tasks", "decompose_tasks", "fit_contexts",
           "phase_one", "render_requests"]

TRUNCATION_MARK = " [...truncated]"

# Which tasks of which prompt each fact needs (the assess tasks need decompose's output first).
FACT_TASKS: dict[Fact, tuple[tuple[str, str], ...]] = {
    Fact.STATEMENTS: (("decompose", "statements"),),
    Fact.STATEMENT_SUPPORT: (("decompose", "statements"), ("assess", "statement_support")),
    Fact.QUESTION_SIMILARITY: (("decompose", "questions"),),
    Fact.CONTEXT_USEFUL: (("assess", "context_useful"),),
    Fact.CONTEXT_USED: (("assess", "context_used"),),
    Fact.REFERENCE_ATTRIBUTION: (("decompose", "reference_statements"),
                                 ("assess", "reference_attribution")),
    Fact.CORRECTNESS: (("decompose", "statements"), ("decompose", "reference_statements"),
                       ("assess", "correctness")),
    Fact.CONTEXT_RATINGS: (("context_rating_a", "rating"), ("context_rating_b", "rating")),
    Fact.CONTEXT_SENTENCES: (("context_sentences", "sentences"),),
    Fact.ASPECTS: (("aspects", "aspects"),),
    Fact.ANSWER_SIMILARITY: (),
}
PROMPT_NAMES = ("decompose", "assess", "context_rating_a", "context_rating_b",
                "context_sentences", "aspects")


def fit_contexts(contexts: Sequence[str], max_chars: int) -> tuple[list[str], bool]:
    """Cut ``contexts`` to ``max_chars`` in total, fairly: short contexts stay whole and the
    long ones share what is left equally (water-filling), so a huge first passage cannot crowd
    out the others. Returns the contexts and whether any was cut."""
    lengths = [len(c) for c in contexts]
    if sum(lengths) <= max_chars:
        return list(contexts), False
    caps = [0] * len(contexts)
    remaining, open_ = max_chars, sorted(range(len(contexts)), key=lambda i: lengths[i])
    while open_:
        share = remaining // len(open_)
        i = open_[0]
        if lengths[i] <= share:
            caps[i] = lengths[i]
            remaining -= lengths[i]
            open_.pop(0)
        else:
            for j in open_:
                caps[j] = share
            break
    out = [c if len(c) <= cap else c[:cap].rstrip() + TRUNCATION_MARK
           for c, cap in zip(contexts, caps)]
    return out, True


def _cut(text: str, max_chars: int) -> str:
    return text if len(text) <= max_chars else text[:max_chars].rstrip() + TRUNCATION_MARK


@dataclass(frozen=True)
class SampleInputs:
    """The sample's content as the prompts show it: truncated, with contexts' sentences numbered."""

    question: str
    contexts: tuple[str, ...]
    answer: str
    reference: str
    sentences: tuple[str, ...]
    """One data block per context, its sentences marked ``[S1]``, ``[S2]``, ... (global numbers)."""
    n_sentences: int
    truncated_contexts: bool

    @classmethod
    def of(cls, sample: Sample, settings: LLMJudgeSettings) -> SampleInputs:
        contexts, truncated = fit_contexts(sample.contexts, settings.max_context_chars)
        blocks: list[str] = []
        n = 0
        for c in contexts:
            lines = []
            for s in split_sentences(c):
                n += 1
                lines.append(f"[S{n}] {s}")
            blocks.append("\n".join(lines))
        return cls(
            question=_cut(sample.question.strip(), settings.max_text_chars),
            contexts=tuple(contexts),
            answer=_cut(sample.answer.strip(), settings.max_text_chars),
            reference=_cut((sample.reference or "").strip(), settings.max_text_chars),
            sentences=tuple(blocks),
            n_sentences=n,
            truncated_contexts=truncated,
        )

    def items(self, statements: Sequence[str] = (),
              reference_statements: Sequence[str] = ()) -> dict[str, list[str]]:
        return {
            "question": [self.question],
            "contexts": list(self.contexts),
            "answer": [self.answer],
            "reference": [self.reference],
            "statements": list(statements),
            "reference_statements": list(reference_statements),
            "sentences": list(self.sentences),
        }


@dataclass(frozen=True)
class CallSpec:
    """One logical call (before votes): a prompt, the tasks asked, and what the reply must match."""

    prompt: str
    tasks: tuple[str, ...]
    items: Mapping[str, Sequence[str]]
    params: Mapping[str, str] = field(default_factory=dict)
    counts: Mapping[str, object] = field(default_factory=dict)
    votes: int = 1


def _wanted(needs: Needs, prompt: str) -> set[str]:
    return {t for f in needs.facts for (p, t) in FACT_TASKS.get(f, ()) if p == prompt}


def decompose_tasks(needs: Needs, inputs: SampleInputs) -> tuple[str, ...]:
    """The decompose tasks worth asking: none about an empty answer or an absent reference."""
    wanted = _wanted(needs, "decompose")
    out = []
    if "statements" in wanted and inputs.answer:
        out.append("statements")
    if "questions" in wanted and inputs.answer and inputs.question:
        out.append("questions")
    if "reference_statements" in wanted and inputs.reference:
        out.append("reference_statements")
    return tuple(out)


def assess_tasks(needs: Needs, inputs: SampleInputs, n_statements: int,
                 n_reference_statements: int) -> tuple[str, ...]:
    """The assess tasks that have something to judge (a task over zero items is not asked)."""
    wanted = _wanted(needs, "assess")
    has_ctx = bool(inputs.contexts)
    out = []
    if "statement_support" in wanted and n_statements and has_ctx:
        out.append("statement_support")
    if "context_useful" in wanted and has_ctx and inputs.question:
        out.append("context_useful")
    if "context_used" in wanted and has_ctx and inputs.answer:
        out.append("context_used")
    if "reference_attribution" in wanted and n_reference_statements and has_ctx:
        out.append("reference_attribution")
    if "correctness" in wanted and (n_statements or n_reference_statements):
        out.append("correctness")
    return tuple(out)


def criteria_text(criteria: Sequence[Criterion]) -> str:
    return "\n".join(f"{i}. {c.name}: {c.definition}" for i, c in enumerate(criteria, start=1))


def phase_one(needs: Needs, inputs: SampleInputs, settings: LLMJudgeSettings) -> list[CallSpec]:
    """Calls that need nothing but the sample (every call except ``assess``)."""
    specs: list[CallSpec] = []
    items = inputs.items()
    if tasks := decompose_tasks(needs, inputs):
        specs.append(CallSpec("decompose", tasks, items,
                              params={"n_questions": str(settings.n_questions)},
                              counts={"questions": settings.n_questions}))
    if Fact.CONTEXT_RATINGS in needs.facts and inputs.contexts and inputs.question:
        for name in ("context_rating_a", "context_rating_b"):
            specs.append(CallSpec(name, ("rating",), items, votes=settings.votes))
    if Fact.CONTEXT_SENTENCES in needs.facts and inputs.n_sentences and inputs.question:
        specs.append(CallSpec("context_sentences", ("sentences",), items,
                              counts={"sentences": inputs.n_sentences}, votes=settings.votes))
    if Fact.ASPECTS in needs.facts and needs.criteria and inputs.answer:
        specs.append(CallSpec("aspects", ("aspects",), items,
                              params={"criteria": criteria_text(needs.criteria)},
                              counts={"criteria_names": [c.name for c in needs.criteria]},
                              votes=max(c.strictness for c in needs.criteria)))
    return specs


def assess_spec(needs: Needs, inputs: SampleInputs, settings: LLMJudgeSettings,
                statements: Sequence[str], reference_statements: Sequence[str]) -> CallSpec | None:
    tasks = assess_tasks(needs, inputs, len(statements), len(reference_statements))
    if not tasks:
        return None
    return CallSpec("assess", tasks, inputs.items(statements, reference_statements),
                    counts={"statements": len(statements), "contexts": len(inputs.contexts),
                            "reference_statements": len(reference_statements)},
                    votes=settings.votes)


def render_requests(
    sample: Sample,
    needs: Needs,
    settings: LLMJudgeSettings | None = None,
    *,
    statements: Sequence[str] | None = None,
    reference_statements: Sequence[str] | None = None,
    prompts: PromptLibrary | None = None,
    nonce: str | None = None,
) -> list[list[dict[str, str]]]:
    """The exact chat messages the LLM judge would send for ``sample`` and ``needs``: one list
    of ``{"role", "content"}`` messages per request, votes and repairs not included, in plan
    order (phase-one calls, then ``assess``).

    ``assess`` needs the statements ``decompose`` returns; without them, the answer's (and the
    reference's) sentence-level statements from :func:`~ragpulse.scorer.segment.split_statements`
    stand in, which gives representative token counts for cost estimates. Pure apart from the
    random nonce (pass ``nonce`` for byte-identical output); blocking only to load the prompt
    files when ``prompts`` is not given. Stable API: the cost benchmark imports it.
    """
    settings = settings or LLMJudgeSettings()
    prompts = prompts or PromptLibrary.load(settings.prompts_dir)
    inputs = SampleInputs.of(sample, settings)
    out: list[list[dict[str, str]]] = []
    for spec in phase_one(needs, inputs, settings):
        out.append(prompts[spec.prompt].render(spec.tasks, spec.items, nonce=nonce or new_nonce(),
                                               params=spec.params))
    dec = decompose_tasks(needs, inputs)
    stmts = list(statements) if statements is not None else (
        split_statements(inputs.answer) if "statements" in dec else [])
    refs = list(reference_statements) if reference_statements is not None else (
        split_statements(inputs.reference) if "reference_statements" in dec else [])
    if (spec := assess_spec(needs, inputs, settings, stmts, refs)) is not None:
        out.append(prompts[spec.prompt].render(spec.tasks, spec.items, nonce=nonce or new_nonce(),
                                               params=spec.params))
    return out
