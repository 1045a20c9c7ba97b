"""The call plan: which prompts and tasks a sample's needed facts take, and the exact messages.

Isolation rule: one request asks only tasks that declare the *same* inputs in their prompt file,
so every verdict sees exactly the inputs its metric's definition names, whatever other metrics
run beside it (``docs/metrics.md``). The card's four metrics take three independent
requests, sent concurrently:

* ``assess`` / ``context_useful`` (question + contexts): context_precision;
* ``grounding`` / ``claims`` + ``context_used`` (question + contexts + answer): the answer's
  statements with a reason, the contexts they rest on and a verdict each (faithfulness), and the
  contexts the answer used (context_utilization);
* ``decompose`` / ``questions`` (answer only): answer relevancy's generated questions.

Other facts add their own requests: ``context_rating_a``/``_b`` (context_relevance),
``context_sentences`` (legacy context_relevancy), ``aspects``; the reference facts take
``decompose`` (answer statements from question + answer, reference statements from the
reference) and then ``assess`` (attribution over contexts + reference statements; TP/FP/FN over
question + both statement lists).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ...model import Fact, Sample
from ...segment import split_sentences, split_statements
from ..base import Criterion, Needs
from .prompts import PromptLibrary, new_nonce
from .settings import LLMJudgeSettings

__all__ = ["CallSpec", "SampleInputs", "dependent_calls", "fit_contexts", "independent_calls",
           "render_requests"]

TRUNCATION_MARK = " [...truncated]"

# Which tasks of which prompt each fact needs.
FACT_TASKS: dict[Fact, tuple[tuple[str, str], ...]] = {
    Fact.STATEMENTS: (("grounding", "claims"),),
    Fact.STATEMENT_SUPPORT: (("grounding", "claims"),),
    Fact.QUESTION_SIMILARITY: (("decompose", "questions"),),
    Fact.CONTEXT_USEFUL: (("assess", "context_useful"),),
    Fact.CONTEXT_USED: (("grounding", "context_used"),),
    Fact.REFERENCE_ATTRIBUTION: (("decompose", "reference_statements"),
                                 ("assess", "reference_attribution")),
    Fact.CORRECTNESS: (("decompose", "statements"), ("decompose", "reference_statements"),
                       ("assess", "correctness")),
    Fact.CONTEXT_RATINGS: (("context_rating_a", "rating"), ("context_rating_b", "rating")),
    Fact.CONTEXT_SENTENCES: (("context_sentences", "sentences"),),
    Fact.ASPECTS: (("aspects", "aspects"),),
    Fact.ANSWER_SIMILARITY: (),
}
PROMPT_NAMES = ("decompose", "assess", "grounding", "context_rating_a", "context_rating_b",
                "context_sentences", "aspects")
# Inputs that are another request's output: a task reading them waits for ``decompose``.
DERIVED_INPUTS = frozenset({"statements", "reference_statements"})


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
    """One logical call (before votes): a prompt, the tasks asked, and what the reply must match.
    The tasks of one call declare identical inputs (the isolation rule)."""

    prompt: str
    tasks: tuple[str, ...]
    items: Mapping[str, Sequence[str]]
    params: Mapping[str, str] = field(default_factory=dict)
    counts: Mapping[str, object] = field(default_factory=dict)
    votes: int = 1


def _wanted(needs: Needs, prompt: str) -> list[str]:
    return sorted({t for f in needs.facts for (p, t) in FACT_TASKS.get(f, ()) if p == prompt})


def askable(task: str, inputs: SampleInputs, n_statements: int = 0,
            n_reference_statements: int = 0) -> bool:
    """Whether ``task`` has something to judge for this sample (a task over zero items, or over
    a missing input, is not asked)."""
    q, c, a, r = bool(inputs.question), bool(inputs.contexts), bool(inputs.answer), \
        bool(inputs.reference)
    return {
        "statements": a,
        "questions": a and q,
        "reference_statements": r,
        "claims": a and c,
        "context_used": a and c,
        "context_useful": q and c,
        "reference_attribution": c and n_reference_statements > 0,
        "correctness": n_statements > 0 or n_reference_statements > 0,
        "rating": q and c,
        "sentences": q and inputs.n_sentences > 0,
        "aspects": a,
    }.get(task, False)


def _group(prompt: str, tasks: Sequence[str], prompts: PromptLibrary) -> list[tuple[str, ...]]:
    """``tasks`` split into groups of identical declared inputs, in the file's task order."""
    groups: dict[frozenset[str], list[str]] = {}
    for t in prompts[prompt].tasks:
        if t in tasks:
            groups.setdefault(frozenset(prompts[prompt].tasks[t].inputs), []).append(t)
    return [tuple(g) for g in groups.values()]


