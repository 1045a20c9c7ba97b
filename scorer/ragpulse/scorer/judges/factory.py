"""Build a judge from a few user-facing options (CLI flags, service settings)."""

from __future__ import annotations

import enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .base import Judge
from .registry import DEFAULT_JUDGE, JUDGE_INPUTS, resolve_judge

if TYPE_CHECKING:
    from .nli import NliJudgeSettings

__all__ = ["BUNDLED_MODEL_DIR", "JudgeChoice", "build_judge"]

BUNDLED_MODEL_DIR = Path(__file__).resolve().parent / "nli" / "faith_e5"
"""ragpulse's own faithfulness cross-encoder (int8 ONNX, ``train/``), the ``model`` judge's
default model directory."""


JudgeChoice = enum.Enum("JudgeChoice", [(n.replace("-", "_"), n) for n in JUDGE_INPUTS], type=str)
"""What ``--judge`` accepts (``registry.JUDGE_INPUTS``: the judges' names, then their old names),
as the enum the CLI's choices are drawn from."""


def build_judge(
    choice: JudgeChoice | str = DEFAULT_JUDGE,
    *,
    model: str | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    votes: int = 1,
    tokens_per_hour: int | None = None,
    threads: int = 1,
    max_concurrency: int = 8,
    request_timeout_s: float | None = None,
    deadline_s: float | None = None,
    nli: NliJudgeSettings | None = None,
    model_dir: str | Path | None = None,
    positive_label: str | None = None,
    batch_size: int | None = None,
) -> Judge:
    """A ready judge. Raises ``ValueError`` with a user-facing message for bad options.

    ``choice`` is a judge's name or an old name of one (``registry``). ``model`` (the default)
    is the NLI judge with ragpulse's own bundled model
    (:data:`BUNDLED_MODEL_DIR`, unless ``model_dir``/``nli.model_dir`` name another),
    ``terse_claims="with-question"``, ``premise="views"`` with ``premise_view_sentences=1`` and
    ``premise_neighbours=0`` (each statement against its 2 best-overlapping sentences: with one
    context each alone; with several, its P is the mean of the best sentence's alone and both
    packed into one premise), ``candidates=2`` (for ``premise="chunks"``) and 2 workers of one
    onnxruntime thread (unless ``nli`` sets them).

    The LLM judge reads ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL`` when ``api_key``/``base_url`` are
    not given; every judge embeds with the local multilingual USE model. The NLI judge starts from
    ``nli`` (default settings, with ``threads`` onnxruntime threads, when ``None``); ``model_dir``,
    ``positive_label`` and ``batch_size`` given here override it. It loads its model here: a
    missing or malformed model directory, an unknown label or a missing ``nli`` extra is a
    ``ValueError`` now, not on the first sample.
    """
    from ..embeddings import USEEmbedder

    name = resolve_judge(choice)
    embedder = USEEmbedder(threads=threads)
    if name == "fast":
        from .local import LocalJudge, LocalJudgeSettings

        return LocalJudge(LocalJudgeSettings(threads=threads), embedder=embedder)
    if name == "nli":
        return _nli_judge(nli, embedder, threads=threads, model_dir=model_dir,
                          positive_label=positive_label, batch_size=batch_size)
    if name == "model":
        # the nli judge with the bundled model: its directory unless one is given, terse
        # statements judged as claims about the question (how it was trained), each statement
        # against the 2 chunks sharing most of its tokens (dev set: AUROC 0.731 as with every
        # chunk, 0.772 with 1, but 1 lets a statement credit one context only; 2.5x fewer pairs
        # than every chunk for 5 contexts), 2 worker threads of one onnxruntime thread each
        # (5.0-5.4 samples/s on 2 cores, as one worker of 2 threads at low load; more robust
        # under load in one run: bench/local_model_speed.py). Premises chosen before the model
        # (issue 22 items 6-7): each statement against its 2 best-overlapping sentences alone
        # (premise sentences, no neighbours, <= 128 tokens) instead of 256-token chunks: dev
        # 0.748 (chunks 0.742), QAGS-CNNDM 0.744 (0.686), FaithBench 0.589 (0.545), HaluEval
        # 0.768 (0.782), JNLI 0.830 (same), 1.5x fewer CPU seconds a sample (docs/judges.md).
        # premise="auto" (the two sentences packed into one premise when there are several
        # contexts) lifted the dev set with @4 (blend 0.715 -> 0.759) and is 1.14-1.20x faster,
        # but the fresh confirmation set did not confirm it (blend 0.723 -> 0.717, model alone
        # 0.748 -> 0.712): not the default (docs/judges.md). The blend with the lexical
        # detector only for one-context samples (blend_max_contexts=1): with several passages a
        # wrong answer is made of retrieved words the lexical half finds supported; the model
        # alone there: dev 0.715 -> 0.736, confirmation 0.723 -> 0.748, and 5.0 -> 5.8 samples/s
        # on the 5-context trace.
        # premise="views" with premise_view_sentences=1 (2026-11-27): with several contexts a
        # statement's P is the mean of its best sentence's alone and its best two packed into
        # one premise (one context: sentences, as before). Over the three hand-written sets
        # (462 rows, model alone) +0.038 (90 % interval +0.018 .. +0.059), each set up (dev
        # +0.041, confirmation +0.014, blind +0.052); two pairs a statement as sentences, 0.91x
        # its speed (5.3-5.7 samples/s on the 5-context trace); the shared sets have one context
        # a sample, so they are unchanged. Both sentences alone beside the packed premise
        # (premise_view_sentences unset) gains no more and runs three pairs a statement.
        # Settings given explicitly win.
        own = _local_model_settings(nli)
        return _nli_judge(own, embedder, threads=threads, model_dir=model_dir,
                          positive_label=positive_label, batch_size=batch_size, name="model")
    return _llm_judge(embedder, model=model, base_url=base_url, api_key=api_key, votes=votes,
                      tokens_per_hour=tokens_per_hour, max_concurrency=max_concurrency,
                      request_timeout_s=request_timeout_s, deadline_s=deadline_s)


