"""Settings of the NLI judge: where the model is, how its labels read, how it runs.

Only pydantic here: the service settings import this module whatever the judge, so nothing may
import onnxruntime or tokenizers at import time.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .quoted import QUOTED_VERSION
from .values import VALUES_VERSION

__all__ = ["RESOURCE_FIELDS", "NliJudgeSettings", "passages", "premise_modes",
           "scoring_settings", "settings_tag"]

# fields that change how fast or where the judge runs, never a score
RESOURCE_FIELDS = frozenset({"model_dir", "threads", "batch_size", "workers", "max_pending"})
# scoring settings the stored version names otherwise (the blend: its own tag on the samples it
# blends), that only name a score (``model_name``) or that decide whether a sample is judged at
# all, never its P (``max_pairs``: too many pairs is ``input_too_large``): left out of
# :func:`settings_tag`; ``quoted_support`` and ``canonical_values`` are named in the tag itself
# (``+quoted@1``, ``+values@1``), so that turning one off gives back the version of the setups
# scored before it existed
_TAGGED_ELSEWHERE = frozenset({"model_name", "blend", "blend_max_contexts", "max_pairs",
                               "canonical_values", "quoted_support"})


class NliJudgeSettings(BaseModel):
    """Frozen settings of :class:`~ragpulse.scorer.judges.nli.NliJudge` (env ``RAGPULSE_NLI__*``
    under ``ragpulse scorer``/``up``; flags ``--model-dir``, ``--positive-label`` ...). The
    settings table, how premises are chosen, and the measurements behind the ``model`` judge's
    defaults: docs/judges.md ("Configuring the NLI judges", "How the NLI judge scores").

    Model: ``model_dir`` holds ``model.onnx`` (or ``onnx/model.onnx``), ``tokenizer.json`` and
    ``config.json``; optional here so the service settings validate when another judge runs.
    ``positive_label`` is the label meaning "supported" (name or index; ``None`` detects it).
    ``model_name`` is stored beside every score (``None``: ``config.json``'s hub name, else the
    directory's name).

    Windows: ``max_length`` tokens per pair (``None`` and larger values: the model's own limit);
    a statement keeps at most ``max_statement_tokens`` (``None``: half); longer contexts are cut
    into chunks overlapping by ``chunk_overlap``; ``candidates`` runs a statement only against
    the chunks sharing most of its tokens (the others count as P = 0).

    Premises: ``premise`` is what a statement is judged against: ``chunks`` (the windows),
    ``sentences`` (its ``premise_sentences`` best-overlapping sentences over all contexts, each
    alone with up to ``premise_neighbours`` neighbours within ``premise_tokens``), ``packed``
    (those joined into one premise across contexts; its P counts for every context that gave
    it a sentence), ``auto`` (``packed`` with two or more non-blank contexts, else
    ``sentences``), ``views`` (with two or more, the mean of ``sentences`` and ``packed``; else
    ``sentences``) or ``evidence`` (its chunks, best sentences and packed premise, the best
    deciding). ``premise_view_sentences`` caps the sentences run alone under ``views`` and
    ``evidence`` (``None``: all); ``evidence_cut`` makes ``evidence`` a cascade: the sentence
    premises run first, and a statement whose best one reaches that P skips the passage windows
    (``None``: every statement runs both); ``premise_heading`` > 0 puts a context's title-like first
    sentence of at most that many tokens in front of premises from its later sentences.

    Resources (never a score): ``threads`` (onnxruntime intra-op), ``batch_size`` (pairs per
    forward pass), ``workers`` (inference threads), ``max_pending`` (samples admitted at once).
    ``max_pairs`` bounds pairs per sample: beyond it the model's facts are ``input_too_large``.

    Claims: ``terse_claims`` ``as-is`` judges a terse statement ("Yes.", a bare value) alone;
    ``with-question`` judges it with the statement that follows it, or a lone one as
    ``question + " " + statement``.

    Blend: ``blend`` blends the model's P with ``support-lr@5``'s through the model directory's
    ``blend.json`` (:mod:`~ragpulse.scorer.judges.nli.blend`): ``auto`` when the file exists,
    ``on`` required, ``off`` never; weights fitted for another model or lexical detector are an
    error at start. ``blend_max_contexts`` blends only samples with at most that many non-blank
    contexts (``None``: all).

    Values: ``canonical_values`` rewrites the values of every premise and statement into one
    canonical form before the model reads them (:func:`~ragpulse.scorer.judges.nli.values.
    canonical`: "8 am" and "8:00", "three weeks" and "21 days", "half" and "50%" become the same
    tokens), so a value said another way is not read as another value; off by default.
    ``quoted_support`` (on by default) makes a statement that repeats one context's sentence, or
    a run of up to three, word for word (up to case, spacing, punctuation, markdown and citation
    markers) supported with P 1 whatever the model says (:mod:`~ragpulse.scorer.judges.nli.
    quoted`).

    Decision: ``threshold`` is the P(supported) at which a statement counts as supported;
    ``faithfulness_value`` ``expected`` makes faithfulness the mean P, ``verdicts`` the
    thresholded share.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    model_dir: Path | None = None
    positive_label: str | None = None
    model_name: str | None = Field(default=None, max_length=200)

    max_length: int | None = Field(default=None, ge=16, le=65_536)
    max_statement_tokens: int | None = Field(default=None, ge=4, le=65_536)
    chunk_overlap: int = Field(default=64, ge=0, le=65_536)
    candidates: int | None = Field(default=None, ge=1, le=65_536)

    premise: Literal["chunks", "sentences", "packed", "auto", "views", "evidence"] = "chunks"
    premise_sentences: int = Field(default=2, ge=1, le=1024)
    premise_neighbours: int = Field(default=1, ge=0, le=64)
    premise_tokens: int = Field(default=128, ge=8, le=65_536)
    premise_heading: int = Field(default=0, ge=0, le=512)
    premise_view_sentences: int | None = Field(default=None, ge=1, le=1024)
    evidence_cut: float | None = Field(default=None, ge=0.0, le=1.0)

    threads: int = Field(default=1, ge=1, le=64)
    batch_size: int = Field(default=8, ge=1, le=1024)
    workers: int = Field(default=1, ge=1, le=64)
    max_pending: int = Field(default=64, ge=1, le=100_000)
    max_pairs: int = Field(default=512, ge=1, le=1_000_000)

    terse_claims: Literal["as-is", "with-question"] = "as-is"
    canonical_values: bool = False
    quoted_support: bool = True

    blend: Literal["auto", "on", "off"] = "auto"
    blend_max_contexts: int | None = Field(default=None, ge=1, le=65_536)

    threshold: float = Field(default=0.5, ge=0.0, le=1.0)
    faithfulness_value: Literal["expected", "verdicts"] = "expected"


def passages(contexts: Iterable[str]) -> int:
    """How many retrieved passages a sample has: its non-blank contexts. What ``premise="auto"``
    and ``blend_max_contexts`` count."""
    return sum(1 for c in contexts if c.strip())


def premise_modes(premise: str, n_passages: int) -> tuple[str, ...]:
    """The premise modes a sample of ``n_passages`` (:func:`passages`) runs under ``premise``
    (not ``chunks``): ``auto`` packs across retrieved passages and judges one text by sentence,
    ``views`` runs both across passages and averages them."""
    multi = n_passages >= 2
    if premise == "auto":
        return ("packed",) if multi else ("sentences",)
    if premise == "views":
        return ("sentences", "packed") if multi else ("sentences",)
    return (premise,)


def scoring_settings(settings: NliJudgeSettings) -> dict[str, Any]:
    """``settings`` without :data:`RESOURCE_FIELDS`, as JSON values: what, besides the model's
    weights, decides the scores (premises, windows, claims, blend, decision). Caches of scores
    key on it, so a new setting counts unless it is declared a resource."""
    return settings.model_dump(mode="json", exclude=set(RESOURCE_FIELDS))


def settings_tag(settings: NliJudgeSettings) -> str:
    """What the stored scoring version says of ``settings``: the premise mode and a digest of
    every other setting that decides a model P (:func:`scoring_settings` less the blend, which
    tags the samples it blends, ``model_name`` and ``max_pairs``), e.g. ``views#de9f2c8b``,
    then ``+quoted@1`` when ``quoted_support`` is on and ``+values@1`` (the normaliser's
    version) when ``canonical_values`` is. Scores made
    under other premises, windows, claims or values get another version, so they never mix
    unmarked on a dashboard; resources (threads, batch size ...) leave it as it is."""
    body = {k: v for k, v in scoring_settings(settings).items() if k not in _TAGGED_ELSEWHERE}
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:8]
    values = f"+{VALUES_VERSION}" if settings.canonical_values else ""
    quoted = f"+{QUOTED_VERSION}" if settings.quoted_support else ""
    return f"{settings.premise}#{digest}{quoted}{values}"
