"""A real OpenAI-compatible HTTP server on loopback, with scripted or content-aware replies.

It speaks the ``POST /v1/chat/completions`` wire protocol: a JSON body in, a ``chat.completion``
object out (``choices[0].message.content``, ``finish_reason``, ``usage``), errors as
``{"error": {"message", "type", "code"}}`` with real status codes and headers (``Retry-After``,
``retry-after-ms``). Replies come from a per-prompt script (routed by the ``X-Ragpulse-Prompt``
header the judge sends, or ``"*"`` for any), falling back to a handler that reads the request
(the content-aware mode). Every request is recorded with its arrival time, headers and body.

Thread-safety: the server runs on its own threads; the script and the records are guarded by
one lock, so a test may script and inspect while requests arrive.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FakeOpenAIServer", "Recorded", "Reply", "data_blocks", "usage_tokens"]


def usage_tokens(text: str) -> int:
    """The fake's tokenizer: one token per 4 UTF-8 bytes, rounded up (close to real BPE for
    English, and always within the judge's byte-count bound)."""
    return (len(text.encode("utf-8")) + 3) // 4


@dataclass
class Reply:
    """One scripted reply."""

    content: str | None = None
    status: int = 200
    finish_reason: str = "stop"
    refusal: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    """Wait before answering (beyond the client's timeout: a timeout)."""
    error: dict[str, Any] | None = None
    usage: tuple[int, int] | None = None
    """(prompt, completion) tokens; computed with :func:`usage_tokens` when ``None``."""
    drip_s: float = 0.0
    """Send the status line, headers and body one byte every ``drip_s`` seconds (a server
    that keeps the connection alive without ever finishing: no read timeout fires)."""
    truncate_at: int | None = None
    """Send only the first ``truncate_at`` bytes of the JSON body, with a Content-Length that
    matches them: a well-framed 200 whose JSON is cut short (a proxy or server failing)."""
    reasoning: str | None = None
    """Reasoning text in the message, under ``reasoning_key``: vLLM with a reasoning parser and
    DeepSeek's API send ``reasoning_content``; Ollama's /v1 and OpenRouter send ``reasoning``."""
    reasoning_key: str = "reasoning_content"
    reasoning_tokens: int | None = None
    """``usage.completion_tokens_details.reasoning_tokens``, as OpenAI's o-series and gpt-5
    report it (included in ``completion_tokens``)."""
    top_level_error: bool = False
    """Send the error object at the top level (``{"object": "error", "message": ...}``), as
    vLLM's OpenAI server did before it adopted the ``{"error": {...}}`` wrapper."""

    @classmethod
    def json(cls, obj: Any, **kw: Any) -> Reply:
        return cls(content=json.dumps(obj), **kw)

    @classmethod
    def fail(cls, status: int, message: str = "scripted error", *,
             type_: str | None = "server_error", code: str | None = None,
             headers: dict[str, str] | None = None, param: str | None = None) -> Reply:
        return cls(status=status, headers=headers or {},
                   error={"message": message, "type": type_, "param": param, "code": code})

    # --- error bodies of real servers, copied from their wire responses -----------------------

    @classmethod
    def unsupported_parameter(cls, param: str) -> Reply:
        """api.openai.com (o-series, gpt-5) and Azure OpenAI, for a parameter the model lacks."""
        extra = " Use 'max_completion_tokens' instead." if param == "max_tokens" else ""
        return cls.fail(400, f"Unsupported parameter: '{param}' is not supported with this "
                             f"model.{extra}", type_="invalid_request_error",
                        code="unsupported_parameter", param=param)

    @classmethod
    def unsupported_value(cls, param: str, value: object) -> Reply:
        """api.openai.com for ``temperature`` other than 1 on reasoning models."""
        return cls.fail(400, f"Unsupported value: '{param}' does not support {value} with this "
                             f"model. Only the default (1) value is supported.",
                        type_="invalid_request_error", code="unsupported_value", param=param)

    @classmethod
    def litellm_unsupported(cls, param: str, value: object) -> Reply:
        """A LiteLLM proxy (1.7x) without ``drop_params`` in front of a reasoning model."""
        return cls.fail(400, f"litellm.UnsupportedParamsError: gpt-5-nano doesn't support "
                             f"{param}={value}. Only temperature=1 is supported. To drop "
                             f"unsupported params set `litellm.drop_params = True`\nReceived "
                             f"Model Group=gpt-5-nano\nAvailable Model Group Fallbacks=None",
                        type_="invalid_request_error", code="400")

    @classmethod
    def json_schema_unsupported(cls) -> Reply:
        """api.openai.com / Azure for a model without structured outputs (``param`` is null)."""
        return cls.fail(400, "Invalid parameter: 'response_format' of type 'json_schema' is not "
                             "supported with this model. Learn more about supported models at "
                             "the Structured Outputs guide: "
                             "https://platform.openai.com/docs/guides/structured-outputs",
                        type_="invalid_request_error")

    @classmethod
    def azure_content_filter(cls) -> Reply:
        """Azure OpenAI when the prompt trips the content filter."""
        r = cls.fail(400, "The response was filtered due to the prompt triggering Azure OpenAI's "
                          "content management policy. Please modify your prompt and retry. To "
                          "learn more about our content filtering policies please read our "
                          "documentation: https://go.microsoft.com/fwlink/?linkid=2198766",
                     type_=None, code="content_filter", param="prompt")
        assert r.error is not None
        r.error.update({"status": 400, "innererror": {
            "code": "ResponsibleAIPolicyViolation",
            "content_filter_result": {
                "hate": {"filtered": False, "severity": "safe"},
                "jailbreak": {"filtered": True, "detected": True},
                "self_harm": {"filtered": False, "severity": "safe"},
                "sexual": {"filtered": False, "severity": "safe"},
                "violence": {"filtered": False, "severity": "safe"}}}})
        return r

    @classmethod
    def context_length_exceeded(cls, limit: int = 8192, sent: int = 9000) -> Reply:
        """api.openai.com and Azure OpenAI for a prompt over the model's window."""
        return cls.fail(400, f"This model's maximum context length is {limit} tokens. However, "
                             f"your messages resulted in {sent} tokens. Please reduce the length "
                             f"of the messages.", type_="invalid_request_error",
                        code="context_length_exceeded", param="messages")

    @classmethod
    def vllm_too_long(cls, limit: int = 8192, sent: int = 9000, completion: int = 1024) -> Reply:
        """vLLM's OpenAI server (0.6-0.8: a top-level error object, ``code`` an int)."""
        r = cls.fail(400, f"This model's maximum context length is {limit} tokens. However, you "
                          f"requested {sent + completion} tokens ({sent} in the messages, "
                          f"{completion} in the completion). Please reduce the length of the "
                          f"messages or completion.", type_="BadRequestError")
        assert r.error is not None
        r.error = {"object": "error", **r.error, "code": 400}
        r.top_level_error = True
        return r

    @classmethod
    def rate_limited(cls, *, retry_after_ms: int | None = None,
                     retry_after_s: int | None = None) -> Reply:
        h: dict[str, str] = {}
        if retry_after_ms is not None:
            h["retry-after-ms"] = str(retry_after_ms)
        if retry_after_s is not None:
            h["Retry-After"] = str(retry_after_s)
        return cls.fail(429, "Rate limit reached", type_="requests", code="rate_limit_exceeded",
                        headers=h)