def _local_model_settings(nli: NliJudgeSettings | None) -> NliJudgeSettings:
    """The nli settings of the model judge (see :func:`build_judge`). Raises ValueError
    when the model directory is missing."""
    from .nli import NliJudgeSettings

    base = nli or NliJudgeSettings()
    given = base.model_fields_set
    own = base.model_copy(update={
        "model_dir": base.model_dir or BUNDLED_MODEL_DIR,
        "terse_claims": base.terse_claims if "terse_claims" in given else "with-question",
        "candidates": base.candidates if "candidates" in given else 2,
        "workers": base.workers if "workers" in given else 2,
        "premise": base.premise if "premise" in given else "views",
        "premise_view_sentences": (base.premise_view_sentences
                                   if "premise_view_sentences" in given else 1),
        "premise_neighbours": base.premise_neighbours if "premise_neighbours" in given else 0,
        "blend_max_contexts": (base.blend_max_contexts if "blend_max_contexts" in given
                               else 1),
    })
    if not Path(own.model_dir).is_dir():
        raise ValueError(f"the model judge's model directory {own.model_dir} is missing: "
                         "this installation has no bundled model (train/README.md rebuilds "
                         "it; --model-dir DIR names another)")
    return own


def _llm_judge(embedder: Any, *, model: str | None, base_url: str | None, api_key: str | None,
               votes: int, tokens_per_hour: int | None, max_concurrency: int,
               request_timeout_s: float | None, deadline_s: float | None) -> Judge:
    """The LLM judge of :func:`build_judge`. Raises ValueError for bad options."""
    from pydantic import ValidationError

    from .llm import LLMJudge, LLMJudgeSettings

    kwargs: dict[str, object] = {"votes": votes, "max_concurrency": max_concurrency}
    if model:
        kwargs["model"] = model
    if base_url:
        kwargs["base_url"] = base_url
    if api_key:
        kwargs["api_key"] = api_key
    if tokens_per_hour:
        kwargs["tokens_per_hour"] = tokens_per_hour
    if request_timeout_s is not None:
        kwargs["request_timeout_s"] = request_timeout_s
    if deadline_s is not None:
        kwargs["deadline_s"] = deadline_s
        if request_timeout_s is None:  # a short deadline shortens the (default) request timeout
            kwargs["request_timeout_s"] = min(
                deadline_s, LLMJudgeSettings.model_fields["request_timeout_s"].default)
    try:
        settings = LLMJudgeSettings(**kwargs)
    except ValidationError as exc:  # a user-facing message, not a pydantic dump
        raise ValueError("; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}"
                                   for e in exc.errors())) from None
    return LLMJudge(settings, embedder=embedder)


def _nli_judge(settings: NliJudgeSettings | None, embedder: Any, *, threads: int,
               model_dir: str | Path | None, positive_label: str | None,
               batch_size: int | None, name: str = "nli") -> Judge:
    from pydantic import ValidationError

    from .local import LocalJudgeSettings
    from .nli import NliJudge, NliJudgeSettings

    base = settings or NliJudgeSettings()
    # given settings keep their own onnxruntime threads; flags-only callers share ``threads``
    changes: dict[str, Any] = {} if settings is not None else {"threads": threads}
    if model_dir is not None:
        changes["model_dir"] = Path(model_dir)
    if positive_label is not None:
        changes["positive_label"] = positive_label
    if batch_size is not None:
        changes["batch_size"] = batch_size
    try:
        merged = NliJudgeSettings.model_validate({**base.model_dump(), **changes})
    except ValidationError as exc:
        raise ValueError("; ".join(f"nli.{'.'.join(map(str, e['loc']))}: {e['msg']}"
                                   for e in exc.errors())) from None
    return NliJudge(merged, embedder=embedder, local_settings=LocalJudgeSettings(threads=threads),
                    name=name)

