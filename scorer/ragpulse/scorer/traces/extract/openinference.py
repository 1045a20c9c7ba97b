"""OpenInference (Arize), the readers its declaration (:data:`ragpulse.common.CONVENTIONS`)
cannot express: flattened ``llm.input_messages.<i>``/``llm.output_messages.<i>`` messages, the
legacy ``llm.prompts``/``llm.choices``, flattened ``retrieval.documents.<i>`` and a RERANKER's
``reranker.*_documents.<i>``, and ``llm.prompt_template.variables``.

Readers only: :mod:`.sources` puts them in precedence order. Pure and thread-safe.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..span import AttrValue, Span
from .families import Families, indexed
from .messages import Message, role_of
from .readers import doc_texts
from .values import as_text, structured

SPAN_KIND = "openinference.span.kind"
"""The attribute every OpenInference span carries: LLM, RETRIEVER, RERANKER, CHAIN, ..."""


def _oi_messages(
    attrs: Mapping[str, AttrValue], prefix: str, default_role: str, fams: dict[str, list[str]] | None = None
) -> list[Message]:
    out: list[Message] = []
    for m in indexed(attrs, prefix, fams):
        role = role_of(m.get("message.role"), default_role)
        t = as_text(m.get("message.content"))
        if t is None:
            parts = [
                as_text(v)
                for k, v in sorted(m.items())
                if k.startswith("message.contents.") and k.endswith(".message_content.text")
            ]
            joined = "\n".join(p for p in parts if p)
            t = joined or None
        if t is not None:
            out.append((role, t))
    return out


def flattened_documents(
    attrs: Mapping[str, AttrValue], prefix: str, fams: dict[str, list[str]] | None = None
) -> list[str]:
    docs = [t for d in indexed(attrs, prefix, fams) if (t := as_text(d.get("document.content")))]
    if not docs:
        whole = attrs.get(prefix[:-1])  # a structured array under the un-flattened name
        if isinstance(whole, tuple):
            docs = doc_texts(structured(whole))
    return docs


def input_messages(attrs: Mapping[str, AttrValue], fams: Families) -> list[Message]:
    return _oi_messages(attrs, "llm.input_messages.", "user", fams)


def output_messages(attrs: Mapping[str, AttrValue], fams: Families) -> list[Message]:
    return _oi_messages(attrs, "llm.output_messages.", "assistant", fams)


def legacy_prompts(attrs: Mapping[str, AttrValue], fams: Families) -> list[Message]:
    """``llm.prompts.<i>.prompt.text`` (flattened)."""
    return [("user", t) for d in indexed(attrs, "llm.prompts.", fams) if (t := as_text(d.get("prompt.text")))]


def legacy_prompts_array(attrs: Mapping[str, AttrValue], fams: Families) -> list[Message]:
    """``llm.prompts`` as one string array."""
    v = attrs.get("llm.prompts")
    return [("user", t) for t in v if as_text(t)] if isinstance(v, tuple) else []  # type: ignore[misc]


def legacy_choices(attrs: Mapping[str, AttrValue], fams: Families) -> list[Message]:
    """``llm.choices.<i>.completion.text`` (flattened)."""
    return [
        ("assistant", t)
        for d in indexed(attrs, "llm.choices.", fams)
        if (t := as_text(d.get("completion.text")))
    ]


def retrieval_documents(span: Span, fams: Families) -> list[str]:
    return flattened_documents(span.attributes, "retrieval.documents.", fams)


def template_variables(span: Span) -> dict[str, Any] | None:
    v = span.attributes.get("llm.prompt_template.variables")
    parsed = structured(v)
    return parsed if isinstance(parsed, dict) else None
