"""OTel GenAI semantic conventions (https://opentelemetry.io/docs/specs/semconv/gen-ai/), the
readers its declaration (:data:`ragpulse.common.CONVENTIONS`) cannot express: the current JSON
``gen_ai.input.messages``/``gen_ai.output.messages``/``gen_ai.system_instructions``, the pre-1.37
``gen_ai.prompt``/``gen_ai.completion`` string attributes, ``execute_tool`` spans on a datastore.
Span events of both generations are in :mod:`.events`.

Readers only: :mod:`.sources` puts them in precedence order. Pure and thread-safe.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..span import AttrValue, Span
from .families import Families
from .messages import Message, attr_messages
from .readers import doc_texts
from .values import as_text, structured


def input_messages(attrs: Mapping[str, AttrValue], fams: Families) -> list[Message]:
    v = attrs.get("gen_ai.input.messages")
    return attr_messages(v, "user") if "gen_ai.input.messages" in attrs else []


def output_messages(attrs: Mapping[str, AttrValue], fams: Families) -> list[Message]:
    v = attrs.get("gen_ai.output.messages")
    return attr_messages(v, "assistant") if "gen_ai.output.messages" in attrs else []


def system_instructions(attrs: Mapping[str, AttrValue], fams: Families) -> list[Message]:
    v = attrs.get("gen_ai.system_instructions")
    return attr_messages(v, "system") if "gen_ai.system_instructions" in attrs else []


def legacy_prompt(attrs: Mapping[str, AttrValue], fams: Families) -> list[Message]:
    """Pre-1.37 ``gen_ai.prompt``: one JSON (or plain) string."""
    return attr_messages(attrs["gen_ai.prompt"], "user") if "gen_ai.prompt" in attrs else []


def legacy_completion(attrs: Mapping[str, AttrValue], fams: Families) -> list[Message]:
    """Pre-1.37 ``gen_ai.completion``: one JSON (or plain) string."""
    return attr_messages(attrs["gen_ai.completion"], "assistant") if "gen_ai.completion" in attrs else []


def is_datastore_tool(span: Span) -> bool:
    """An ``execute_tool`` span whose tool is a ``datastore`` (a retrieval tool of an agent)."""
    a = span.attributes
    return a.get("gen_ai.operation.name") == "execute_tool" and a.get("gen_ai.tool.type") == "datastore"


def tool_result_documents(span: Span, fams: Families) -> list[str]:
    """The documents an ``execute_tool`` span returned in ``gen_ai.tool.call.result``."""
    a = span.attributes
    if a.get("gen_ai.operation.name") != "execute_tool":
        return []
    v = a.get("gen_ai.tool.call.result")
    parsed = structured(v)
    return doc_texts(parsed if parsed is not None else as_text(v))
