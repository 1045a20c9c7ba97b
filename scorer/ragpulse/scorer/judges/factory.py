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
    is the NLI judge with ragpulse's bundled model (:data:`BUNDLED_MODEL_DIR`, unless
    ``model_dir``/``nli.model_dir`` name another) and the settings it was chosen with
    (:func:`_local_model_settings`; docs/judges.md, "The model judge"), settings given in
    ``nli`` winning. The NLI judges start from ``nli`` (defaults with ``threads`` onnxruntime
    threads when ``None``); ``model_dir``, ``positive_label`` and ``batch_size`` override it,
    and the model is loaded here, so a missing or malformed model directory, an unknown label or
    a missing ``nli`` extra fails now, not on the first sample. The LLM judge reads
    ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL`` when ``api_key``/``base_url`` are not given. Every
    judge embeds with the local multilingual USE model.
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
        # the nli judge with the bundled model and the settings it was chosen with (terse
        # claims with the question, evidence premises: the best sentence alone and the best two
        # packed, then, below a P of 0.7, the passage window that shares most with the
        # statement; a statement's P its best premise's; the blend for one-context samples):
        # the measurements behind each are in docs/history/judges.md and
        # docs/history/faithfulness-data.md; given ones win.
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
        # one window a statement, not two: the same AUROC (RAG sets pooled +0.004) at about half
        # the NLI CPU of a written answer (docs/history/judges.md, "Written answers", K2)
        "candidates": base.candidates if "candidates" in given else 1,
        "workers": base.workers if "workers" in given else 2,
        "premise": base.premise if "premise" in given else "evidence",
        # statements whose sentence premises already reach P 0.7 skip the passage windows
        # (0.9 until 2026-11-30: docs/history/faithfulness-data.md, C6, then
        # docs/history/judges.md, "Written answers")
        "evidence_cut": base.evidence_cut if "evidence_cut" in given else 0.7,
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

