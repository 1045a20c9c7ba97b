"""OpenInference (Arize): ``openinference.span.kind``, flattened ``llm.input_messages.<i>``/
``llm.output_messages.<i>`` messages, the legacy ``llm.prompts``/``llm.choices``, flattened
``retrieval.documents.<i>`` and a RERANKER's ``reranker.*_documents.<i>``, ``input.value``/
``output.value`` I/O and ``llm.prompt_template.variables``.

Readers only: :mod:`.sources` puts them in precedence order. Pure and thread-safe.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..span import AttrValue, Span
from .values import (
    _OI_KIND,
    _QUESTION_KEYS,
    Message,
    _doc_texts,
    _indexed,
    _json_or_text,
    _last_message,
    _role,
    _structured,
    _text,
)

Families = dict[str, list[str]]


def _oi_messages(
    attrs: Mapping[str, AttrValue], prefix: str, default_role: str, fams: dict[str, list[str]] | None = None
) -> list[Message]:
    out: list[Message] = []
    for m in _indexed(attrs, prefix, fams):
        role = _role(m.get("message.role"), default_role)
        t = _text(m.get("message.content"))
        if t is None:
            parts = [
                _text(v)
                for k, v in sorted(m.items())
                if k.startswith("message.contents.") and k.endswith(".message_content.text")
            ]
            joined = "\n".join(p for p in parts if p)
            t = joined or None
        if t is not None:
            out.append((role, t))
    return out


def _oi_documents(
    attrs: Mapping[str, AttrValue], prefix: str, fams: dict[str, list[str]] | None = None
) -> list[str]:
    docs = [t for d in _indexed(attrs, prefix, fams) if (t := _text(d.get("document.content")))]
    if not docs:
        whole = attrs.get(prefix[:-1])  # a structured array under the un-flattened name
        if isinstance(whole, tuple):
            docs = _doc_texts(_structured(whole))
    return docs


def input_messages(attrs: Mapping[str, AttrValue], fams: Families) -> list[Message]:
    return _oi_messages(attrs, "llm.input_messages.", "user", fams)


def output_messages(attrs: Mapping[str, AttrValue], fams: Families) -> list[Message]:
    return _oi_messages(attrs, "llm.output_messages.", "assistant", fams)


def legacy_prompts(attrs: Mapping[str, AttrValue], fams: Families) -> list[Message]:
    """``llm.prompts.<i>.prompt.text`` (flattened)."""
    return [("user", t) for d in _indexed(attrs, "llm.prompts.", fams) if (t := _text(d.get("prompt.text")))]


def legacy_prompts_array(attrs: Mapping[str, AttrValue], fams: Families) -> list[Message]:
    """``llm.prompts`` as one string array."""
    v = attrs.get("llm.prompts")
    return [("user", t) for t in v if _text(t)] if isinstance(v, tuple) else []  # type: ignore[misc]


def legacy_choices(attrs: Mapping[str, AttrValue], fams: Families) -> list[Message]:
    """``llm.choices.<i>.completion.text`` (flattened)."""
    return [
        ("assistant", t)
        for d in _indexed(attrs, "llm.choices.", fams)
        if (t := _text(d.get("completion.text")))
    ]


def is_retriever(span: Span) -> bool:
    return span.attributes.get(_OI_KIND) == "RETRIEVER"


def retrieval_documents(span: Span, fams: Families) -> list[str]:
    return _oi_documents(span.attributes, "retrieval.documents.", fams)


def input_question(attrs: Mapping[str, AttrValue]) -> str | None:
    """``input.value``: plain text, JSON with a question-like key, or a ``{"messages": [...]}``
    conversation (its last user message)."""
    question = _json_or_text(attrs.get("input.value"), _QUESTION_KEYS)
    if question is None:
        question = _last_message(attrs.get("input.value"), "user")
    return question


def _template_variables(span: Span) -> dict[str, Any] | None:
    v = span.attributes.get("llm.prompt_template.variables")
    parsed = _structured(v)
    return parsed if isinstance(parsed, dict) else None
