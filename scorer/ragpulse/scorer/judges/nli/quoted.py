"""Statements that repeat a passage word for word are supported, whatever the model says.

The bundled model reads some pairs of a sentence and itself as unsupported: "Standard delivery
takes 3 days." against itself scored 0.22, 博物馆9:00开门，17:30关门。 against itself 0.19
(docs/judges.md, "Quoted statements"). An answer that copies a passage's sentence is the most
faithful answer there is, and extractive RAG answers do it all the time. :func:`quoted` finds,
for each statement, a context that holds it as one sentence or a run of up to
:data:`MAX_RUN` consecutive sentences, compared by :func:`quote_key`: Unicode NFKC, case
folded, citation markers (``[1]``, ``[2, 3]``, ``【1】``), markdown emphasis and list marks and
every space and punctuation mark dropped. Nothing shorter than :data:`MIN_CHARS` characters of
the key counts ("Yes." repeating "Yes." proves nothing). A part of a sentence never counts:
"the warranty covers water damage" inside "It is false that the warranty covers water damage"
is not a quote.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence

__all__ = ["MAX_RUN", "MIN_CHARS", "QUOTED_VERSION", "quote_key", "quoted"]

QUOTED_VERSION = "quoted@1"
"""What the stored scoring version says when quoted statements are supported
(``NliJudgeSettings.quoted_support``); a change of what counts as a quote is a new version."""
MAX_RUN = 3
"""The longest run of consecutive sentences of one context a statement may repeat."""
MIN_CHARS = 8
"""The shortest key (letters and digits, after :func:`quote_key`) that counts as a quote."""

_CITATION = re.compile(r"\[\s*\d+(?:\s*[,\-\u2013]\s*\d+)*\s*\]|【\s*\d+\s*】|\^\d+")
_DROP = re.compile(r"[\W_]+")


def quote_key(text: str) -> str:
    """``text`` as quotes are compared: NFKC, case folded, citation markers removed, then only
    letters, digits and marks kept (spaces, punctuation, markdown and symbols dropped)."""
    text = _CITATION.sub(" ", unicodedata.normalize("NFKC", text)).casefold()
    return _DROP.sub("", text)


def quoted(statements: Sequence[str], contexts: Sequence[str],
           split: Callable[[str], list[str]]) -> dict[int, tuple[int, str]]:
    """``{statement index: (context index, the quoted sentences as the context has them)}`` for
    every statement that one context holds as one sentence or a run of up to :data:`MAX_RUN`
    consecutive sentences (``split`` cuts a context into sentences), compared by
    :func:`quote_key`; the first context that holds it wins. Statements whose key is shorter
    than :data:`MIN_CHARS` are never quotes."""
    wanted: dict[str, list[int]] = {}
    for i, s in enumerate(statements):
        key = quote_key(s)
        if len(key) >= MIN_CHARS:
            wanted.setdefault(key, []).append(i)
    found: dict[int, tuple[int, str]] = {}
    if not wanted:
        return found
    for j, context in enumerate(contexts):
        sentences = split(context)
        keys = [quote_key(s) for s in sentences]
        for start in range(len(sentences)):
            key = ""
            for end in range(start, min(start + MAX_RUN, len(sentences))):
                key += keys[end]
                for i in wanted.get(key, ()):
                    found.setdefault(i, (j, " ".join(sentences[start:end + 1])))
        if len(found) == sum(len(v) for v in wanted.values()):
            break
    return found
