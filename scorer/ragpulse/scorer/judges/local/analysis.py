"""One sample, analysed once: sentences, content units and embeddings, then the views every fact
is computed from. Blocking (CPU); run it in a worker thread.

The views, each bounded in [0, 1]:

- *question coverage* of a context sentence: the IDF-weighted share of the question's content
  units found in it. IDF is computed over the sample's own context sentences, so units every
  retrieved passage shares (the topic words the retriever matched on) weigh little and the rare
  ones that pin down the answering sentence weigh much. Sentence level, not passage level: a
  question written from (or answered by) a passage usually has one sentence covering most of it,
  while a passage that merely shares the topic spreads the matches thinly.
- *semantic relevance*: the calibrated USE cosine between the question and the sentence.
- a sentence's *relevance* blends the two (``lexical_weight``).
- *answer grounding*: how much of the answer is found near the sentence that best matches the
  question (content units in that sentence and its neighbours, or a high embedding cosine). An
  answer that addresses the question names what that passage says; an answer to another
  question does not.
- *match* of an answer statement to a context: over the context's sentences, the best even
  blend of the IDF-weighted share of the statement's content units found in the sentence (IDF
  over the sample's context sentences, as for the question) and their calibrated cosine. The
  IDF matters here too: the entities and topic words every retrieved passage shares weigh
  little, the rarer ones that tie a statement to its source weigh much.
- *drawn from* (:func:`drawn_from`): each statement draws on the context it matches best, when
  that match reaches a floor; a context is used when some statement draws on it.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Sequence
from functools import cached_property

import numpy as np

from ...embeddings import Embedder
from ...model import Sample
from ...segment import split_sentences, split_statements
from .settings import LocalJudgeSettings
from .text import content_units, coverage, idf_weights, is_noncommittal, weighted_coverage

__all__ = ["SampleAnalysis", "drawn_from", "rate"]

# Calibration of statement-to-sentence cosines (paraphrases of one fact sit around 0.6-0.9 with
# USE; unrelated sentences of the same topic around 0.2-0.4).
_ALIGN_COS_LOW = 0.3
_ALIGN_COS_HIGH = 0.8
# Weight of the IDF-weighted lexical share in a statement's match to a context sentence (the
# rest: the calibrated cosine). Even: on the RAG corpus 0.3, 0.5 and 0.7 gave the fast judge a
# context utilization MAE of 0.081, 0.070 and 0.066 (`bench/utilization_agreement.py
# --sensitivity`, docs/benchmarks.md); 0.7's 0.004 was not worth a cut fitted to one corpus.
_MATCH_LEXICAL_WEIGHT = 0.5


def rate(value: float, cuts: tuple[float, float]) -> int:
    """Map a [0, 1] view onto the 0 / 1 / 2 relevance scale of the context_relevance prompts (docs/metrics.md)."""
    return 2 if value >= cuts[1] else 1 if value >= cuts[0] else 0


def drawn_from(match: np.ndarray, floor: float, evidence: np.ndarray | None = None) -> list[int]:
    """Per context, 1 when some answer statement draws on it (``Fact.CONTEXT_USED``).

    ``match`` is statements x contexts (:attr:`SampleAnalysis.statement_match`). A statement
    draws on the context where its information is found best: its highest ``match``, plus
    ``evidence`` where a judge has its own statements x contexts evidence (the model judge's
    P(supported), which then decides between contexts that match alike); ties count every tied
    context. A statement whose best ``match`` is under ``floor`` draws on none (it is not taken
    from any of them: an invented statement, a bare "Yes."). Only the best context counts, so
    a distractor that shares a statement's topic words but matches it less is not used."""
    n = match.shape[1] if match.ndim == 2 else 0
    if not match.size:
        return [0] * n
    score = match if evidence is None else match + evidence
    best = score.max(axis=1, keepdims=True)
    drawn = (score >= best) & (match.max(axis=1, keepdims=True) >= floor)
    return [int(v) for v in drawn.any(axis=0)]


