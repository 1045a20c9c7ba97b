"""The LLM judge: reference-free RAG metrics from any OpenAI-compatible chat endpoint.

Two calls cover the card's four metrics (``decompose``, then ``assess``); prompts are versioned
data files; replies are strict JSON validated per task; requests are paced, retried, budgeted
and cached. See ``docs/llm-judge.md``.
"""

from .counters import LLMJudgeStats
from .judge import LLMJudge, build_llm_judge
from .limits import AdaptiveRateLimiter, TokenBudget, estimate_prompt_tokens, parse_retry_after
from .plan import render_requests
from .prompts import Prompt, PromptError, PromptLibrary
from .settings import LLMJudgeSettings

__all__ = [
    "AdaptiveRateLimiter",
    "LLMJudge",
    "LLMJudgeSettings",
    "LLMJudgeStats",
    "Prompt",
    "PromptError",
    "PromptLibrary",
    "TokenBudget",
    "build_llm_judge",
    "estimate_prompt_tokens",
    "parse_retry_after",
    "render_requests",
]
