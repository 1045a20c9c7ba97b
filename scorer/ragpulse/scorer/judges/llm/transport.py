"""The LLM judge's transport: one chat-completions request to an OpenAI-compatible endpoint, with
the token budget, pacing, concurrency slots, retries, timeouts and usage accounting around it.
What the reply *means* is not decided here (``calls.py`` parses it, ``findings.py`` builds the
metric results).

Failure handling, per request: retryable errors (429, 408, 409, 5xx, timeouts, connection
errors, a 200 whose body is not readable JSON) are retried with exponential backoff and full
jitter, at least as long as ``Retry-After``/``retry-after-ms`` says, within ``max_retries``, and
stop at once on ``aclose``. Other errors (400, 401, 403, 404, 422, insufficient quota) are
permanent and never retried. The openai client's own retries are off so that only this policy
applies.

Time: every request has a total timeout (``request_timeout_s``, enforced around the whole
exchange, not per socket read, so a server that drips one byte at a time is cut off too), and
all of a sample's requests share one deadline (:data:`SAMPLE_DEADLINE`, set by the judge's
``gather``): when it passes, what is not answered yet fails with ``judge_timeout``, whatever the
server does.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import random
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import openai

from ...model import ZERO_COST, Cost, Reason
from .counters import LLMJudgeStats
from .limits import AdaptiveRateLimiter, TokenBudget, estimate_prompt_tokens, parse_retry_after
from .parsing import ParseFailure, parse_reply_object, response_schema, strip_reasoning
from .prompts import Prompt
from .settings import LLMJudgeSettings

__all__ = [
    "SAMPLE_DEADLINE",
    "CallError",
    "ChatTransport",
    "Reply",
    "build_client",
    "classify",
    "cost_of",
]

log = logging.getLogger("ragpulse.scorer.judges.llm")

SAMPLE_DEADLINE: contextvars.ContextVar[float] = contextvars.ContextVar(
    "ragpulse_llm_sample_deadline", default=float("inf"))
"""The loop time at which the current sample's judge work must end (set by ``gather`` and
inherited by the tasks it starts); ``inf`` outside a sample."""


class CallError(Exception):
    """A call without a reply to use: no reply (after retries), a refusal, the budget, the
    deadline, a closed judge. ``cost`` is what was spent on it anyway."""

    def __init__(self, reason: Reason, detail: str, *, cost: Cost = ZERO_COST) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail
        self.cost = cost


class _Closed(Exception):
    """The transport was closed while a request or a wait was pending."""


class _RequestTimeout(Exception):
    """The request as a whole took longer than its total timeout."""


@dataclass
class Reply:
    """One completion as the judge needs it: content (reasoning stripped), why it ended, usage."""

    content: str | None
    finish_reason: str | None
    refusal: str | None
    prompt_tokens: int
    completion_tokens: int
    latency_ms: float
    reasoned: bool = False
    """The reply shows reasoning (reasoning tokens, ``reasoning_content``, a think block)."""
    prompt_truncated: bool = False


def cost_of(reply: Reply) -> Cost:
    """What one answered request cost: one call, its tokens and its latency."""
    return Cost(llm_calls=1.0, prompt_tokens=float(reply.prompt_tokens),
                completion_tokens=float(reply.completion_tokens), latency_ms=reply.latency_ms)


# A byte-level BPE token of natural text averages 3-5 UTF-8 bytes; a reported prompt shorter than
# one token per this many bytes of what was sent means the server dropped part of it.
_MAX_BYTES_PER_TOKEN = 6


@dataclass
class _Endpoint:
    """What the transport learned about its endpoint (one judge = one endpoint and model):
    request parameters the server rejected, the response format it accepts, whether the model
    reasons. Each change is logged once."""

    dropped: set[str] = field(default_factory=set)
    response_format: str = "json_schema"
    max_tokens_param: str = "max_tokens"
    reasoning: bool = False


_RETRYABLE_STATUS = frozenset({408, 409, 429})


def classify(exc: BaseException) -> tuple[Reason, bool, float | None]:
    """(reason if it is the last error, retryable?, server-requested wait in seconds)."""
    if isinstance(exc, (openai.APITimeoutError, _RequestTimeout)):
        return Reason.JUDGE_TIMEOUT, True, None
    if isinstance(exc, (json.JSONDecodeError, UnicodeDecodeError)):
        # A 200 whose body is cut short or not JSON: the server or a proxy failed mid-reply.
        return Reason.JUDGE_ERROR, True, None
    if isinstance(exc, openai.APIConnectionError):
        return Reason.JUDGE_ERROR, True, None
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        headers = dict(exc.response.headers) if exc.response is not None else {}
        wait = parse_retry_after(headers)
        if status == 429:
            # OpenAI's "insufficient_quota" is a 429 that no amount of waiting fixes.
            if (exc.code or "") == "insufficient_quota":
                return Reason.RATE_LIMITED, False, None
            return Reason.RATE_LIMITED, True, wait
        if status == 408:
            return Reason.JUDGE_TIMEOUT, True, wait
        code = str(exc.code or "")
        body = exc.body if isinstance(exc.body, dict) else {}
        inner = body.get("innererror") if isinstance(body.get("innererror"), dict) else {}
        if code == "content_filter" or inner.get("code") == "ResponsibleAIPolicyViolation":
            return Reason.JUDGE_REFUSED, False, None  # Azure's content filter on the prompt
        if code == "context_length_exceeded" or "maximum context length" in exc.message.lower():
            return Reason.INPUT_TOO_LARGE, False, None  # OpenAI/Azure code; vLLM's message
        if status in _RETRYABLE_STATUS or status >= 500:
            return Reason.JUDGE_ERROR, True, wait
        return Reason.JUDGE_ERROR, False, None
    return Reason.JUDGE_ERROR, False, None


def build_client(settings: LLMJudgeSettings) -> openai.AsyncOpenAI:
    """The openai client for ``settings`` (Azure's for an Azure endpoint), its own retries off.
    Raises ``ValueError`` when no API key is available for api.openai.com."""
    key = settings.api_key.get_secret_value()
    if not key:
        if settings.base_url is None and not settings.is_azure:
            raise ValueError("the llm judge has no API key: set OPENAI_API_KEY (or "
                             "OPENAI_API_KEY_FILE, a file holding it), or pass --base-url for "
                             "a local OpenAI-compatible server that needs none")
        key = "unused"  # local servers ignore it; the client insists on one
    common: dict[str, Any] = {"api_key": key, "max_retries": 0,
                              "timeout": settings.request_timeout_s}
    if settings.is_azure:
        return openai.AsyncAzureOpenAI(azure_endpoint=settings.base_url,
                                       api_version=settings.api_version, **common)
    if settings.base_url is not None:
        common["base_url"] = settings.base_url
    return openai.AsyncOpenAI(**common)


class ChatTransport:
    """Sends chat-completions requests for one judge: one endpoint and model, shared by every
    sample the judge scores.

    Owns the HTTP client, the concurrency slots (``max_concurrency``), the rate limiter, the token
    budget, the counters (:class:`LLMJudgeStats`) and what it learned about the endpoint.
    Loop-confined: use it from one event loop. :meth:`request` never blocks the loop and raises
    only :class:`CallError` (or ``CancelledError``); :meth:`aclose` ends pending waits and
    in-flight requests at once and is idempotent.

    Raises ``ValueError`` at construction when no API key is available for api.openai.com.
    """

    def __init__(self, settings: LLMJudgeSettings) -> None:
        self.settings = settings
        self.stats = LLMJudgeStats()
        self.budget = TokenBudget(settings.tokens_per_hour)
        self.limiter = AdaptiveRateLimiter(settings.requests_per_minute)
        self._sem = asyncio.Semaphore(settings.max_concurrency)
        self._closed = asyncio.Event()
        self._endpoint = _Endpoint(response_format=settings.response_format,
                                   max_tokens_param=settings.max_tokens_param)
        self._logged: set[str] = set()
        self._client = build_client(settings)

    @property
    def reasoning(self) -> bool:
        """The model has shown reasoning: requests get ``reasoning_output_tokens`` from now on."""
        return self._endpoint.reasoning

    async def aclose(self) -> None:
        """Stop waits and in-flight requests, close the HTTP client. Idempotent."""
        if self._closed.is_set():
            return
        self._closed.set()
        await self._client.close()

    def log_once(self, key: str, msg: str, *args: Any) -> None:
        """Log a warning the first time ``key`` is seen (a condition of the endpoint)."""
        if key not in self._logged:
            self._logged.add(key)
            log.warning(msg, *args)

    async def wait(self, seconds: float) -> None:
        """Sleep without blocking the loop; raise _Closed at once when the transport closes."""
        if seconds <= 0:
            if self._closed.is_set():
                raise _Closed
            return
        try:
            await asyncio.wait_for(self._closed.wait(), timeout=seconds)
        except TimeoutError:
            return
        raise _Closed

    async def request(self, messages: list[dict[str, str]], prompt: Prompt, seed: int | None,
                      temperature: float | None, max_tokens: int,
                      tasks: Sequence[str] = ()) -> Reply:
        """One completion of ``messages``: budget reserved, paced, a slot taken, retried as the
        module docstring says, within the sample's deadline. Raises :class:`CallError` when no
        usable reply came (the reason of the last failure)."""
        loop = asyncio.get_running_loop()
        deadline = min(loop.time() + self.settings.deadline_s, SAMPLE_DEADLINE.get())
        attempt = 0
        last: tuple[Reason, str] | None = None
        try:
            while True:
                if self._endpoint.reasoning:
                    max_tokens = max(max_tokens, self.settings.reasoning_output_tokens)
                kwargs = self._kwargs(messages, prompt, seed, temperature, max_tokens, tasks)
                reservation = self._reserve(messages, max_tokens)
                try:
                    completion, latency_ms = await self._send(kwargs, reservation, deadline, last)
                except (_Closed, asyncio.CancelledError):
                    self.budget.settle(reservation, None)  # may have been processed: keep it
                    raise
                except (openai.OpenAIError, _RequestTimeout, json.JSONDecodeError,
                        UnicodeDecodeError) as exc:
                    if isinstance(exc, openai.APIStatusError) and self._adapt(exc, kwargs):
                        self.budget.release(reservation)  # an error status is not billed
                        continue
                    last, pause = self._after_failure(exc, reservation, attempt, deadline,
                                                      prompt)
                    attempt += 1
                    await self.wait(pause)
                    continue
                self.limiter.on_success()
                return self._reply(completion, reservation, latency_ms, messages)
        except _Closed:
            raise CallError(Reason.JUDGE_ERROR, "judge closed") from None

    def _reserve(self, messages: list[dict[str, str]], max_tokens: int) -> Any:
        """Reserve the request's estimated tokens; CallError(budget_exhausted) when they do not
        fit in the hourly budget."""
        estimate = estimate_prompt_tokens(messages) + max_tokens
        reservation = self.budget.reserve(estimate)
        if reservation is None:
            self.stats.budget_skipped_calls += 1
            raise CallError(Reason.BUDGET_EXHAUSTED,
                            f"{estimate} tokens do not fit in the hourly budget "
                            f"({self.budget.used()}/{self.budget.limit} used)")
        return reservation

    async def _send(self, kwargs: dict[str, Any], reservation: Any, deadline: float,
                    last: tuple[Reason, str] | None) -> tuple[Any, float]:
        """Pace, take a slot and send one attempt: (completion, latency in ms). Raises what the
        client raises, _RequestTimeout, _Closed, or CallError (releasing the reservation) when
        the deadline leaves no time to send."""
        s = self.settings
        loop = asyncio.get_running_loop()
        delay = self.limiter.delay()
        if loop.time() + delay > deadline:
            self.budget.release(reservation)
            # The deadline's reason, as for every other call of the sample (a call started
            # after its predecessor timed out finds the deadline spent), unless a 429's back-off
            # is what pushes this one past it.
            throttled = self.limiter.throttled and loop.time() < deadline
            reason, detail = last or (
                (Reason.RATE_LIMITED, "rate limiter slowed by 429") if throttled
                else (Reason.JUDGE_TIMEOUT, "no time left to send"))
            raise CallError(reason, f"deadline {s.deadline_s}s reached; {detail}")
        await self.wait(delay)
        if not await self._acquire_slot(deadline - loop.time()):
            self.budget.release(reservation)
            reason, detail = last or (Reason.JUDGE_TIMEOUT, "no free slot")
            raise CallError(reason, f"deadline {s.deadline_s}s reached before sending; {detail}")
        try:
            timeout = min(s.request_timeout_s, deadline - loop.time())
            self.stats.requests += 1
            t0 = time.perf_counter()
            completion = await self._race_close(
                self._client.chat.completions.create(**kwargs, timeout=timeout), timeout)
            return completion, (time.perf_counter() - t0) * 1000.0
        finally:
            self._sem.release()

    def _after_failure(self, exc: BaseException, reservation: Any, attempt: int, deadline: float,
                       prompt: Prompt) -> tuple[tuple[Reason, str], float]:
        """Account for a failed attempt and decide: (the failure, the pause before the next
        attempt), or CallError when it is permanent, the retries are spent or the pause would
        end past the deadline."""
        s = self.settings
        reason, retryable, wait = classify(exc)
        if reason is Reason.JUDGE_REFUSED:
            self.stats.refusals += 1
        if reason is Reason.RATE_LIMITED:
            self.stats.rate_limited_429 += 1
            self.limiter.on_rate_limited(wait)
        if reason is Reason.JUDGE_TIMEOUT:
            self.stats.timeouts += 1
        # Error statuses are not billed; a timeout, a dropped connection or a cut reply may be.
        if isinstance(exc, openai.APIStatusError):
            self.budget.release(reservation)
        else:
            self.budget.settle(reservation, None)
        where = ""
        if isinstance(exc, openai.APIConnectionError) and getattr(exc, "request", None) is not None:
            url = exc.request.url  # which endpoint could not be reached (no credentials in it)
            where = f" ({url.scheme}://{url.host}{f':{url.port}' if url.port else ''}{url.path})"
        last = (reason, f"{type(exc).__name__}: {str(exc)[:300]}{where}")
        if not retryable:
            log.debug("%s failed permanently: %s", prompt.ref, last[1])
            raise CallError(*last) from None
        if attempt >= s.max_retries:
            raise CallError(last[0], f"{attempt + 1} attempts; {last[1]}") from None
        backoff = random.uniform(0.0, min(s.backoff_max_s, s.backoff_initial_s * 2.0 ** attempt))
        pause = max(backoff, wait or 0.0)
        if asyncio.get_running_loop().time() + pause >= deadline:
            raise CallError(last[0], f"deadline {s.deadline_s}s reached after "
                                     f"{attempt + 1} attempts; {last[1]}") from None
        self.stats.retries += 1
        log.debug("retrying %s in %.2fs after %s", prompt.ref, pause, last[1])
        return last, pause

    def _kwargs(self, messages: list[dict[str, str]], prompt: Prompt, seed: int | None,
                temperature: float | None, max_tokens: int,
                tasks: Sequence[str]) -> dict[str, Any]:
        """The request, as what the transport has learned about the endpoint allows."""
        e = self._endpoint
        kwargs: dict[str, Any] = {
            "model": self.settings.model,
            "messages": messages,
            e.max_tokens_param: max_tokens,
            "extra_headers": {"X-Ragpulse-Prompt": prompt.ref},
        }
        if temperature is not None and "temperature" not in e.dropped:
            kwargs["temperature"] = temperature
        if seed is not None and "seed" not in e.dropped:
            kwargs["seed"] = seed
        if e.response_format == "json_schema":
            kwargs["response_format"] = response_schema(f"{prompt.name}_{'_'.join(tasks)}", tasks)
        elif e.response_format == "json_object":
            kwargs["response_format"] = {"type": "json_object"}
        return kwargs

    def _adapt(self, exc: openai.APIStatusError, kwargs: Mapping[str, Any]) -> bool:
        """Learn from a 400 that names a request parameter the server does not take: drop
        ``temperature``/``seed``, step ``response_format`` down (json_schema, json_object,
        none), or switch ``max_tokens`` to ``max_completion_tokens``. True when the request
        should be sent again (once per parameter: what is dropped stays dropped)."""
        if exc.status_code not in (400, 422):
            return False
        e = self._endpoint
        param = str(exc.param or "")
        text = f"{param} {exc.message}".lower()

        def named(name: str) -> bool:
            return param.split(".")[0] == name or re.search(rf"\b{name}\b", text) is not None

        if "response_format" in kwargs and named("response_format"):
            sent = kwargs["response_format"]["type"]
            if e.response_format == sent:  # not yet stepped down by a concurrent request
                e.response_format = "json_object" if sent == "json_schema" else "none"
                log.warning("%s rejected response_format %s; using %s from now on: %s",
                            self.settings.model, sent, e.response_format, exc.message[:200])
            return True
        if "max_tokens" in kwargs and named("max_tokens") and "max_completion_tokens" in text:
            if e.max_tokens_param == "max_tokens":
                e.max_tokens_param = "max_completion_tokens"
                log.warning("%s wants max_completion_tokens; using it from now on",
                            self.settings.model)
            return True
        for name in ("temperature", "seed"):
            if name in kwargs and named(name):
                if name not in e.dropped:
                    e.dropped.add(name)
                    log.warning("%s rejected %s; not sending it from now on: %s",
                                self.settings.model, name, exc.message[:200])
                return True
        return False

    async def _acquire_slot(self, timeout_s: float) -> bool:
        """Take a concurrency slot within ``timeout_s``; False when none freed up in time."""
        if timeout_s <= 0:
            return False
        try:
            await asyncio.wait_for(self._sem.acquire(), timeout_s)
        except TimeoutError:
            return False
        return True

    async def _race_close(self, coro: Any, timeout_s: float) -> Any:
        """Await ``coro`` for at most ``timeout_s`` in total (then cancel it and raise
        _RequestTimeout), unless the transport closes first (then cancel it and raise _Closed)."""
        if self._closed.is_set():
            coro.close()
            raise _Closed
        req = asyncio.ensure_future(coro)
        closer = asyncio.ensure_future(self._closed.wait())
        try:
            await asyncio.wait({req, closer}, timeout=max(0.0, timeout_s),
                               return_when=asyncio.FIRST_COMPLETED)
        finally:
            closer.cancel()
            if not req.done():
                req.cancel()
        if req.done() and not req.cancelled():
            return req.result()
        if self._closed.is_set():
            raise _Closed
        raise _RequestTimeout(f"no complete reply within {timeout_s:.1f}s")

    def _reply(self, completion: Any, reservation: Any, latency_ms: float,
               messages: Sequence[Mapping[str, str]] = ()) -> Reply:
        """Settle the budget with the reported usage, count it, and read the completion: content
        with reasoning stripped (or the JSON found in the reasoning field), refusal, whether the
        server truncated the prompt, whether the model reasons."""
        usage = getattr(completion, "usage", None)
        pt = int(getattr(usage, "prompt_tokens", 0) or 0)
        ct = int(getattr(usage, "completion_tokens", 0) or 0)
        self.budget.settle(reservation, pt + ct if usage is not None else None)
        self.stats.completions += 1
        self.stats.prompt_tokens += pt
        self.stats.completion_tokens += ct
        sent = sum(len(str(m.get("content", "")).encode("utf-8", "surrogatepass"))
                   for m in messages)
        truncated = 0 < pt < sent // _MAX_BYTES_PER_TOKEN
        details = getattr(usage, "completion_tokens_details", None)
        reasoned = bool(getattr(details, "reasoning_tokens", 0) or 0)
        choices = getattr(completion, "choices", None) or []
        if not choices:
            return Reply(None, None, None, pt, ct, latency_ms, reasoned, truncated)
        ch = choices[0]
        msg = ch.message
        extra = getattr(msg, "model_extra", None) or {}
        thought = extra.get("reasoning_content") or extra.get("reasoning")
        content = msg.content
        stripped = strip_reasoning(content)
        reasoned = reasoned or bool(thought) or stripped != content
        content = stripped
        if (not content or not content.strip()) and isinstance(thought, str) \
                and not isinstance(parse_reply_object(thought), ParseFailure):
            content = thought  # the JSON landed in the reasoning field (vLLM guided decoding)
        if reasoned and not self._endpoint.reasoning:
            self._endpoint.reasoning = True
            log.warning("%s is a reasoning model: max_tokens %d from now on "
                        "(reasoning_output_tokens)", self.settings.model,
                        self.settings.reasoning_output_tokens)
        return Reply(content, ch.finish_reason, getattr(msg, "refusal", None), pt, ct,
                     latency_ms, reasoned, truncated)
