"""Settings of the local judge: resources, input bounds and the calibrated decision thresholds.

The thresholds were chosen by 5-fold cross-validation on public labeled sets (listed in
docs/benchmarks.md; ``bench/quality.py --tune`` prints the per-fold choices; ``docs/benchmarks.md`` the method).
They are few on purpose: every threshold here is a cut on one general, bounded feature, so a
deployment on other data can re-tune them without code changes. The blend weights and cosine
ranges were not cross-validated: they were set from the score distributions on the same sets.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ...model import Sample

__all__ = ["LocalJudgeSettings"]


class LocalJudgeSettings(BaseModel):
    """Frozen settings of :class:`~ragpulse.scorer.judges.local.LocalJudge`.

    Resources
        ``threads``: threads of the USE forward pass (onnxruntime's for the int8 pass, BLAS
        threads for the float one: explicit, as the package default of 4 oversubscribes a 2-core
        box). ``workers``: threads that run a sample's inference; the float embedder serializes
        its forward pass (the int8 one does not), so with it more than 2 workers only helps
        lexical work.
        ``max_pending``: samples admitted to the workers at once; callers beyond it wait
        (asynchronously) instead of growing an unbounded executor queue. ``cache_size``:
        embeddings kept in the LRU cache (retrieved passages repeat across traces).

    Input bounds (per sample; beyond them the facts are ``input_too_large``, status skipped)
        ``max_contexts``, ``max_chars`` (question + answer + contexts + reference). Each text is
        cut at ``max_text_chars`` before it is embedded; sentences per context at
        ``max_sentences_per_context``.

    Calibration (see the module docstring)
        Cosines of the multilingual USE model between a question and an answer that addresses it
        are low in absolute terms (median about 0.15 for short factoid answers), so they are
        mapped linearly from ``[cos_low, cos_high]`` onto [0, 1] before they are combined.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    threads: int = Field(default=1, ge=1, le=64)
    # One worker: the per-sample work is mostly GIL-bound Python (tokenizer, lexical views), so a
    # second worker thread on 2 cores measured slower (bench/speed_local.py: 1x2 vs 1x1).
    workers: int = Field(default=1, ge=1, le=64)
    max_pending: int = Field(default=64, ge=1, le=100_000)
    cache_size: int = Field(default=50_000, ge=0, le=10_000_000)

    max_contexts: int = Field(default=64, ge=1, le=10_000)
    max_chars: int = Field(default=400_000, ge=1_000)
    max_text_chars: int = Field(default=1_000, ge=64)  # the support detector's cut: shared cache keys
    max_sentences_per_context: int = Field(default=80, ge=1)

    support_weights_path: Path | None = None
    """Weights of the statement-support detector; ``None`` uses the ones shipped in the package."""
    faithfulness_value: Literal["expected", "verdicts"] = "expected"
    """``expected``: faithfulness is the expected share of supported statements, the mean of the
    detector's calibrated P(supported) (``metrics.EXPECTED_SHARE``); counts and verdicts stay
    thresholded. ``verdicts``: the share of statements at or above the detector's threshold.
    Measured through ``bench/quality.py`` (docs/benchmarks.md, *Quality (fast judge)*: the
    "AUROC, verdict share" column against "AUROC"): the threshold throws ranking away."""

    # --- answer relevancy -------------------------------------------------------------------
    cos_low: float = Field(default=0.0, ge=-1.0, le=1.0)
    cos_high: float = Field(default=0.4, ge=-1.0, le=1.0)
    relevancy_question_weight: float = Field(default=0.4, ge=0.0, le=1.0)
    """Weight of the calibrated cosine(question, answer); the rest goes to the answer's grounding
    in the context passage that best matches the question."""

    # --- context views ----------------------------------------------------------------------
    sentence_cos_low: float = Field(default=0.0, ge=-1.0, le=1.0)
    sentence_cos_high: float = Field(default=0.8, ge=-1.0, le=1.0)
    """Calibration of cosine(question, context sentence): both are full sentences on one topic,
    so these cosines run higher (median about 0.58 on JSQuAD) than question-answer ones."""
    lexical_weight: float = Field(default=0.7, ge=0.0, le=1.0)
    """Weight of IDF-weighted question coverage in a sentence's relevance; the rest is its
    calibrated embedding cosine with the question."""
    useful_threshold: float = Field(default=0.4, ge=0.0, le=1.0)
    used_threshold: float = Field(default=0.1, ge=0.0, le=1.0)
    """The floor of context utilization: an answer statement draws on the context it matches
    best only when that match reaches it (below: the statement is taken from no context).
    Cross-validated like the others ("answer from this context?": 0.094, held-out balanced
    accuracy 0.956); on the RAG corpus 0.05, 0.1, 0.2 and 0.33 gave a context utilization MAE
    of 0.071, 0.070, 0.079 and 0.094 (``bench/utilization_agreement.py --sensitivity``)."""
    needed_sentence_threshold: float = Field(default=0.4, ge=0.0, le=1.0)
    rating_lexical: tuple[float, float] = (0.2, 0.45)
    """Cuts on the best sentence's IDF-weighted question coverage: below the first 0, from the
    second on 2, between 1."""
    rating_semantic: tuple[float, float] = (0.25, 0.45)
    """Cuts on the best sentence's blended (lexical + embedding) relevance."""

    # --- reference metrics ------------------------------------------------------------------
    correctness_threshold: float | None = Field(default=None, ge=0.0, le=1.0)
    """P(supported) cut for answer/reference statement matching; ``None``: the detector's own."""

    @model_validator(mode="after")
    def _check(self) -> LocalJudgeSettings:
        if self.cos_high <= self.cos_low:
            raise ValueError("cos_high must be greater than cos_low")
        if self.sentence_cos_high <= self.sentence_cos_low:
            raise ValueError("sentence_cos_high must be greater than sentence_cos_low")
        for name in ("rating_lexical", "rating_semantic"):
            lo, hi = getattr(self, name)
            if not 0.0 <= lo <= hi <= 1.0:
                raise ValueError(f"{name} must be two cuts with 0 <= low <= high <= 1")
        return self

    def too_large(self, sample: Sample) -> str | None:
        """Why ``sample`` is over the input bounds (``max_chars`` over question, answer,
        contexts and reference; ``max_contexts``), or ``None`` when it is within them."""
        size = len(sample.question) + len(sample.answer) + sum(len(c) for c in sample.contexts)
        size += len(sample.reference or "")
        if size > self.max_chars or len(sample.contexts) > self.max_contexts:
            return (f"{size} chars, {len(sample.contexts)} contexts; limits {self.max_chars} "
                    f"chars, {self.max_contexts} contexts")
        return None
