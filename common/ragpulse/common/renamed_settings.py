"""Deprecated names of settings that moved: the old name keeps working, with a warning.

A settings model lists its moves (``{"old.dotted.name": "new.dotted.name"}``) and calls
:func:`move_renamed` from a ``model_validator(mode="before")``. pydantic-settings hands nested
models the raw keys of ``RAGPULSE_<SECTION>__<KEY>`` variables, so environment variables and
constructor arguments are both covered (a top-level field must still be declared to be read from
the environment).
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

__all__ = ["move_renamed"]

log = logging.getLogger(__name__)

_MISSING = object()


def move_renamed(data: Any, moves: Mapping[str, str], *, model: str) -> Any:
    """``data`` with each value found under an old dotted name moved to its new one.

    Warns once per moved value (``DeprecationWarning`` and a log line naming ``model``). When a
    value is also given under the new name, the new one wins. Nested dicts on the way are
    copied, never mutated; a nested pydantic model is replaced by the values that were set on
    it. Inputs that are not dicts are returned unchanged. Never raises.
    """
    if not isinstance(data, dict):
        return data
    out = dict(data)
    for old, new in moves.items():
        value = _pop(out, old.split("."))
        if value is _MISSING:
            continue
        message = f"{model}: {old!r} is deprecated and will be removed; use {new!r}"
        warnings.warn(message, DeprecationWarning, stacklevel=2)
        log.warning("%s", message)
        _set_default(out, new.split("."), value)
    return out


def _child(node: dict[str, Any], key: str) -> dict[str, Any] | None:
    value = node.get(key)
    if isinstance(value, BaseModel):
        value = value.model_dump(exclude_unset=True)
    if not isinstance(value, dict):
        return None
    node[key] = dict(value)
    return node[key]


def _pop(node: dict[str, Any], path: list[str]) -> Any:
    for key in path[:-1]:
        child = _child(node, key)
        if child is None:
            return _MISSING
        node = child
    return node.pop(path[-1], _MISSING)


def _set_default(node: dict[str, Any], path: list[str], value: Any) -> None:
    for key in path[:-1]:
        child = _child(node, key)
        if child is None:
            if key in node:  # not a mapping: leave it for validation to report
                return
            child = node[key] = {}
        node = child
    node.setdefault(path[-1], value)
