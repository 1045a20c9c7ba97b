"""Build a judge from a few user-facing options (CLI flags, service settings)."""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

from .base import Judge

if TYPE_CHECKING:
    from ..privacy import PrivacySettings

__all__ = ["JudgeChoice", "build_judge"]


class JudgeChoice(str, enum.Enum):
    local = "local"
    llm = "llm"


def build_judge(
    choice: JudgeChoice | str,
    *,
    model: str | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    votes: int = 1,
    tokens_per_hour: int | None = None,
    threads: int = 1,
    max_concurrency: int = 8,
    privacy: PrivacySettings | None = None,
) -> Judge:
    """A ready judge. Raises ``ValueError`` with a user-facing message for bad options.

    The LLM judge reads ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL`` when ``api_key``/``base_url`` are
    not given; both judges embed with the local multilingual USE model. With ``privacy`` whose
    ``redact`` is on, the judge is wrapped in a :class:`~ragpulse.scorer.privacy.RedactingJudge`
    so it only ever sees redacted samples.
    """
    from ..embeddings import USEEmbedder

    choice = JudgeChoice(choice)
    embedder = USEEmbedder(threads=threads)
    if choice is JudgeChoice.local:
        from .local import LocalJudge, LocalJudgeSettings

        return _private(LocalJudge(LocalJudgeSettings(threads=threads), embedder=embedder), privacy)
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
    return _private(LLMJudge(LLMJudgeSettings(**kwargs), embedder=embedder), privacy)


def _private(judge: Judge, privacy: PrivacySettings | None) -> Judge:
    if privacy is None or not privacy.redact:
        return judge
    from ..privacy import RedactingJudge, build_redactor

    return RedactingJudge(judge, build_redactor(privacy))
