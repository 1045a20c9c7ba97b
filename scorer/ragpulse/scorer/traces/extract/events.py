"""Span events: the OTel GenAI ``gen_ai.client.inference.operation.details`` event attached to a
span, the pre-1.37 ``gen_ai.<role>.message``/``gen_ai.choice`` and ``gen_ai.content.*`` events,
and the vector-DB ``db.query.result``/``db.search.result`` events (OpenLLMetry's chromadb,
milvus, marqo instrumentors).

Readers only: :mod:`.sources` puts them in precedence order. Pure and thread-safe.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ..span import AttrValue, Span
from .messages import Message, attr_messages, role_of
from .readers import DOC_TEXT_KEYS, pick
from .values import as_text, structured

EventReader = Callable[[Mapping[str, AttrValue]], list[Message] | None]
"""Messages of one event, or ``None`` when the event does not carry the attribute at all."""


LEGACY_INPUT_EVENTS = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}


def _event_content(attrs: Mapping[str, AttrValue]) -> str | None:
    for key in ("content", "gen_ai.event.content", "message", "body"):
        if key in attrs:
            v = attrs[key]
            msgs = attr_messages(v, "")
            if msgs:
                return msgs[-1][1]
    return None


def messages_in(key: str, default_role: str) -> EventReader:
    """A reader of the JSON messages in event attribute ``key``."""

    def read(ea: Mapping[str, AttrValue]) -> list[Message] | None:
        return attr_messages(ea[key], default_role) if key in ea else None

    return read


def one_message(default_role: str, role_attribute: bool = True) -> EventReader:
    """A reader of a one-message event (``content``/``body``), its role from the event's
    ``role`` attribute when ``role_attribute``, else ``default_role``."""

    def read(ea: Mapping[str, AttrValue]) -> list[Message] | None:
        t = _event_content(ea)
        if t is None:
            return None
        return [(role_of(ea.get("role"), default_role) if role_attribute else default_role, t)]

    return read


def has_result_events(span: Span) -> bool:
    return any(e.name in ("db.query.result", "db.search.result") for e in span.events)


def result_documents(span: Span, fams: dict[str, list[str]]) -> list[str]:
    """``db.query.result.document`` texts, or the content of ``db.search.result.entity``."""
    docs = []
    for e in span.events:
        if e.name == "db.query.result":
            t = as_text(e.attributes.get("db.query.result.document"))
            if t is not None:
                docs.append(t)
        elif e.name == "db.search.result":
            ent = structured(e.attributes.get("db.search.result.entity"))
            t = pick(ent, DOC_TEXT_KEYS) if isinstance(ent, dict) else None
            if t is not None:
                docs.append(t)
    return docs
