"""LLM messages as ``(role, text)`` from the JSON and structured shapes instrumentations write:
GenAI ``[{role, parts}]``, ``[{role, content}]``, choices, LangChain serialized messages,
content-part lists, bare text. Pure and thread-safe.
"""

from __future__ import annotations

from typing import Any

from ..span import AttrValue
from .values import as_str, structured


def content_text(content: Any, depth: int = 0) -> str | None:
    """Text of a message content: a string, a list of parts
    (``{"type": "text", "content"|"text"}``),
    or a JSON string of such a list (OpenLLMetry serializes multimodal content that way)."""
    if isinstance(content, str):
        s = content.lstrip()
        if s[:1] == "[":
            parsed = structured(content)
            if isinstance(parsed, list):
                t = content_text(parsed, depth + 1)
                if t is not None:
                    return t
        return content if content.strip() else None
    if isinstance(content, list):
        texts = []
        for p in content:
            if isinstance(p, str):
                texts.append(p)
            elif isinstance(p, dict) and p.get("type", "text") in (
                "text",
                "input_text",
                "output_text",
            ):
                t = p.get("content", p.get("text"))
                if isinstance(t, str):
                    texts.append(t)
        joined = "\n".join(t for t in texts if t)
        return joined if joined.strip() else None
    if isinstance(content, dict) and depth < 8:  # {"content": {"content": ...}} nests without bound
        return content_text(content.get("content", content.get("text")), depth + 1)
    return None


Message = tuple[str, str]  # (role, text)

# LangChain's genai util writes its own message types ("Human", "AI"); Gemini says "model".
_ROLE_ALIASES = {"human": "user", "ai": "assistant", "model": "assistant", "bot": "assistant"}


_LANGCHAIN_TYPES = frozenset({"human", "ai", "system", "tool", "function", "chat"})


def role_of(value: Any, default: str) -> str:
    if not isinstance(value, str) or not value:
        return default
    r = value.lower()
    return _ROLE_ALIASES.get(r, r)


def parse_messages(obj: Any, default_role: str) -> list[Message]:
    """GenAI JSON messages (``[{role, parts:[...]}]``), older ``[{role, content}]``, bare text."""
    if isinstance(obj, dict) and isinstance(obj.get("messages"), list):
        obj = obj["messages"]
    if isinstance(obj, dict):
        obj = [obj]
    if isinstance(obj, str):
        return [(default_role, obj)] if obj.strip() else []
    out: list[Message] = []
    if not isinstance(obj, list):
        return out
    for m in obj:
        if isinstance(m, str):
            if m.strip():
                out.append((default_role, m))
            continue
        if not isinstance(m, dict):
            continue
        if isinstance(m.get("message"), dict):  # {"index", "message": {...}} choice shape
            m = m["message"]
        if "content" not in m and isinstance(m.get("kwargs"), dict):  # LangChain serialized message
            m = m["kwargs"]
        # LangChain message dicts carry the role as "type" (human/ai/system/tool); a GenAI part's
        # "type" ("text") is not a role
        lc_type = as_str(m.get("type"))
        lc_type = lc_type if lc_type in _LANGCHAIN_TYPES else None
        role = role_of(m.get("role") or lc_type, default_role)
        t = content_text(m.get("parts")) if "parts" in m else None
        if t is None:
            t = content_text(m.get("content", m.get("text")))
        if t is not None:
            out.append((role, t))
    return out


def last_message(value: AttrValue, role: str) -> str | None:
    """The last ``role`` message of a JSON ``{"messages": [...]}`` value (LangGraph state, chat
    endpoints): the question or answer of a root span whose I/O is a conversation."""
    parsed = structured(value)
    if not (isinstance(parsed, dict) and isinstance(parsed.get("messages"), list)):
        return None
    texts = [t for r, t in parse_messages(parsed["messages"], "") if r == role]
    return texts[-1] if texts else None


def attr_messages(value: AttrValue, default_role: str) -> list[Message]:
    if isinstance(value, str):
        parsed = structured(value)
        return parse_messages(parsed if parsed is not None else value, default_role)
    return parse_messages(structured(value), default_role)
