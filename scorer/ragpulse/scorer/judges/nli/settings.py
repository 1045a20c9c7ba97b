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

__all__ = ["RESOURCE_FIELDS", "NliJudgeSettings", "passages", "premise_modes",
           "scoring_settings", "settings_tag"]

# fields that change how fast or where the judge runs, never a score
RESOURCE_FIELDS = frozenset({"model_dir", "threads", "batch_size", "workers", "max_pending"})
# scoring settings the stored version names otherwise (the blend: its own tag on the samples it
# blends), that only name a score (``model_name``) or that decide whether a sample is judged at
# all, never its P (``max_pairs``: too many pairs is ``input_too_large``): left out of
# :func:`settings_tag`
_TAGGED_ELSEWHERE = frozenset({"model_name", "blend", "blend_max_contexts", "max_pairs"})


class NliJudgeSettings(BaseModel):
    """Frozen settings of :class:`~ragpulse.scorer.judges.nli.NliJudge` (env ``RAGPULSE_NLI__*``
    under ``ragpulse scorer``/``up``; flags ``--model-dir``, ``--positive-label`` ...).

    Model
        ``model_dir``: a directory with ``model.onnx`` (or ``onnx/model.onnx``), ``tokenizer.json``
        and ``config.json`` (``id2label``, ``max_position_embeddings``); required by the judge,
        optional here so that the service settings validate without it when another judge runs.
        ``positive_label``: the label that means "the premise supports the hypothesis", by name
        or by index (``"1"``); ``None`` detects it among ``entailment``/``supported``/
        ``consistent``/``faithful``... ``model_name``: stored beside every score; ``None`` takes
        ``config.json``'s ``_name_or_path`` when it is a hub name, else the directory's name.

    Windows
        ``max_length``: tokens per pair; ``None`` is the model's own limit (``tokenizer.json``'s
        truncation, ``tokenizer_config.json``'s ``model_max_length``, ``config.json``'s
        ``max_position_embeddings``; the smallest wins, and a larger value here is cut to it).
        A statement keeps at most ``max_statement_tokens`` (``None``: half the window); a context
        longer than the rest of the window is split into chunks overlapping by ``chunk_overlap``
        tokens, and a statement's P(supported) is its best chunk's. ``candidates``: run each
        statement only against the chunks sharing the most of its tokens (``None``: all); the
        others count as P = 0.

    Premises (chosen before the model)
        ``premise``: what a statement is judged against. ``chunks``: the windows above (with
        ``candidates``). ``sentences``: each context split into sentences
        (``segment.split_sentences``, EN/JA/ZH); per statement the ``premise_sentences``
        sentences (over all contexts) sharing the largest share of its distinct tokens, each run
        as one premise with up to ``premise_neighbours`` sentences on either side, the window
        capped at ``premise_tokens`` tokens (nearest neighbours first; a sentence longer than the
        cap is cut into overlapping pieces that count as sentences); ``P[i, j]`` is the best of
        context ``j``'s windows, ``candidates`` is not used. ``packed``: the same windows of one
        statement joined into one premise in document order (best-ranked first until
        ``premise_tokens``), across contexts, so a statement that fuses two passages can be
        supported by both; its P counts for every context that gave the premise a sentence
        (context utilization: each of them was used together). ``auto``: ``packed`` for a
        sample with two or more non-blank contexts (retrieved passages an answer may fuse),
        ``sentences`` for one (a single document). ``views``: for a sample with two or more
        non-blank contexts, both ``sentences`` and ``packed``, ``P`` the mean of their two
        matrices (a statement's P: the mean of its best single sentence's and its packed
        premise's, which holds those sentences; one more pair per statement on such samples: with
        ``premise_sentences`` 2, three pairs where ``sentences`` runs two; context utilization:
        every context of the packed premise gets the statement's P, as under ``packed``);
        ``sentences`` for one. ``premise_view_sentences``: under ``views`` with two or more
        contexts, how many of those best sentences (at most ``premise_sentences``) the sentence
        view runs alone (``None``: all of them; 1: only the best one, so one pair beside the
        packed one: with ``premise_sentences`` 2 as many pairs as ``sentences``); the packed
        premise still holds all of them. ``premise_heading``: when a
        context's first sentence has at most this many tokens and the context goes on (a title:
        "12-month Fixed Deposit.", "Results 2023."), it heads every premise taken from a later
        sentence of that context, within ``premise_tokens``, so a sentence that leaves its
        subject to the title is judged with it; 0 (default): off. ``evidence``: premises that
        can hold a statement's evidence, the best deciding (never a mean): its ``candidates``
        chunks (a passage that fits the window is one premise, a longer one overlapping
        windows), its best ``premise_view_sentences`` sentences alone and, with two or more
        passages, its best sentences packed across them (issue 39: a statement that fuses two
        sentences of one passage is supported by the passage).

    Resources
        ``threads``: onnxruntime intra-op threads. ``batch_size``: pairs per forward pass.
        ``workers``: threads running samples' inference; ``max_pending``: samples admitted at
        once (others wait asynchronously). ``max_pairs``: statement-chunk pairs per sample; beyond
        it the model's facts are ``input_too_large`` (status skipped), not minutes of CPU.

    Claims
        ``terse_claims``: how a terse statement ("Yes.", "No.", a bare name or number: at most
        4 words, or 8 CJK characters) becomes a hypothesis. ``as-is``: judged alone.
        ``with-question``: one followed by another statement is judged together with it
        ("No. The Basic plan only includes email support.", both statements get its
        probability); a lone one is judged as the claim it makes about the question
        (``question + " " + statement``). The bundled ``local-model`` was trained on both forms.

    Blend
        ``blend``: whether statement support blends the model's P(supported) with the lexical
        detector's (``support-lr@5``) through the weights in the model directory's
        ``blend.json`` (:mod:`~ragpulse.scorer.judges.nli.blend`). ``auto``: when that file
        exists (the bundled ``local-model`` ships one); ``on``: required (a missing file is an
        error at start); ``off``: the model alone. Weights fitted for another model or other
        lexical weights are an error at start in ``auto`` and ``on`` alike.
        ``blend_max_contexts``: blend only samples with at most this many non-blank contexts;
        a sample with more gets the model alone (``None``: every sample). Retrieved passages
        that hold the wrong value attached to another entity are what a wrong RAG answer is
        often made of, and a word-overlap detector finds those words supported: on the
        multi-passage dev and confirmation sets the model alone beats the blend.

    Decision
        ``threshold``: P(supported) at or above which a statement counts as supported (the
        counts, context utilization's "used"). ``faithfulness_value`` as for the local judge:
        ``expected`` makes faithfulness the mean P(supported), ``verdicts`` the thresholded share.
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

    threads: int = Field(default=1, ge=1, le=64)
    batch_size: int = Field(default=8, ge=1, le=1024)
    workers: int = Field(default=1, ge=1, le=64)
    max_pending: int = Field(default=64, ge=1, le=100_000)
    max_pairs: int = Field(default=512, ge=1, le=1_000_000)

    terse_claims: Literal["as-is", "with-question"] = "as-is"

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
    tags the samples it blends, ``model_name`` and ``max_pairs``), e.g. ``views#de9f2c8b``.
    Scores made under other premises, windows or claims get another version, so they never mix
    unmarked on a dashboard; resources (threads, batch size ...) leave it as it is."""
    body = {k: v for k, v in scoring_settings(settings).items() if k not in _TAGGED_ELSEWHERE}
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:8]
    return f"{settings.premise}#{digest}"
