"""Settings of the LLM judge: one frozen, validated model, documented field by field."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal
from urllib.parse import urlparse

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

__all__ = ["LLMJudgeSettings"]


def _key_from_env() -> SecretStr:
    return SecretStr(os.environ.get("OPENAI_API_KEY", ""))


class LLMJudgeSettings(BaseModel):
    """How the LLM judge talks to an OpenAI-compatible endpoint and how much it may spend.

    Frozen and hashable-by-value: one instance configures one :class:`LLMJudge`. The API key is a
    ``SecretStr``: its value never appears in ``repr``, logs or error messages.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    base_url: str | None = None
    """Endpoint root, e.g. ``http://127.0.0.1:8000/v1`` (vLLM), ``http://127.0.0.1:11434/v1``
    (Ollama), a LiteLLM proxy, or an Azure resource (``https://x.openai.azure.com``, with
    ``api_version``). ``None``: api.openai.com (or ``OPENAI_BASE_URL``, read by the client)."""
    api_key: SecretStr = Field(default_factory=_key_from_env)
    """Defaults to ``$OPENAI_API_KEY``. May be empty for local servers that need no key."""
    api_version: str | None = None
    """Set for Azure OpenAI: the judge then uses ``AsyncAzureOpenAI`` and ``model`` is the
    deployment name."""
    model: str = "gpt-4o-mini"
    temperature: float | None = Field(0.0, ge=0.0, le=2.0)
    """``None``: not sent (the server's default). A server that answers 400 naming the
    parameter (OpenAI's reasoning models, a LiteLLM proxy without ``drop_params``) gets one
    retry without it, and the judge stops sending it to that endpoint."""
    seed: int | None = 42
    """Sent with every request (vote ``i`` uses ``seed + i``); ``None``: not sent. Servers that
    ignore it are still deterministic at temperature 0 up to their own nondeterminism. Dropped
    like ``temperature`` when the server rejects it."""
    votes: int = Field(1, ge=1, le=15)
    """Self-consistency: independent samples per verdict call, strict majority per verdict
    (a tie counts as 0). Voted requests use ``vote_temperature``."""
    vote_temperature: float = Field(0.7, gt=0.0, le=2.0)
    """Temperature of every request of a voted call (``votes > 1``, or an aspect criterion with
    ``strictness > 1``): at temperature 0 the samples could not disagree, so votes would add
    cost and no information."""
    n_questions: int = Field(3, ge=1, le=10)
    """Questions the decompose call generates for answer relevancy."""
    max_concurrency: int = Field(8, ge=1, le=1024)
    """Requests in flight at once, across all samples this judge serves."""
    requests_per_minute: float = Field(500.0, gt=0.0)
    """Ceiling of the adaptive rate limiter; it halves its rate on every 429 and climbs back
    additively."""
    tokens_per_hour: int | None = Field(None, gt=0)
    """Hard token budget over any sliding hour (prompt + completion); ``None`` = unlimited."""
    request_timeout_s: float = Field(60.0, gt=0.0)
    """Total time of one HTTP attempt: the whole exchange, however slowly the server sends."""
    max_retries: int = Field(4, ge=0, le=20)
    """Retries of one call after a retryable error (429, 408, 409, 5xx, timeout, connection)."""
    deadline_s: float = Field(180.0, gt=0.0)
    """Overall limit for one sample's judge work: all its calls, retries, repairs and waits.
    What is not answered by then is null with ``judge_timeout``."""
    backoff_initial_s: float = Field(0.5, gt=0.0)
    backoff_max_s: float = Field(30.0, gt=0.0)
    response_format: Literal["json_schema", "json_object", "none"] = "json_schema"
    """``json_schema``: a strict schema per request, built from the parsers' pydantic models
    (structured outputs on OpenAI/Azure, guided decoding on vLLM, ``format`` on Ollama).
    A 400 naming ``response_format`` falls back to ``json_object`` (then to none) for the rest
    of the judge's life, logged once. The reply is parsed and validated the same way in every
    mode."""
    max_output_tokens: int = Field(2048, ge=16, le=131072)
    """``max_tokens`` of one request; reserved in the token budget before each call. A claim of
    the ``grounding`` reply (statement, reason, contexts, verdict) takes about 40-60 tokens, so
    2048 holds answers of about 35 statements; a truncated reply gets one repair with twice as
    many."""
    reasoning_output_tokens: int = Field(8192, ge=16, le=131072)
    """``max_tokens`` once the endpoint shows it is a reasoning model (a reply reports
    ``completion_tokens_details.reasoning_tokens``, carries ``reasoning_content`` or a
    ``<think>`` block): reasoning counts against the output limit, so 1024 would cut most
    replies off. Also the budget of the repair after such a reply was truncated."""
    max_tokens_param: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"
    """Reasoning models on api.openai.com accept only ``max_completion_tokens``; a 400 naming
    ``max_tokens`` switches to it for the rest of the judge's life."""
    max_context_chars: int = Field(24_000, ge=200)
    """Total characters of contexts shown to the judge; longer contexts are cut, fairly across
    contexts, with a visible marker (the finding's ``extra["truncated_contexts"]`` says so)."""
    max_text_chars: int = Field(8_000, ge=200)
    """Characters of the question, the answer and the reference each shown to the judge."""
    cache_size: int = Field(10_000, ge=0)
    """Entries of the in-memory verdict cache (0 disables it)."""
    prompts_dir: Path | None = None
    """A directory of prompt files that replace the packaged ones with the same name."""

    @field_validator("base_url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        if v is None:
            return None
        u = urlparse(v)
        if u.scheme not in ("http", "https") or not u.netloc:
            raise ValueError(f"base_url must be an http(s) URL, got {v!r}")
        return v.rstrip("/")

    @field_validator("model")
    @classmethod
    def _model(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("model must not be empty")
        return v.strip()

    @model_validator(mode="after")
    def _check(self) -> LLMJudgeSettings:
        if self.deadline_s < self.request_timeout_s:
            raise ValueError("deadline_s must be at least request_timeout_s")
        if self.backoff_max_s < self.backoff_initial_s:
            raise ValueError("backoff_max_s must be at least backoff_initial_s")
        if self.api_version is not None and self.base_url is None:
            raise ValueError("api_version (Azure) needs base_url, the Azure endpoint")
        if self.prompts_dir is not None and not self.prompts_dir.is_dir():
            raise ValueError(f"prompts_dir {self.prompts_dir} is not a directory")
        return self

    @property
    def is_azure(self) -> bool:
        return self.api_version is not None