def criteria_text(criteria: Sequence[Criterion]) -> str:
    return "\n".join(f"{i}. {c.name}: {c.definition}" for i, c in enumerate(criteria, start=1))


def _spec(prompt: str, tasks: tuple[str, ...], needs: Needs, inputs: SampleInputs,
          settings: LLMJudgeSettings, statements: Sequence[str] = (),
          reference_statements: Sequence[str] = ()) -> CallSpec:
    items = inputs.items(statements, reference_statements)
    counts: dict[str, object] = {"statements": len(statements), "contexts": len(inputs.contexts),
                                 "reference_statements": len(reference_statements)}
    params: dict[str, str] = {}
    votes = settings.votes
    if "questions" in tasks:
        params["n_questions"] = str(settings.n_questions)
        counts["questions"] = settings.n_questions
    if "sentences" in tasks:
        counts["sentences"] = inputs.n_sentences
    if "claims" in tasks:
        counts["source_text"] = f"{inputs.question}\n{inputs.answer}"
    if "aspects" in tasks:
        params["criteria"] = criteria_text(needs.criteria)
        counts["criteria_names"] = [c.name for c in needs.criteria]
        votes = max(c.strictness for c in needs.criteria)
    if prompt == "decompose":
        votes = 1  # decomposition is not voted
    return CallSpec(prompt, tasks, items, params=params, counts=counts, votes=votes)


def independent_calls(needs: Needs, inputs: SampleInputs, settings: LLMJudgeSettings,
                      prompts: PromptLibrary) -> list[CallSpec]:
    """The calls that need nothing but the sample (all but those reading ``decompose``'s
    statements), in a stable order."""
    specs: list[CallSpec] = []
    for prompt in PROMPT_NAMES:
        tasks = [t for t in _wanted(needs, prompt) if askable(t, inputs)
                 and not DERIVED_INPUTS & set(prompts[prompt].tasks[t].inputs)]
        if prompt == "aspects" and not needs.criteria:
            tasks = []
        for group in _group(prompt, tasks, prompts):
            specs.append(_spec(prompt, group, needs, inputs, settings))
    return specs


def dependent_calls(needs: Needs, inputs: SampleInputs, settings: LLMJudgeSettings,
                    prompts: PromptLibrary, statements: Sequence[str],
                    reference_statements: Sequence[str]) -> list[CallSpec]:
    """The calls that read ``decompose``'s statements (reference facts only)."""
    specs: list[CallSpec] = []
    for prompt in PROMPT_NAMES:
        tasks = [t for t in _wanted(needs, prompt)
                 if DERIVED_INPUTS & set(prompts[prompt].tasks[t].inputs)
                 and askable(t, inputs, len(statements), len(reference_statements))]
        for group in _group(prompt, tasks, prompts):
            specs.append(_spec(prompt, group, needs, inputs, settings, statements,
                               reference_statements))
    return specs


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
    order (independent calls, then the calls that read ``decompose``'s statements).

    Those calls need the statements ``decompose`` returns; without them, the answer's (and the
    reference's) sentence-level statements from :func:`~ragpulse.scorer.segment.split_statements`
    stand in, which gives representative token counts for cost estimates. Pure apart from the
    random nonce (pass ``nonce`` for byte-identical output); blocking only to load the prompt
    files when ``prompts`` is not given. Stable API: the cost benchmark imports it.
    """
    settings = settings or LLMJudgeSettings()
    prompts = prompts or PromptLibrary.load(settings.prompts_dir)
    inputs = SampleInputs.of(sample, settings)
    out: list[list[dict[str, str]]] = []
    specs = independent_calls(needs, inputs, settings, prompts)
    asked = {(s.prompt, t) for s in specs for t in s.tasks}
    stmts = list(statements) if statements is not None else (
        split_statements(inputs.answer) if ("decompose", "statements") in asked else [])
    refs = list(reference_statements) if reference_statements is not None else (
        split_statements(inputs.reference)
        if ("decompose", "reference_statements") in asked else [])
    specs += dependent_calls(needs, inputs, settings, prompts, stmts, refs)
    for spec in specs:
        out.append(prompts[spec.prompt].render(spec.tasks, spec.items, nonce=nonce or new_nonce(),
                                               params=spec.params))
    return out