def _calibrate(c: np.ndarray | float, low: float, high: float) -> np.ndarray:
    return np.clip((np.asarray(c, dtype=np.float64) - low) / (high - low), 0.0, 1.0)


class SampleAnalysis:
    """The lexical and embedding views of one sample, computed lazily and at most once.

    Not thread-safe (one instance per worker call). Every property blocks; those that embed call
    the (thread-safe) embedder once for all the texts they need.
    """

    def __init__(self, sample: Sample, settings: LocalJudgeSettings, embedder: Embedder) -> None:
        self.settings = settings
        self.embedder = embedder
        cut = settings.max_text_chars
        self.question = sample.question.strip()
        self.answer = sample.answer.strip()
        self.reference = (sample.reference or "").strip()
        self.contexts = list(sample.contexts)
        self.sentences: list[str] = []
        self.owner: list[int] = []  # context index of each sentence
        for i, raw in enumerate(self.contexts):
            # NFKC first, as the support detector does: the same sentences then share one cache
            # entry in the embedder instead of being embedded twice
            ctx = unicodedata.normalize("NFKC", raw[: cut * 4])
            sents = split_sentences(ctx) or ([ctx.strip()] if ctx.strip() else [])
            for s in sents[: settings.max_sentences_per_context]:
                self.sentences.append(s[:cut])
                self.owner.append(i)
        self.sentence_units = [content_units(s) for s in self.sentences]

    # ------------------------------------------------------------------ embeddings

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        cut = self.settings.max_text_chars
        texts = [unicodedata.normalize("NFKC", t)[:cut] for t in texts]
        return np.asarray(self.embedder.embed(texts), dtype=np.float64)

    def prefetch(self, *, statements: bool, reference: bool) -> None:
        """Embed every text the requested facts will need in one call, so the model runs once
        per sample (per-call overhead dominates for short texts) and later lookups, including
        the support detector's, hit the embedder's cache."""
        texts = [self.question or " ", self.answer or " ", *self.sentences]
        if statements:
            texts += self.statements
        if reference and self.reference:
            texts.append(self.reference)
        self._embed(texts)

    @cached_property
    def _qa_vectors(self) -> np.ndarray:
        return self._embed([self.question or " ", self.answer or " "])

    @cached_property
    def sentence_vectors(self) -> np.ndarray:
        return self._embed(self.sentences) if self.sentences else np.zeros((0, 512))

    # ------------------------------------------------------------------ the question's views

    @cached_property
    def question_units(self) -> frozenset[str]:
        return content_units(self.question, question=True)

    @cached_property
    def question_idf(self) -> dict[str, float]:
        # Smoothed IDF (log((n+1)/(df+1)) + 1) stays on one scale whether a sample has one
        # sentence or two hundred, so the coverage cuts transfer across sample sizes.
        n = len(self.sentence_units)
        return {
            u: math.log((n + 1) / (sum(1 for d in self.sentence_units if u in d) + 1)) + 1.0
            for u in self.question_units
        }

    @cached_property
    def question_coverage(self) -> np.ndarray:
        """Per sentence: IDF-weighted share of the question's content units in it."""
        w = self.question_idf
        total = sum(w.values())
        if total <= 0.0:
            return np.zeros(len(self.sentences))
        return np.array([sum(v for u, v in w.items() if u in su) / total for su in self.sentence_units])

    @cached_property
    def question_cosine(self) -> np.ndarray:
        if not self.sentences:
            return np.zeros(0)
        return self.sentence_vectors @ self._qa_vectors[0]

    @cached_property
    def semantic_relevance(self) -> np.ndarray:
        s = self.settings
        return _calibrate(self.question_cosine, s.sentence_cos_low, s.sentence_cos_high)

    @cached_property
    def relevance(self) -> np.ndarray:
        """Per sentence: the blended relevance to the question, in [0, 1]."""
        lw = self.settings.lexical_weight
        if lw >= 1.0:
            return self.question_coverage
        return lw * self.question_coverage + (1.0 - lw) * self.semantic_relevance

    def per_context_max(self, values: np.ndarray) -> list[float]:
        """The max of a per-sentence view over each context's sentences (0.0 for empty ones)."""
        out = [0.0] * len(self.contexts)
        for v, i in zip(values, self.owner):
            out[i] = max(out[i], float(v))
        return out

    # ------------------------------------------------------------------ answer relevancy

    @cached_property
    def noncommittal(self) -> bool:
        return is_noncommittal(self.answer)

    @cached_property
    def answer_relevancy(self) -> dict[str, float]:
        """The relevancy views: calibrated cos(Q, A), the answer's grounding near the sentence
        that best matches the question, and their blend ``score``."""
        s = self.settings
        qa = float(self._qa_vectors[0] @ self._qa_vectors[1])
        qa_cal = float(_calibrate(qa, s.cos_low, s.cos_high))
        out = {"cos_question_answer": qa, "question_answer": qa_cal}
        if not self.sentences:
            out["score"] = qa_cal
            return out
        k = int(np.argmax(self.relevance))
        window: set[str] = set(self.sentence_units[k])
        for j in (k - 1, k + 1):
            if 0 <= j < len(self.sentences) and self.owner[j] == self.owner[k]:
                window |= self.sentence_units[j]
        lexical = coverage(content_units(self.answer), window)
        semantic = float(_calibrate(float(self.sentence_vectors[k] @ self._qa_vectors[1]),
                                    s.cos_low, s.cos_high))
        grounding = max(lexical, semantic)
        w = s.relevancy_question_weight
        out.update(grounding_lexical=lexical, grounding_semantic=semantic, grounding=grounding,
                   score=w * qa_cal + (1.0 - w) * grounding)
        return out

    # ------------------------------------------------------------------ answer statements

    @cached_property
    def statements(self) -> list[str]:
        return split_statements(self.answer)

    @cached_property
    def statement_match(self) -> np.ndarray:
        """Statements (the answer itself when it has none) x contexts: each statement's best
        match to one of the context's sentences, in [0, 1] (see the module docstring)."""
        stmts = self.statements or ([self.answer] if self.answer else [])
        out = np.zeros((len(stmts), len(self.contexts)))
        if not stmts or not self.sentences:
            return out
        match = self._sentence_match(stmts)
        for j, i in enumerate(self.owner):
            out[:, i] = np.maximum(out[:, i], match[:, j])
        return out

    def _sentence_match(self, stmts: Sequence[str]) -> np.ndarray:
        """``stmts`` x the contexts' sentences: IDF-weighted lexical share and calibrated
        embedding cosine, blended (the match :attr:`statement_match` keeps per context)."""
        cos = _calibrate(self._embed(stmts) @ self.sentence_vectors.T,
                         _ALIGN_COS_LOW, _ALIGN_COS_HIGH)
        weights = [idf_weights(content_units(t), self.sentence_units) for t in stmts]
        lex = np.array([[weighted_coverage(w, su) for su in self.sentence_units] for w in weights])
        return _MATCH_LEXICAL_WEIGHT * lex + (1.0 - _MATCH_LEXICAL_WEIGHT) * cos

    def closest_sentences(self, which: Sequence[int]) -> list[tuple[int, str]]:
        """For each statement index in ``which``, the context sentence it matches best (the
        match of :attr:`statement_match`) as ``(context index, sentence)``; ``(-1, "")`` when
        the contexts have no sentence. Embeds only what the embedder has not cached."""
        if not which:
            return []
        if not self.sentences:
            return [(-1, "")] * len(which)
        match = self._sentence_match([self.statements[i] for i in which])
        best = match.argmax(axis=1)
        return [(self.owner[int(j)], self.sentences[int(j)]) for j in best]

    @cached_property
    def answer_reference_cosine(self) -> float:
        v = self._embed([self.answer or " ", self.reference or " "])
        return float(v[0] @ v[1])
