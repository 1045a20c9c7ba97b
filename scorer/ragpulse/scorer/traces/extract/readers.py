"""The simple readers the source tables are built from: the question, answer or documents in
one attribute (plain text, or JSON with a question-, answer- or content-like key), each a
factory over the attribute key. Pure and thread-safe.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..span import AttrValue, Span
from .families import Families
from .messages import last_message
from .values import as_text, structured

QUESTION_KEYS = (
    "question",
    "query",
    "query_str",
    "str_or_query_bundle",  # LlamaIndex query engines: a string or a serialized QueryBundle
    "input",
    "user_input",
    "user_question",
    "q",
    "prompt",
    "message",
    "text",
)

ANSWER_KEYS = (
    "answer",
    "output",
    "output_text",
    "result",
    "response",
    "text",
    "content",
    "completion",
)

CONTEXT_KEYS = (
    "context",
    "contexts",
    "context_str",
    "documents",
    "docs",
    "retrieved_context",
    "retrieved_contexts",
    "sources",
    "knowledge",
)

DOC_TEXT_KEYS = (
    "content",
    "page_content",
    "text",
    "document",
    "document.content",
    "chunk",
    "pageContent",
)


def pick(obj: Any, keys: Sequence[str], _nested: bool = True) -> str | None:
    """Text from a parsed JSON value: itself if a string, else the first known key holding text
    (or holding an object that has such a key, one level down: ``{"query": {"query_str": q}}``)."""
    if isinstance(obj, str):
        return obj if obj.strip() else None
    if isinstance(obj, dict):
        for k in keys:
            t = obj.get(k)
            if isinstance(t, str) and t.strip():
                return t
        if _nested:
            for k in keys:
                inner = obj.get(k)
                if isinstance(inner, dict) and (t := pick(inner, keys, False)) is not None:
                    return t
    return None


def json_or_text(value: AttrValue, keys: Sequence[str]) -> str | None:
    """A plain-text value as is; a JSON value through :func:`pick` (raw JSON is never text)."""
    t = as_text(value)
    if t is None:
        return pick(structured(value), keys) if isinstance(value, dict) else None
    s = t.lstrip()
    if s[:1] in ("{", "[", '"'):
        parsed = structured(t)
        if parsed is not None:
            return pick(parsed, keys)
    return t


def is_node_json(text: str) -> bool:
    """Whether a string is a JSON-encoded LlamaIndex ``NodeWithScore`` (``{"node": {...}}``),
    as OpenLLMetry's LlamaIndex instrumentation writes each retrieved node (0.62.4:
    ``traceloop.entity.output = '["{\\"node\\": ...}", ...]'``)."""
    return text[:1] == "{" and '"node"' in text[:12]


def doc_texts(items: Any) -> list[str]:
    """Texts of a document list: strings, or dicts with a content-like key (metadata ignored),
    or LlamaIndex ``NodeWithScore`` objects, as dicts or JSON-encoded one per string."""
    if isinstance(items, dict):
        items = items.get("documents", items.get("docs", items.get("results")))
    if isinstance(items, str):
        return [items] if items.strip() else []
    if not isinstance(items, list):
        return []
    out = []
    for d in items:
        if isinstance(d, str) and is_node_json(d):
            parsed = structured(d)
            if isinstance(parsed, dict) and isinstance(parsed.get("node"), dict):
                d = parsed
        if isinstance(d, str):
            if d.strip():
                out.append(d)
        elif isinstance(d, dict):
            t = pick(d, DOC_TEXT_KEYS)
            if t is None and isinstance(d.get("node"), dict):  # LlamaIndex NodeWithScore
                t = pick(d["node"], DOC_TEXT_KEYS)
            if t is not None:
                out.append(t)
    return out


Reader = Callable[[Mapping[str, AttrValue]], str | None]


def question_at(key: str) -> Reader:
    """A reader of the question in attribute ``key``: plain text, or JSON with a question-like
    key (one level of nesting allowed)."""

    def read(a: Mapping[str, AttrValue]) -> str | None:
        return json_or_text(a.get(key), QUESTION_KEYS)

    return read


def root_question_at(key: str) -> Reader:
    """Like :func:`question_at`, or a ``{"messages": [...]}`` conversation's last user message
    (a root span whose input is a chat)."""

    def read(a: Mapping[str, AttrValue]) -> str | None:
        v = a.get(key)
        return json_or_text(v, QUESTION_KEYS) or last_message(v, "user")

    return read


def answer_at(key: str) -> Reader:
    """A reader of the answer in attribute ``key``: plain text, JSON with an answer-like key, or
    a ``{"messages": [...]}`` conversation (its last assistant message)."""

    def read(a: Mapping[str, AttrValue]) -> str | None:
        v = a.get(key)
        return json_or_text(v, ANSWER_KEYS) or last_message(v, "assistant")

    return read


def entity_input_question(key: str) -> Reader:
    """A reader of the question in a function-call record ``{"args": [...], "kwargs": {...}}``
    (OpenLLMetry's ``traceloop.entity.input``, GenAI's ``gen_ai.task.input``): a question-like
    keyword, else a question-like key of the record, else its single positional argument."""

    def read(a: Mapping[str, AttrValue]) -> str | None:
        parsed = structured(a.get(key))
        if not isinstance(parsed, dict):
            return None
        question = pick(parsed.get("kwargs"), QUESTION_KEYS) or pick(parsed, QUESTION_KEYS)
        args = parsed.get("args")
        if question is None and isinstance(args, list) and len(args) == 1:
            question = pick(args[0], QUESTION_KEYS)
        return question

    return read


def entity_input_query(key: str) -> Reader:
    """A reader of a retriever's query in a function-call record: a question-like key of the
    record, else of its ``kwargs``."""

    def read(a: Mapping[str, AttrValue]) -> str | None:
        parsed = structured(a.get(key))
        if isinstance(parsed, dict):
            return pick(parsed, QUESTION_KEYS) or pick(parsed.get("kwargs"), QUESTION_KEYS)
        return None

    return read


SpanReader = Callable[[Span, Families], list[str]]


def documents_at(key: str) -> SpanReader:
    """A reader of the documents in attribute ``key``: a JSON (or structured) list of strings,
    of dicts with a content-like key, or of LlamaIndex ``NodeWithScore`` objects."""

    def read(span: Span, fams: Families) -> list[str]:
        a = span.attributes
        return doc_texts(structured(a[key])) if key in a else []

    return read


def context_list_at(key: str) -> SpanReader:
    """Like :func:`documents_at`, but a plain string that is not a JSON list is one document."""

    def read(span: Span, fams: Families) -> list[str]:
        v = span.attributes.get(key)
        if v is None:
            return []
        return doc_texts(structured(v) if not isinstance(v, str) or v[:1] == "[" else v)

    return read
