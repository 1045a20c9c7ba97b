"""Tolerant readers of one attribute value: an int where a string belongs, JSON that does not
parse, a kvlist where JSON text was expected all read as "nothing here", never raise. Text,
versions, numbers, model names, token counts, and JSON (or structured OTLP) values, including
JSON arrays a size limit cut short (:func:`structured`). Pure and thread-safe.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..span import AttrValue


def as_str(value: Any) -> str | None:
    """``value`` if it is a string: attribute values may be dicts (kvlists), which are
    unhashable and must never reach a set membership test."""
    return value if isinstance(value, str) else None


REDACTED = "__REDACTED__"
"""What OpenInference writes in place of a hidden value (``REDACTED_VALUE`` in
openinference-instrumentation's ``config.py``; ``OPENINFERENCE_HIDE_*``)."""


def as_text(value: AttrValue) -> str | None:
    """A non-blank string, else ``None`` (ints, tuples, blank strings and OpenInference's
    redaction placeholder are not text)."""
    if isinstance(value, str) and value.strip() and value != REDACTED:
        return value
    return None


def as_version(value: AttrValue) -> str | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return str(value)
    t = as_text(value)
    return t.strip() if t else None


def as_number(value: AttrValue) -> float | None:
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


# What instrumentations write for a model without a name (LlamaIndex's LLMMetadata default,
# OpenLLMetry's LangChain handler): no name, so the fallbacks below apply.
_NO_MODEL = frozenset({"unknown", "none", "null", "n/a", "default"})


def as_model_name(value: AttrValue) -> str | None:
    t = as_text(value)
    if t is None:
        return None
    t = t.strip()
    return None if t.lower() in _NO_MODEL else t


def as_token_count(value: AttrValue) -> int | None:
    """A token count: a number (not a bool), truncated to an int."""
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


# How a cut string value ends: the span decoder's mark (``max_value_chars``) or the collector's
# (a record over the Kafka limit, ``ragpulse.collector.shrink``).
_CUT_VALUE = re.compile(r"(?: …\[truncated by ragpulse: \d+ bytes\]|…)\Z")
_JSON = json.JSONDecoder()


def structured(value: Any) -> Any:
    """A JSON-ish Python value from a JSON string or a structured OTLP value (tuples → lists).

    A JSON array cut short by a size limit (it ends in a truncation mark) gives its complete
    leading items: ten thousand small documents in one JSON string keep the first ones that
    fit, as one huge document keeps its first characters."""
    if isinstance(value, str):
        s = value.lstrip()
        if not s or s[0] not in '[{"':
            return None
        try:
            return json.loads(s)
        except (ValueError, RecursionError):  # RecursionError: hostile nesting ("[[[[...")
            if s[0] == "[" and _CUT_VALUE.search(s):
                return _json_array_prefix(s)
            return None
    if isinstance(value, tuple):
        return [_structured_item(x) for x in value]
    if isinstance(value, dict):
        return {k: _structured_item(x) for k, x in value.items()}
    return None


def _json_array_prefix(s: str) -> list[Any] | None:
    """The items of the JSON array ``s`` that a size limit cut short (it ends in a truncation
    mark): the complete leading items, then the cut one closed where it was cut (its string
    ends in "…"), if that makes valid JSON. ``None`` if nothing could be read. Linear in the
    length of ``s``."""
    out: list[Any] = []
    i, n = 1, len(s)
    try:
        while True:
            while i < n and s[i] in " \t\r\n":
                i += 1
            if i >= n or s[i] == "]":
                break
            item, i = _JSON.raw_decode(s, i)
            out.append(item)
            while i < n and s[i] in " \t\r\n":
                i += 1
            if i >= n or s[i] != ",":
                break
            i += 1
    except (ValueError, RecursionError):
        last = _close_cut_json(s[i:])
        if last is not None:
            out.append(last)
    return out or None


# Scanning a cut JSON text: a complete string, the quote opening the string that was cut, or
# a bracket outside strings.
_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|"|[\[\]{}]')


def _close_cut_json(t: str) -> Any:
    """The JSON value ``t`` that a limit cut (``t`` ends in a truncation mark), closed where it
    was cut: an open string gets "…" and its quote, open arrays and objects their brackets.
    ``None`` when the cut left no valid value (e.g. it fell between a key and its value)."""
    t = _CUT_VALUE.sub("", t)
    closers: list[str] = []
    end = 0
    in_string = False
    for m in _JSON_TOKEN.finditer(t):
        tok = m.group()
        if tok == '"':  # a string that never closes: the cut is inside it
            in_string = True
            end = m.start()
            break
        if tok == "[" or tok == "{":
            closers.append("]" if tok == "[" else "}")
        elif tok == "]" or tok == "}":
            if not closers:
                return None
            closers.pop()
        end = m.end()
    close = "".join(reversed(closers))
    if in_string:
        # Drop a cut escape sequence ("\\" or "\\u00") so the string stays valid JSON.
        body = re.sub(r"\\(?:u[0-9a-fA-F]{0,3})?\Z", "", t[end:])
        candidates = [t[:end] + body + '…"' + close]
    else:  # cut between values, or inside a number or literal: keep it if it is whole
        candidates = [t.rstrip().rstrip(",") + close, t[:end].rstrip().rstrip(",") + close]
    for text in candidates:
        try:
            return json.loads(text)
        except (ValueError, RecursionError):
            continue
    return None


def _structured_item(v: Any) -> Any:
    if isinstance(v, tuple):
        return [_structured_item(x) for x in v]
    if isinstance(v, dict):
        return {k: _structured_item(x) for k, x in v.items()}
    return v
