"""The LLM judge's per-metric result builders: the parsed votes of its calls (:mod:`.calls`)
become one :class:`~ragpulse.scorer.model.Finding` per fact, with the prompt versions that
produced it, its share of the cost, and the reason when there is no value (the sample lacks an
input the fact needs, or the call failed). Votes are combined by strict majority per position.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ...embeddings import Embedder
from ...metrics import EVIDENCE
from ...model import ZERO_COST, Fact, Finding, Reason
from ...segment import split_sentences
from ...stats import cosine
from ..base import Needs
from .calls import CallResult, Failed, Ledger, Results
from .plan import PROMPT_NAMES, SampleInputs
from .prompts import PromptLibrary

__all__ = ["FindingBuilder", "cited", "majority"]

_WORD = re.compile(r"\w+")


def cited(statements: Sequence[str], verdicts: Sequence[int], contexts: Sequence[Sequence[int]],
          texts: Sequence[str]) -> list[tuple[int, str] | None]:
    """``Finding.extra[EVIDENCE]`` of the claims judged unsupported: the first context the
    judge cited for each (its numbers are 1-based), as ``(index, span)``, the span being the
    sentence of that context sharing the most words with the claim (the whole context when
    it has no sentence); ``None`` for a supported claim or one that cites nothing."""
    out: list[tuple[int, str] | None] = []
    for st, ok, cs in zip(statements, verdicts, contexts, strict=True):
        k = cs[0] - 1 if cs else -1
        if ok or not 0 <= k < len(texts):
            out.append(None)
            continue
        words = set(_WORD.findall(st.lower()))
        sentences = split_sentences(texts[k]) or [texts[k]]
        best = max(sentences, key=lambda x: len(words & set(_WORD.findall(x.lower()))))
        out.append((k, best))
    return out


def majority(votes: Sequence[Sequence[int]]) -> list[int]:
    """Strict majority per position (a tie is 0), over equally long verdict arrays."""
    return [int(sum(col) * 2 > len(col)) for col in zip(*votes)]


class FindingBuilder:
    """Builds a judge's findings. Holds no per-sample state: one instance serves every
    concurrent ``gather`` of its judge."""

    def __init__(self, model: str, prompts: PromptLibrary,
                 embedder: Callable[[], Embedder]) -> None:
        self.model = model
        self.prompts = prompts
        self._get_embedder = embedder

    @property
    def embedder(self) -> Embedder:
        """The judge's embedder (loaded on first use)."""
        return self._get_embedder()

    @staticmethod
    def _first_ok(results: Sequence[CallResult | Failed] | None) -> CallResult | Failed | None:
        if not results:
            return None
        return next((r for r in results if isinstance(r, CallResult)), results[0])

    def decomposed(self, results: Results) -> tuple[list[str] | None, list[str] | None]:
        """Statements and reference statements from decompose; ``None`` when not available."""
        out: list[list[str] | None] = []
        for task in ("statements", "reference_statements"):
            r = self._first_ok(results.get(("decompose", task)))
            v = r.values.get(task) if isinstance(r, CallResult) else None
            out.append(v if isinstance(v, list) else None)
        return out[0], out[1]

    @staticmethod
    def _task(results: Sequence[CallResult | Failed] | None, task: str) -> list[Any] | Failed:
        """Every vote's value of ``task``, or why there is none."""
        if not results:
            return Failed(Reason.JUDGE_ERROR, f"no call made for {task}")
        ok: list[Any] = []
        first_fail: Failed | None = None
        for r in results:
            v = r if isinstance(r, Failed) else r.values.get(task)
            if v is None:
                v = Failed(Reason.JUDGE_ERROR, f"{task} not asked")
            if isinstance(v, Failed):
                first_fail = first_fail or v
            else:
                ok.append(v)
        return ok if ok else first_fail  # type: ignore[return-value]

    async def build(self, needs: Needs, inputs: SampleInputs, results: Results,
                    ledger: Ledger) -> dict[Fact, Finding]:
        """One finding per fact in ``needs.facts``, from the calls' ``results``; a fact this
        judge does not know gets ``unsupported_by_judge``. Never raises for a failed call or a
        broken embedder (the finding carries the reason); awaits the embedder in a worker
        thread (``aembed``), never blocking the loop."""
        model = self.model
        ref = {name: self.prompts[name].ref for name in PROMPT_NAMES}
        extra = {"truncated_contexts": True} if inputs.truncated_contexts else {}
        out: dict[Fact, Finding] = {}

        def put(fact: Fact, value: Any, version: str | None, *, reason: Reason | None = None,
                detail: str | None = None, fmodel: str | None = None, **more: Any) -> None:
            if isinstance(value, Failed):
                value, reason, detail = None, value.reason, value.detail
            out[fact] = Finding(fact, value, reason, prompt_version=version,
                                model=fmodel if fmodel is not None else model,
                                cost=ledger.costs.get(fact, ZERO_COST), detail=detail,
                                extra={**extra, **more})

        def task(prompt: str, name: str) -> list[Any] | Failed:
            return self._task(results.get((prompt, name)), name)

        def voted(v: list[Any] | Failed) -> Any:
            return v if isinstance(v, Failed) else majority(v)

        for fact in needs.facts:
            if fact in (Fact.STATEMENTS, Fact.STATEMENT_SUPPORT):
                self._claims(put, fact, inputs, task("grounding", "claims"), ref["grounding"])
            elif fact is Fact.QUESTION_SIMILARITY:
                await self._question_similarity(put, inputs, task("decompose", "questions"),
                                                ref["decompose"])
            elif fact in (Fact.CONTEXT_USEFUL, Fact.CONTEXT_USED):
                need = Reason.NO_QUESTION if fact is Fact.CONTEXT_USEFUL else Reason.NO_ANSWER
                have = inputs.question if fact is Fact.CONTEXT_USEFUL else inputs.answer
                prompt = "assess" if fact is Fact.CONTEXT_USEFUL else "grounding"
                if not inputs.contexts:
                    put(fact, [], None)
                elif not have:
                    put(fact, None, None, reason=need)
                else:
                    put(fact, voted(task(prompt, fact.value)), ref[prompt])
            elif fact is Fact.REFERENCE_ATTRIBUTION:
                self._reference_attribution(put, inputs, task, ref)
            elif fact is Fact.CORRECTNESS:
                self._correctness(put, inputs, task, ref)
            elif fact is Fact.CONTEXT_RATINGS:
                self._ratings(put, inputs, task, ref)
            elif fact is Fact.CONTEXT_SENTENCES:
                self._sentences(put, inputs, task("context_sentences", "sentences"),
                                ref["context_sentences"])
            elif fact is Fact.ASPECTS:
                self._aspects(put, needs, inputs, results.get(("aspects", "aspects")),
                              ref["aspects"])
            elif fact is Fact.ANSWER_SIMILARITY:
                await self._answer_similarity(put, inputs)
            else:  # a fact added to the engine that this judge does not know yet
                put(fact, None, None, reason=Reason.UNSUPPORTED_BY_JUDGE)
        return out

    @staticmethod
    def _claims(put: Any, fact: Fact, inputs: SampleInputs, v: list[Any] | Failed,
                version: str) -> None:
        """STATEMENTS and STATEMENT_SUPPORT from ``grounding``'s claims: the statements of the
        first vote; with votes, the majority per statement over the votes that found as many
        statements (the others are dropped, counted in ``extra["votes_dropped"]``)."""
        if not inputs.answer:
            return put(fact, [], None)
        if not inputs.contexts:
            return put(fact, None, None, reason=Reason.NO_CONTEXTS)
        if isinstance(v, Failed):
            return put(fact, v, version)
        first = v[0]
        if fact is Fact.STATEMENTS:
            return put(fact, first["statements"], version)
        same = [x["verdicts"] for x in v if len(x["verdicts"]) == len(first["verdicts"])]
        more: dict[str, Any] = {"contexts": first["contexts"], "reasons": first["reasons"]}
        if len(same) < len(v):
            more["votes_dropped"] = len(v) - len(same)
        verdicts = majority(same) if len(same) > 1 else list(first["verdicts"])
        if not all(verdicts):
            more[EVIDENCE] = cited(first["statements"], verdicts, first["contexts"],
                                   inputs.contexts)
        put(fact, verdicts, version, **more)

    async def _embed(self, texts: list[str]) -> Any:
        return await self.embedder.aembed(texts)

    async def _question_similarity(self, put: Any, inputs: SampleInputs,
                                   q: list[Any] | Failed, version: str) -> None:
        fact = Fact.QUESTION_SIMILARITY
        if not inputs.question:
            return put(fact, None, None, reason=Reason.NO_QUESTION)
        if not inputs.answer:
            return put(fact, None, None, reason=Reason.NO_ANSWER)
        if isinstance(q, Failed):
            return put(fact, q, version)
        questions, noncommittal = q[0]["questions"], q[0]["noncommittal"]
        sims: list[float] = []
        if questions:
            try:
                vecs = await self._embed([inputs.question, *questions])
            except Exception as exc:  # a broken embedder is a judge failure, not a crash
                return put(fact, None, version, reason=Reason.JUDGE_ERROR,
                           detail=f"embedder failed: {type(exc).__name__}: {exc}")
            sims = [cosine(vecs[0], v) for v in vecs[1:]]
        put(fact, {"questions": questions, "similarities": sims, "noncommittal": noncommittal},
            version, embedder=self.embedder.name)

    async def _answer_similarity(self, put: Any, inputs: SampleInputs) -> None:
        fact = Fact.ANSWER_SIMILARITY
        if not inputs.answer:
            return put(fact, None, None, reason=Reason.NO_ANSWER)
        if not inputs.reference:
            return put(fact, None, None, reason=Reason.NO_REFERENCE)
        try:
            vecs = await self._embed([inputs.answer, inputs.reference])
        except Exception as exc:  # see _question_similarity
            return put(fact, None, None, reason=Reason.JUDGE_ERROR,
                       detail=f"embedder failed: {type(exc).__name__}: {exc}")
        put(fact, cosine(vecs[0], vecs[1]), None, fmodel=self.embedder.name)

    def _reference_attribution(self, put: Any, inputs: SampleInputs, task: Any,
                               ref: Mapping[str, str]) -> None:
        fact = Fact.REFERENCE_ATTRIBUTION
        version = f"{ref['decompose']}+{ref['assess']}"
        if not inputs.reference:
            return put(fact, None, None, reason=Reason.NO_REFERENCE)
        rs = task("decompose", "reference_statements")
        if isinstance(rs, Failed):
            return put(fact, rs, ref["decompose"])
        statements = rs[0]
        if not statements:
            return put(fact, {"statements": [], "verdicts": []}, ref["decompose"])
        if not inputs.contexts:
            return put(fact, None, None, reason=Reason.NO_CONTEXTS)
        v = task("assess", "reference_attribution")
        if isinstance(v, Failed):
            return put(fact, v, version)
        put(fact, {"statements": statements, "verdicts": majority(v)}, version)

    def _correctness(self, put: Any, inputs: SampleInputs, task: Any,
                     ref: Mapping[str, str]) -> None:
        fact = Fact.CORRECTNESS
        version = f"{ref['decompose']}+{ref['assess']}"
        if not inputs.reference:
            return put(fact, None, None, reason=Reason.NO_REFERENCE)
        st = task("decompose", "statements") if inputs.answer else [[]]
        rs = task("decompose", "reference_statements")
        for x in (st, rs):
            if isinstance(x, Failed):
                return put(fact, x, ref["decompose"])
        a, r = st[0], rs[0]  # type: ignore[index]
        if not a and not r:
            return put(fact, {"tp": [], "fp": [], "fn": []}, ref["decompose"])
        v = task("assess", "correctness")
        if isinstance(v, Failed):
            return put(fact, v, version)
        in_ref = majority([x["in_reference"] for x in v])
        in_ans = majority([x["in_answer"] for x in v])
        put(fact, {"tp": [s for s, b in zip(a, in_ref) if b],
                   "fp": [s for s, b in zip(a, in_ref) if not b],
                   "fn": [s for s, b in zip(r, in_ans) if not b]}, version)

    def _ratings(self, put: Any, inputs: SampleInputs, task: Any,
                 ref: Mapping[str, str]) -> None:
        fact = Fact.CONTEXT_RATINGS
        if not inputs.contexts:
            return put(fact, None, None, reason=Reason.NO_CONTEXTS)
        if not inputs.question:
            return put(fact, None, None, reason=Reason.NO_QUESTION)
        ratings: list[int | None] = []
        fails: list[Failed] = []
        for name in ("context_rating_a", "context_rating_b"):
            v = task(name, "rating")
            if isinstance(v, Failed):
                ratings.append(None)
                fails.append(v)
            else:
                ratings.append(int(statistics.median_low(v)))
        version = f"{ref['context_rating_a']}+{ref['context_rating_b']}"
        if all(r is None for r in ratings):
            return put(fact, fails[0], version)
        detail = "; ".join(f.detail for f in fails) or None
        put(fact, ratings, version, detail=detail)

    def _sentences(self, put: Any, inputs: SampleInputs, v: Any, version: str) -> None:
        fact = Fact.CONTEXT_SENTENCES
        if not inputs.n_sentences:
            return put(fact, {"needed": 0, "total": 0}, None)
        if not inputs.question:
            return put(fact, None, None, reason=Reason.NO_QUESTION)
        if isinstance(v, Failed):
            return put(fact, v, version)
        n = inputs.n_sentences
        bits = majority([[int(i in set(needed)) for i in range(1, n + 1)] for needed in v])
        put(fact, {"needed": sum(bits), "total": n}, version,
            needed_sentences=[i for i, b in enumerate(bits, start=1) if b])

    def _aspects(self, put: Any, needs: Needs, inputs: SampleInputs, res: Any,
                 version: str) -> None:
        fact = Fact.ASPECTS
        if not needs.criteria:
            return put(fact, {}, None)
        if not inputs.answer:
            return put(fact, None, None, reason=Reason.NO_ANSWER)
        votes: dict[str, list[int]] = {}
        reasons: dict[str, str] = {}
        first_fail: Failed | None = None
        for c in needs.criteria:
            got: list[int] = []
            for r in (res or [])[: c.strictness]:
                if isinstance(r, CallResult) and not isinstance(r.values.get("aspects"), Failed):
                    got.append(r.values["aspects"][c.name])
                else:
                    f = r if isinstance(r, Failed) else r.values.get("aspects")
                    first_fail = first_fail or f
            if got:
                votes[c.name] = got
            else:
                reasons[c.name] = (first_fail.reason if first_fail else Reason.JUDGE_ERROR).value
        if not votes:
            return put(fact, first_fail or Failed(Reason.JUDGE_ERROR, "no aspect votes"), version,
                       reasons=reasons)
        put(fact, votes, version, reasons=reasons)
