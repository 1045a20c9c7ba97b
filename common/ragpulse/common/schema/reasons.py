"""Why a trace yields no sample, beyond the metric engine's own reasons, and what to do about it.

The content switches come from the convention declarations (:mod:`ragpulse.common.conventions`).
The strings are stable: they are stored in the ``reason`` column of null score rows and as the
``label`` of the scorer's ``traces_unscorable`` counter. :data:`ADVICE` is the one-line remedy
that ``ragpulse status``, the dashboards and docs/instrumentation.md show beside each reason.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..conventions import CONVENTIONS

__all__ = ["ADVICE", "CONTENT_NOT_CAPTURED", "CONTENT_SETTINGS", "NOT_RAG", "content_advice"]

NOT_RAG = "not_rag"
"""Neither a question nor an answer nor an LLM call: index building (LlamaIndex's
``SentenceSplitter``, embedding batches), a document-store write. Not a RAG query, so the scorer
counts it (``traces_not_rag``) and writes no rows: a null row per metric would make the null
rate measure how often the app indexes."""

CONTENT_NOT_CAPTURED = "content_not_captured"
"""The trace has LLM spans, but no span carries the prompt or completion text: the
instrumentation was told not to record it (or, as the OTel GenAI instrumentations do by
default, never was told to)."""

CONTENT_SETTINGS: dict[str, str] = {c.id: c.content for c in CONVENTIONS if c.content}
"""What makes each convention's instrumentations record message text, by convention id
(:attr:`ragpulse.common.Convention.content`; docs/instrumentation.md §3). For OTel GenAI,
``SPAN_ONLY``, not ``true``: opentelemetry-util-genai accepts only ``NO_CONTENT | SPAN_ONLY |
EVENT_ONLY | SPAN_AND_EVENT`` and reads anything else as ``NO_CONTENT``; ``EVENT_ONLY`` sends the
text to the Logs API, which the scorer does not read."""

_NAMES = {c.id: c.name for c in CONVENTIONS}
_ALSO_WRITES = {c.id: c.also_writes for c in CONVENTIONS}

ADVICE: dict[str, str] = {
    "no_question": "no span carries the user's question",
    "no_answer": "no span carries the answer (the LLM call may have failed)",
    "no_contexts": "no retrieval span with document text, and no context block in the prompt",
    CONTENT_NOT_CAPTURED: "LLM spans carry no message text; in the app's environment: "
    + "; ".join(f"{_NAMES[k]}: {v}" for k, v in CONTENT_SETTINGS.items()),
}
"""Per reason, what it means or what to do (``ragpulse status``, the dashboards, the docs)."""


def content_advice(conventions: Iterable[str]) -> str:
    """The remedy for :data:`CONTENT_NOT_CAPTURED` naming only the settings of the conventions
    the trace shows (all of them when it shows none of these). Pure."""
    seen = set(conventions) & CONTENT_SETTINGS.keys()
    # A convention whose spans carry another's attributes too (OpenLLMetry's LLM spans are
    # gen_ai.*): its own switch is the one to name.
    covered = {o for k in seen for o in _ALSO_WRITES[k]}
    keys = [k for k in CONTENT_SETTINGS if k in seen and k not in covered] or list(CONTENT_SETTINGS)
    return "LLM spans carry no message text; in the instrumented app's environment, " + (
        " or ".join(CONTENT_SETTINGS[k] for k in keys)
    )
