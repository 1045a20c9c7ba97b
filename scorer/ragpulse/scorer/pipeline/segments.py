"""The ``segments`` of a score row: the span attributes the user lists, and the trace's language
when the list names ``language``.

``ragpulse status --why`` and the "why" panel rank these next to service, environment, model,
prompt and retriever version (``scores.segments``, schema migration 8).

* ``language`` (:func:`detect_language`), when ``write.segment_attributes`` names it (it is no
  span attribute): ``en``, ``ja``, ``zh`` or ``other``, from the question and answer text, by
  script; absent when the trace has no letters at all. Opt-in: where a language coincides with
  services (the demo's English services and its Japanese one), a language segment holds every
  change of those services' prompts on more traffic, and ranks beside them.
* Each attribute of ``write.segment_attributes`` (e.g. ``http.route``, ``app.doc_source``):
  its value on the trace's root span, else on the first other span that has it (span
  attributes before resource attributes); absent when no span has it.

Values are cleaned like every stored label (:func:`~ragpulse.scorer.store.rows.safe_label`:
no control, format or bidi characters, no backslash) and cut to ``max_chars`` characters. The
cardinality cap, per key and per scorer process: the first ``max_values`` distinct values a key
takes are stored as they are; every later new value is stored as ``other`` (a value already
admitted stays itself) and counted in ``segment_values_capped``. The admitted set starts empty
when the process starts, so two scorer processes may admit different values; the table holds
at most ``max_values + 1`` values per key per process.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..store.rows import safe_label
from ..traces.span import Span

__all__ = ["OTHER", "SegmentReader", "detect_language"]

OTHER = "other"
"""What a value beyond the cap (and a language other than en/ja/zh) is stored as."""

_KANA = re.compile(r"[\u3040-\u30ff\u31f0-\u31ff\uff66-\uff9f]")
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LETTER = re.compile(r"[^\W\d_]")
_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")
# Short function words: a Latin-script text is English when enough of its words are these.
_EN_WORDS = frozenset("""
a an the is are was were be been being am do does did have has had will would can could should
may might must shall of to in on at by for from with without about into over under after before
and or but not no if then than that this these those there here it its they them their we our
you your he she his her i my me what which who whom whose when where why how all any each some
as so too very just only also more most less can't don't doesn't isn't aren't won't
""".split())


def detect_language(text: str) -> str:
    """``en``, ``ja``, ``zh`` or ``other`` for ``text``, by script; ``""`` without letters.

    The rule: when at least a fifth of the letters are Han or kana, the text is ``ja`` if kana
    make up at least a tenth of those (Chinese has no kana; Japanese mixes them into every
    sentence), else ``zh``. Otherwise it is ``en`` when at least a tenth of its Latin words
    (and at least one) are common English function words ("the", "is", "of", ...), else
    ``other`` (another Latin-script language, Hangul, Cyrillic...). Linear in the text."""
    letters = len(_LETTER.findall(text))
    if not letters:
        return ""
    kana = len(_KANA.findall(text))
    cjk = kana + len(_HAN.findall(text))
    if cjk * 5 >= letters:
        return "ja" if kana * 10 >= cjk else "zh"
    words = _WORD.findall(text.lower())
    common = sum(1 for w in words if w in _EN_WORDS)
    return "en" if common and common * 10 >= len(words) else OTHER


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(_text(v) for v in value)
    return "" if value is None else str(value)


class SegmentReader:
    """The segments of one trace (:meth:`__call__`), with the per-key cardinality cap.

    Not thread-safe (it keeps the admitted values): the scorer calls it from its consumer
    thread only, through the preparer."""

    def __init__(self, attributes: Sequence[str] = (), *, max_values: int = 50,
                 max_chars: int = 64) -> None:
        if max_values < 1 or max_chars < 1:
            raise ValueError(f"max_values ({max_values}) and max_chars ({max_chars}) must be >= 1")
        self.attributes = tuple(a for a in attributes if a != "language")
        """The span attributes read (``language`` is detected, not read)."""
        self.language = "language" in attributes
        self.max_values = max_values
        self.max_chars = max_chars
        self._admitted: dict[str, set[str]] = {a: set() for a in self.attributes}
        self.capped = 0
        """Values stored as ``other`` because their key was at the cap (``segment_values_capped``)."""

    def __call__(self, spans: Iterable[Span], text: str) -> dict[str, str]:
        """``{key: value}`` for the trace of ``spans`` whose question and answer are ``text``."""
        out: dict[str, str] = {}
        if self.language:
            language = detect_language(text)
            if language:
                out["language"] = language
        if not self.attributes:
            return out
        ordered = sorted(spans, key=lambda s: s.parent_span_id is not None)  # the root first
        for key in self.attributes:
            value = self._value(ordered, key)
            if value:
                out[key] = self._capped(key, value)
        return out

    def _value(self, spans: Sequence[Span], key: str) -> str:
        for source in ("attributes", "resource"):
            for s in spans:
                attrs: Mapping[str, Any] = getattr(s, source)
                if key in attrs:
                    return safe_label(_text(attrs[key]), self.max_chars).strip()
        return ""

    def _capped(self, key: str, value: str) -> str:
        seen = self._admitted[key]
        if value in seen:
            return value
        if len(seen) < self.max_values:
            seen.add(value)
            return value
        self.capped += 1
        return OTHER