@dataclass(frozen=True)
class Recorded:
    at: float
    """``time.monotonic()`` when the request arrived."""
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    status: int
    usage: tuple[int, int] | None

    @property
    def prompt(self) -> str:
        return self.headers.get("x-ragpulse-prompt", "")

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.body.get("messages", [])

    def text(self) -> str:
        return "\n".join(str(m.get("content", "")) for m in self.messages)


Handler = Callable[[Recorded], Reply]

_BLOCK = re.compile(r'<data-([0-9a-f]+) kind="(\w+)"(?: n="(\d+)")?>(.*?)</data-\1>', re.DOTALL)


def data_blocks(text: str) -> list[tuple[str, str, int | None, str]]:
    """(nonce, kind, n, content) of every data block in ``text``."""
    return [(m.group(1), m.group(2), int(m.group(3)) if m.group(3) else None, m.group(4))
            for m in _BLOCK.finditer(text)]


class FakeOpenAIServer:
    """``with FakeOpenAIServer() as srv: LLMJudgeSettings(base_url=srv.base_url, ...)``.

    ``start`` binds 127.0.0.1 on a free port and serves on a daemon thread; ``stop`` is
    idempotent, wakes delayed replies and joins the threads.
    """

    def __init__(self, handler: Handler | None = None) -> None:
        self.handler = handler
        self._lock = threading.Lock()
        self._script: dict[str, deque[Reply]] = {}
        self._records: list[Recorded] = []
        self._stopping = threading.Event()
        self._in_flight = 0
        self.max_in_flight = 0
        """Most requests the server was handling at once (to check a client's concurrency)."""
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._rejections: list[tuple[Callable[[dict[str, Any]], bool], Reply]] = []
        self.context_window: int | None = None
        """Ollama's silent truncation: a prompt longer than this many (fake) tokens is cut to
        it, and ``usage.prompt_tokens`` reports what was kept (Ollama 0.3-0.12 with the default
        ``num_ctx`` of 2048/4096 and no ``OLLAMA_CONTEXT_LENGTH``)."""

    # --- scripting and inspection -------------------------------------------------------------

    def script(self, prompt: str, *replies: Reply) -> FakeOpenAIServer:
        """Queue replies for requests whose ``X-Ragpulse-Prompt`` starts with ``prompt``
        (``"assess"`` matches ``"assess@1"``); ``"*"`` matches any request."""
        with self._lock:
            self._script.setdefault(prompt, deque()).extend(replies)
        return self

    def reject(self, when: Callable[[dict[str, Any]], bool], reply: Reply) -> FakeOpenAIServer:
        """Answer every request whose body satisfies ``when`` with ``reply`` (before any script):
        a server that refuses a parameter, e.g. ``srv.reject(lambda b: "temperature" in b,
        Reply.unsupported_parameter("temperature"))``."""
        with self._lock:
            self._rejections.append((when, reply))
        return self

    def pending(self) -> int:
        with self._lock:
            return sum(len(q) for q in self._script.values())

    @property
    def requests(self) -> list[Recorded]:
        with self._lock:
            return list(self._records)

    def requests_for(self, prompt: str) -> list[Recorded]:
        return [r for r in self.requests if r.prompt.startswith(prompt)]

    @property
    def base_url(self) -> str:
        assert self._httpd is not None, "server not started"
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    # --- lifecycle ----------------------------------------------------------------------------

    def start(self) -> FakeOpenAIServer:
        server = self

        class _H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: Any) -> None:  # keep test output clean
                return

            def do_POST(self) -> None:
                with server._lock:
                    server._in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server._in_flight)
                try:
                    server._serve(self)
                finally:
                    with server._lock:
                        server._in_flight -= 1

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _H)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is None:
            return
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- the wire protocol --------------------------------------------------------------------

    def _next_reply(self, rec: Recorded) -> Reply:
        with self._lock:
            for when, reply in self._rejections:
                if when(rec.body):
                    return reply
            for key in (rec.prompt.split("@")[0], "*"):
                q = self._script.get(key)
                if q:
                    return q.popleft()
        if self.handler is None:
            return Reply.fail(500, f"no scripted reply for {rec.prompt or 'request'}")
        return self.handler(rec)

    def _serve(self, h: BaseHTTPRequestHandler) -> None:
        at = time.monotonic()
        length = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in h.headers.items()}
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            body = {}
        probe = Recorded(at, h.path, headers, body, 0, None)
        if not h.path.split("?")[0].rstrip("/").endswith("/chat/completions"):
            reply = Reply.fail(404, f"unknown path {h.path}", type_="invalid_request_error")
        elif not isinstance(body.get("messages"), list) or not body.get("model"):
            reply = Reply.fail(400, "messages and model are required",
                               type_="invalid_request_error")
        else:
            reply = self._next_reply(probe)
        usage = None
        if reply.status == 200:
            prompt_text = "".join(str(m.get("content", "")) for m in body.get("messages", []))
            usage = reply.usage or (usage_tokens(prompt_text) + 4 * len(body["messages"]),
                                    usage_tokens(reply.content or reply.refusal or "")
                                    + usage_tokens(reply.reasoning or "")
                                    + (reply.reasoning_tokens or 0))
            if self.context_window is not None and usage[0] > self.context_window:
                usage = (self.context_window, usage[1])
        with self._lock:
            self._records.append(Recorded(at, h.path, headers, body, reply.status, usage))
        if reply.delay_s and self._stopping.wait(reply.delay_s):
            return
        if reply.status != 200:
            err = reply.error or {"message": "error"}
            payload: dict[str, Any] = err if reply.top_level_error else {"error": err}
        else:
            payload = {
                "id": f"chatcmpl-fake{len(self._records)}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model"),
                "system_fingerprint": "fp_fake",
                "choices": [{
                    "index": 0,
                    "message": {"role": "assistant", "content": reply.content,
                                "refusal": reply.refusal},
                    "logprobs": None,
                    "finish_reason": reply.finish_reason,
                }],
                "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1],
                          "total_tokens": usage[0] + usage[1]},
            }
            if reply.reasoning is not None:
                payload["choices"][0]["message"][reply.reasoning_key] = reply.reasoning
            if reply.reasoning_tokens is not None:
                payload["usage"]["completion_tokens_details"] = {
                    "reasoning_tokens": reply.reasoning_tokens, "accepted_prediction_tokens": 0,
                    "rejected_prediction_tokens": 0, "audio_tokens": 0}
        data = json.dumps(payload).encode()
        if reply.truncate_at is not None:
            data = data[:reply.truncate_at]
        try:
            h.send_response(reply.status)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", str(len(data)))
            h.send_header("x-request-id", f"req_{len(self._records)}")
            for k, v in reply.headers.items():
                h.send_header(k, v)
            if reply.drip_s:
                h._headers_buffer.append(b"\r\n")  # type: ignore[attr-defined]
                head = b"".join(h._headers_buffer)  # type: ignore[attr-defined]
                h._headers_buffer = []  # type: ignore[attr-defined]
                for i in range(len(head + data)):
                    h.wfile.write((head + data)[i:i + 1])
                    h.wfile.flush()
                    if self._stopping.wait(reply.drip_s):
                        return
                return
            h.end_headers()
            h.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a scripted timeout): nothing to answer
