"""The local judge: every fact the metrics need, computed on this machine with no API.

Facts and how they are computed (``analysis.py`` defines the views):

=======================  ====================================================================
STATEMENTS               ``segment.split_statements(answer)``
STATEMENT_SUPPORT        ``SupportDetector`` P(supported) at its threshold (probabilities in
                         ``Finding.extra``; by default flagged ``expected_share``, so
                         faithfulness is their mean, see ``metrics.EXPECTED_SHARE``)
QUESTION_SIMILARITY      one calibrated similarity: cosine(question, answer) blended with the
                         answer's grounding near the context sentence that best matches the
                         question; non-committal answers are flagged. The local judge cannot
                         generate questions, so ``questions`` holds the user question itself.
CONTEXT_USEFUL           per context: best sentence relevance to the question >= cut (question
                         and contexts only, as the metric is defined: the answer never decides)
CONTEXT_USED             per context: some answer statement draws on it: the statement's best
                         match (IDF-weighted lexical share + embedding cosine) over the
                         contexts' sentences is in it, and reaches ``used_threshold``
                         (``analysis.drawn_from``)
CONTEXT_RATINGS          two views mapped to 0/1/2: lexical (IDF-weighted question coverage of
                         the best sentence) and blended (coverage + embedding cosine)
CONTEXT_SENTENCES        context sentences whose relevance passes the cut / all sentences
REFERENCE_ATTRIBUTION    reference statements the detector finds supported by the contexts
CORRECTNESS              answer statements supported by the reference (TP) or not (FP),
                         reference statements not supported by the answer (FN)
ANSWER_SIMILARITY        cosine of the answer's and the reference's USE embeddings
ASPECTS                  not supported locally: ``unsupported_by_judge`` (an aspect such as
                         harmfulness needs a language model; a guess would be a fake result)
=======================  ====================================================================

Every local fact carries ``prompt_version`` ``local-<fact>@<n>`` (the detector's own version for
support verdicts), stored beside each score so a change of heuristic is visible in the data.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from ...embeddings import Embedder, USEEmbedder
from ...metrics import EVIDENCE, EXPECTED_SHARE
from ...model import Fact, Finding, Reason, Sample
from ...segment import split_statements
from ..base import BlockingWorkers, Needs
from .analysis import SampleAnalysis, drawn_from, rate
from .settings import LocalJudgeSettings

__all__ = ["LocalJudge"]

log = logging.getLogger(__name__)

# Bumped whenever the computation of a fact changes meaningfully (stored beside every score).
_VERSIONS: dict[Fact, str] = {
    Fact.STATEMENTS: "local-statements@1",
    Fact.QUESTION_SIMILARITY: "local-question-similarity@1",
    Fact.CONTEXT_USEFUL: "local-context-useful@2",
    Fact.CONTEXT_USED: "local-context-used@2",
    Fact.CONTEXT_RATINGS: "local-context-ratings@1",
    Fact.CONTEXT_SENTENCES: "local-context-sentences@1",
    Fact.ANSWER_SIMILARITY: "local-answer-similarity@1",
}

_EMBEDDING_FACTS = frozenset(Fact) - {Fact.STATEMENTS, Fact.ASPECTS}
_STATEMENT_FACTS = frozenset({Fact.STATEMENT_SUPPORT, Fact.CONTEXT_USED, Fact.CORRECTNESS})


class LocalJudge:
    """Implements :class:`~ragpulse.scorer.judges.base.Judge` with local models only.

    ``gather`` is a coroutine that never blocks the event loop: the whole per-sample computation
    runs in a bounded thread pool (``settings.workers`` threads, at most ``settings.max_pending``
    samples admitted at once; others wait asynchronously). It never raises for model trouble: a
    failing fact becomes a finding with reason ``judge_error`` and a ``detail``. ``gather`` after
    ``aclose`` raises ``RuntimeError`` (a programming error).

    ``embedder`` may be shared with other components (then its own thread count applies, not
    ``settings.threads``); ``detector`` is anything with the ``SupportDetector`` contract
    (``predict``, ``threshold``, ``version``), by default built on first use from
    ``settings.support_weights_path``; if that fails (missing weights: a permanent error) the
    detector facts carry ``judge_error`` and the rest of the judge keeps working.

    Thread-safety: use from one event loop; the embedder and the detector it shares with other
    components are thread-safe. Counters (``samples``, ``errors``, ``too_large``) are read-only
    for callers.
    """

    name = "fast"

    def __init__(
        self,
        settings: LocalJudgeSettings | None = None,
        *,
        embedder: Embedder | None = None,
        detector: Any | None = None,
    ) -> None:
        self.settings = settings or LocalJudgeSettings()
        self.embedder: Embedder = embedder or USEEmbedder(
            threads=self.settings.threads, cache_size=self.settings.cache_size
        )
        self.model = getattr(self.embedder, "name", "embedder")
        self._detector = detector
        self._detector_error: str | None = None
        self._detector_lock = threading.Lock()
        self._workers = BlockingWorkers(self.settings.workers, self.settings.max_pending,
                                        "ragpulse-local-judge")
        self._count_lock = threading.Lock()
        self.samples = 0
        self.errors = 0
        self.too_large = 0

    # ------------------------------------------------------------------ lifecycle

    def warm(self) -> LocalJudge:
        """Blocking: load the embedding model and the detector now instead of on first use."""
        warm = getattr(self.embedder, "warm", None)
        if callable(warm):
            warm()
        self.detector()
        return self

    async def aclose(self) -> None:
        """Stop the worker threads (waiting for running samples). Idempotent."""
        await self._workers.aclose()

    def detector(self) -> Any | None:
        """The statement-support detector, built on first use; ``None`` (with the reason kept for
        findings) when it cannot be built, e.g. its weights are missing. Thread-safe."""
        if self._detector is not None or self._detector_error is not None:
            return self._detector
        with self._detector_lock:
            if self._detector is None and self._detector_error is None:
                try:
                    from .support_detector import SupportDetector

                    self._detector = SupportDetector(
                        embedder=self.embedder, weights_path=self.settings.support_weights_path
                    )
                except Exception as e:
                    self._detector_error = f"support detector unavailable: {e}"
                    log.error("%s", self._detector_error)
        return self._detector

    # ------------------------------------------------------------------ the protocol

    async def gather(self, sample: Sample, needs: Needs) -> dict[Fact, Finding]:
        if self._workers.closed:
            raise RuntimeError("LocalJudge.gather after aclose")
        if not needs.facts:
            return {}
        return await self._workers.run_findings(self.judge, sample, needs)

    # ------------------------------------------------------------------ blocking core

    def judge(self, sample: Sample, needs: Needs) -> dict[Fact, Finding]:
        """Blocking, thread-safe: the findings for ``needs`` on ``sample``. Never raises for model
        or input trouble (those become findings with a reason)."""
        self._count("samples")
        s = self.settings
        if (detail := s.too_large(sample)) is not None:
            self._count("too_large")
            return {f: Finding(f, None, Reason.INPUT_TOO_LARGE, model=self.model, detail=detail)
                    for f in needs.facts}
        try:
            a = SampleAnalysis(sample, s, self.embedder)
        except Exception as e:  # segmentation of hostile input: fail the sample, not the caller
            self._count("errors")
            log.warning("local judge: analysis failed on sample %s", sample.id, exc_info=True)
            return {f: Finding(f, None, Reason.JUDGE_ERROR, model=self.model,
                               detail=f"{type(e).__name__}: {e}") for f in needs.facts}
        out: dict[Fact, Finding] = {}
        if needs.facts & _EMBEDDING_FACTS:
            try:
                a.prefetch(statements=bool(needs.facts & _STATEMENT_FACTS),
                           reference=Fact.ANSWER_SIMILARITY in needs.facts)
            except Exception:  # the facts below retry and report the failure one by one
                log.debug("local judge: prefetch failed on sample %s", sample.id, exc_info=True)
        for fact in needs.facts:
            compute = self._COMPUTE.get(fact)
            if compute is None:
                out[fact] = Finding(fact, None, Reason.UNSUPPORTED_BY_JUDGE, model=self.model,
                                    detail="aspect critiques need a language model; use the llm judge")
                continue
            try:
                out[fact] = compute(self, a)
            except Exception as e:  # one bad fact must not lose the sample's other facts
                self._count("errors")
                log.warning("local judge: %s failed on sample %s", fact.value, sample.id,
                            exc_info=True)
                out[fact] = Finding(fact, None, Reason.JUDGE_ERROR, model=self.model,
                                    detail=f"{type(e).__name__}: {e}")
        return out

    def _count(self, name: str) -> None:
        with self._count_lock:  # worker threads update the counters concurrently
            setattr(self, name, getattr(self, name) + 1)

    def _ok(self, fact: Fact, value: Any, **extra: Any) -> Finding:
        return Finding(fact, value, prompt_version=_VERSIONS.get(fact), model=self.model, extra=extra)

    def _no_detector(self, fact: Fact) -> Finding:
        return Finding(fact, None, Reason.JUDGE_ERROR, model=self.model,
                       detail=self._detector_error or "support detector unavailable")

    def _statements(self, a: SampleAnalysis) -> Finding:
        return self._ok(Fact.STATEMENTS, list(a.statements))

    def _statement_support(self, a: SampleAnalysis) -> Finding:
        det = self.detector()
        if det is None:
            return self._no_detector(Fact.STATEMENT_SUPPORT)
        probs = det.predict(a.statements, a.contexts) if a.statements else []
        verdicts = [int(p >= det.threshold) for p in probs]
        extra: dict[str, Any] = {"probabilities": [round(p, 4) for p in probs],
                                 "threshold": det.threshold}
        # Where an unsupported statement came closest: its best-matching context sentence.
        doubted = [i for i, v in enumerate(verdicts) if not v]
        if doubted:
            evidence: list[tuple[int, str] | None] = [None] * len(verdicts)
            try:
                for i, ev in zip(doubted, a.closest_sentences(doubted), strict=True):
                    evidence[i] = ev
                extra[EVIDENCE] = evidence
            except Exception:  # the verdicts stand without it
                log.warning("local judge: finding the closest sentences failed",
                            exc_info=True)
        version = det.version
        if self.settings.faithfulness_value == "expected":
            # The metric's value becomes sum(P) / n (same definition, uncertainty kept); the
            # verdicts above still give its counts. See metrics.EXPECTED_SHARE. The version
            # says so, so stored scores of the two kinds are never mixed up on a dashboard.
            extra[EXPECTED_SHARE] = True
            version += "/expected"
        return Finding(Fact.STATEMENT_SUPPORT, verdicts, prompt_version=version,
                       model=self.model, extra=extra)

    def _question_similarity(self, a: SampleAnalysis) -> Finding:
        views = a.answer_relevancy
        return self._ok(
            Fact.QUESTION_SIMILARITY,
            {"questions": [a.question], "similarities": [round(views["score"], 6)],
             "noncommittal": a.noncommittal},
            views={k: round(v, 4) for k, v in views.items()},
        )

    def _context_useful(self, a: SampleAnalysis) -> Finding:
        best = a.per_context_max(a.relevance)
        cut = self.settings.useful_threshold
        return self._ok(Fact.CONTEXT_USEFUL, [int(v >= cut) for v in best],
                        relevance=[round(v, 4) for v in best], threshold=cut)

    def _context_used(self, a: SampleAnalysis) -> Finding:
        match = a.statement_match
        cut = self.settings.used_threshold
        best = match.max(axis=0) if len(match) else np.zeros(len(a.contexts))
        return self._ok(Fact.CONTEXT_USED, drawn_from(match, cut),
                        alignment=[round(float(v), 4) for v in best], threshold=cut)

    def _context_ratings(self, a: SampleAnalysis) -> Finding:
        s = self.settings
        lexical = max(a.per_context_max(a.question_coverage), default=0.0)
        blended = max(a.per_context_max(a.relevance), default=0.0)
        return self._ok(Fact.CONTEXT_RATINGS,
                        [rate(lexical, s.rating_lexical), rate(blended, s.rating_semantic)],
                        lexical=round(lexical, 4), blended=round(blended, 4))

    def _context_sentences(self, a: SampleAnalysis) -> Finding:
        cut = self.settings.needed_sentence_threshold
        needed = int((a.relevance >= cut).sum()) if len(a.sentences) else 0
        return self._ok(Fact.CONTEXT_SENTENCES, {"needed": needed, "total": len(a.sentences)})

    def _reference_attribution(self, a: SampleAnalysis) -> Finding:
        det = self.detector()
        if det is None:
            return self._no_detector(Fact.REFERENCE_ATTRIBUTION)
        ref = split_statements(a.reference)
        probs = det.predict(ref, a.contexts) if ref else []
        return Finding(Fact.REFERENCE_ATTRIBUTION,
                       {"statements": ref, "verdicts": [int(p >= det.threshold) for p in probs]},
                       prompt_version=det.version, model=self.model,
                       extra={"probabilities": [round(p, 4) for p in probs]})

    def _correctness(self, a: SampleAnalysis) -> Finding:
        det = self.detector()
        if det is None:
            return self._no_detector(Fact.CORRECTNESS)
        cut = self.settings.correctness_threshold
        cut = det.threshold if cut is None else cut
        ans, ref = a.statements, split_statements(a.reference)
        p_ans = det.predict(ans, [a.reference]) if ans and a.reference else [0.0] * len(ans)
        p_ref = det.predict(ref, [a.answer]) if ref and a.answer else [0.0] * len(ref)
        value = {
            "tp": [s for s, p in zip(ans, p_ans) if p >= cut],
            "fp": [s for s, p in zip(ans, p_ans) if p < cut],
            "fn": [s for s, p in zip(ref, p_ref) if p < cut],
        }
        return Finding(Fact.CORRECTNESS, value, prompt_version=det.version, model=self.model,
                       extra={"threshold": cut})

    def _answer_similarity(self, a: SampleAnalysis) -> Finding:
        cos = a.answer_reference_cosine
        return self._ok(Fact.ANSWER_SIMILARITY, max(0.0, min(1.0, cos)), cosine=round(cos, 4))

    _COMPUTE: ClassVar[dict[Fact, Callable[[LocalJudge, SampleAnalysis], Finding]]] = {
        Fact.STATEMENTS: _statements,
        Fact.STATEMENT_SUPPORT: _statement_support,
        Fact.QUESTION_SIMILARITY: _question_similarity,
        Fact.CONTEXT_USEFUL: _context_useful,
        Fact.CONTEXT_USED: _context_used,
        Fact.CONTEXT_RATINGS: _context_ratings,
        Fact.CONTEXT_SENTENCES: _context_sentences,
        Fact.REFERENCE_ATTRIBUTION: _reference_attribution,
        Fact.CORRECTNESS: _correctness,
        Fact.ANSWER_SIMILARITY: _answer_similarity,
    }
