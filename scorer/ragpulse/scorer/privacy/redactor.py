"""The redaction policy (:class:`PrivacySettings`) and the :class:`Redactor` that applies it:
recognised spans become typed placeholders numbered per sample and per value, then the user's
own redactor runs. The recognisers themselves are in :mod:`.recognisers`.

Thread-safety: a :class:`Redactor` is immutable apart from its counters, which are guarded by a
lock; one instance may be shared by threads and event loops. Nothing here blocks or does I/O
(the user's redactor is imported once, when the redactor is built).
"""

from __future__ import annotations

import importlib
import re
import threading
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic_settings import NoDecode

from ragpulse.common import env_list

from ..model import Sample
from .recognisers import (
    BUILTIN_KINDS,
    Recogniser,
    builtin_recognisers,
    count_digits,
    decimal_digits,
    pattern_recogniser,
)

__all__ = ["PrivacySettings", "Redactor", "build_redactor"]

_NAME = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
# Metadata keys of a Sample that hold free text a user or an app wrote (the rest are ids,
# versions, numbers). Only these are redacted in Sample.metadata.
_FREE_TEXT_METADATA = ("error_message", "feedback_comment")


class PrivacySettings(BaseModel):
    """What is done to trace text before it is judged or stored. Frozen; validated on build."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    redact: bool = Field(
        True,
        description="replace personal data by typed placeholders before judging and storing",
    )
    # NoDecode: the environment gives "email,phone" (or a JSON list), split by the validator below
    kinds: Annotated[tuple[str, ...], NoDecode] = Field(
        BUILTIN_KINDS,
        description=f"built-in recognisers to run, any of {', '.join(BUILTIN_KINDS)}",
    )
    patterns: dict[str, str] = Field(
        default_factory=dict,
        description="extra recognisers: name (lower-case identifier, the placeholder label) -> "
        "Python regular expression; every match is replaced",
    )
    unmarked_names: bool = Field(
        False,
        description="with the person recogniser, also replace bare names the text does not mark "
        "(Taro Yamada, 山田太郎は, 王小明说): common English, Japanese and Chinese name patterns "
        "from name lists; off by default for its false positives (docs/reliability.md)",
    )
    store_text: bool = Field(
        True,
        description="store question/answer excerpts, explanations and unsupported statements "
        "with their closest passage in ClickHouse; off = no trace text is stored at all",
    )
    redactor: str | None = Field(
        None,
        description="your own redactor, 'package.module:function' taking and returning a str, "
        "run on every text after the built-in recognisers (e.g. an NER model)",
        pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$",
    )

    @field_validator("kinds", mode="before")
    @classmethod
    def _split(cls, v: object) -> object:
        return env_list(v)  # RAGPULSE_PRIVACY__KINDS=email,phone or '["email", "phone"]'

    @field_validator("kinds")
    @classmethod
    def _known(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [k for k in v if k not in BUILTIN_KINDS]
        if unknown:
            raise ValueError(f"unknown recognisers {unknown}; known: {list(BUILTIN_KINDS)}")
        return tuple(dict.fromkeys(v))

    @field_validator("patterns")
    @classmethod
    def _compile(cls, v: dict[str, str]) -> dict[str, str]:
        for name, pattern in v.items():
            if not _NAME.match(name) or name in BUILTIN_KINDS:
                raise ValueError(
                    f"pattern name {name!r}: use a lower-case identifier (<= 32 chars) that is "
                    f"not a built-in kind"
                )
            try:
                compiled = re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"pattern {name!r} does not compile: {exc}") from None
            if compiled.match(""):
                # A pattern matching the empty string would insert a placeholder between every
                # character: almost certainly a mistake, and it destroys the text.
                raise ValueError(f"pattern {name!r} matches the empty string")
        return v


def _normal_form(kind: str, value: str) -> str:
    """What makes two matches the same value: a card or phone is its digits (``4111 1111 ...``
    and ``4111111111...`` are one card), everything else is compared width-, case- and
    space-folded (``ＴＡＲＯ@example.jp`` and ``taro@example.jp`` are one address)."""
    if kind in ("card", "phone"):
        return decimal_digits(value)
    folded = unicodedata.normalize("NFKC", value).casefold()
    return "".join(folded.split())


@dataclass
class _Numbering:
    """Placeholder numbers of one sample: the same value always gets the same number."""

    seen: dict[tuple[str, str], int]
    per_kind: dict[str, int]

    def label(self, kind: str, value: str) -> str:
        """The placeholder of ``value``: ``[KIND_n]``, the same ``n`` for the same value."""
        key = (kind, _normal_form(kind, value))
        n = self.seen.get(key)
        if n is None:
            n = self.per_kind.get(kind, 0) + 1
            self.per_kind[kind] = n
            self.seen[key] = n
        return f"[{kind.upper()}_{n}]"


class Redactor:
    """Replaces personal data in text by placeholders. Build with :func:`build_redactor`.

    :meth:`redact` and :meth:`redact_sample` never raise for any ``str`` input and never block;
    the instance is safe to share between threads (counters are locked).
    """

    def __init__(self, settings: PrivacySettings | None = None) -> None:
        self.settings = settings or PrivacySettings()
        self._recognisers: list[Recogniser] = builtin_recognisers(
            self.settings.kinds, unmarked_names=self.settings.unmarked_names)
        self._recognisers += [pattern_recogniser(name, pattern)
                              for name, pattern in self.settings.patterns.items()]
        self._custom = _load_redactor(self.settings.redactor) if self.settings.redactor else None
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {"texts_redacted": 0, "samples_redacted": 0}
        for kind, *_ in self._recognisers:
            self._counts[f"redactions_{kind}"] = 0
        if self._custom is not None:
            self._counts["redactions_custom"] = 0

    @property
    def enabled(self) -> bool:
        """Redaction is on and at least one recogniser (or the user's redactor) would run."""
        return self.settings.redact and (bool(self._recognisers) or self._custom is not None)

    def redact(self, text: str, *, _numbering: _Numbering | None = None) -> str:
        """``text`` with every recognised value replaced by ``[KIND_n]``.

        Numbering restarts for every call unless a sample's numbering is shared (see
        :meth:`redact_sample`). Returns ``text`` itself when redaction is off or nothing matched.
        """
        if not self.settings.redact or not text:
            return text
        numbering = _numbering or _Numbering({}, {})
        found: dict[str, int] = {}
        # Each recogniser runs on the output of the previous one, so placeholders (which contain
        # no digits or '@' beyond the number, and are bracketed) are never matched again.
        digits = -1  # decimal digits in ``text``, counted once per version of it
        for kind, spans_of, needed, min_digits in self._recognisers:
            if min_digits:
                if digits < 0:
                    digits = count_digits(text)
                if digits < min_digits:
                    continue
            elif not needed(text):
                continue
            spans = spans_of(text)
            if not spans:
                continue
            digits = -1  # the text changes below: count again if a later recogniser asks
            parts: list[str] = []
            pos = 0
            for start, end in spans:
                if start < pos:  # overlapping matches of a custom pattern: keep the first
                    continue
                parts.append(text[pos:start])
                parts.append(numbering.label(kind, text[start:end]))
                pos = end
                found[kind] = found.get(kind, 0) + 1
            parts.append(text[pos:])
            text = "".join(parts)
        if self._custom is not None:
            redacted = self._custom(text)
            if not isinstance(redacted, str):
                raise TypeError(f"the redactor {self.settings.redactor} returned "
                                f"{type(redacted).__name__}, not str")
            if redacted != text:
                found["custom"] = found.get("custom", 0) + 1
                text = redacted
        if found:
            with self._lock:
                self._counts["texts_redacted"] += 1
                for kind, n in found.items():
                    self._counts[f"redactions_{kind}"] += n
        return text

    def redact_sample(self, sample: Sample) -> Sample:
        """A copy of ``sample`` with question, contexts, answer, reference and free-text metadata
        redacted, one numbering shared by all of them. Returns ``sample`` itself when redaction
        is off or nothing matched."""
        if not self.settings.redact:
            return sample
        numbering = _Numbering({}, {})

        def r(t: str) -> str:
            return self.redact(t, _numbering=numbering)

        update: dict[str, Any] = {}
        q = r(sample.question)
        if q is not sample.question:
            update["question"] = q
        contexts = tuple(r(c) for c in sample.contexts)
        if any(a is not b for a, b in zip(contexts, sample.contexts)):
            update["contexts"] = contexts
        a = r(sample.answer)
        if a is not sample.answer:
            update["answer"] = a
        if sample.reference:
            ref = r(sample.reference)
            if ref is not sample.reference:
                update["reference"] = ref
        meta = sample.metadata
        if any(isinstance(meta.get(k), str) and meta.get(k) for k in _FREE_TEXT_METADATA):
            new_meta = dict(meta)
            for k in _FREE_TEXT_METADATA:
                v = meta.get(k)
                if isinstance(v, str) and v:
                    new_meta[k] = r(v)
            if any(new_meta[k] is not meta.get(k) for k in _FREE_TEXT_METADATA if k in meta):
                update["metadata"] = new_meta
        if not update:
            return sample
        with self._lock:
            self._counts["samples_redacted"] += 1
        return sample.model_copy(update=update)

    def stats(self) -> dict[str, int]:
        """Cumulative counters: texts and samples changed, and values replaced per kind."""
        with self._lock:
            return dict(self._counts)


def _load_redactor(path: str) -> Callable[[str], str]:
    """The function named by ``package.module:function``. Raises ``ValueError`` (start-up)."""
    module_name, _, attr = path.partition(":")
    try:
        fn = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"privacy.redactor {path!r} cannot be loaded: {exc}") from None
    if not callable(fn):
        raise ValueError(f"privacy.redactor {path!r} is not callable")
    return fn


def build_redactor(settings: PrivacySettings | None = None) -> Redactor:
    """A :class:`Redactor` for ``settings`` (default: every built-in recogniser on)."""
    return Redactor(settings)
