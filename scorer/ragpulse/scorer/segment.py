"""Sentence and statement segmentation for English, Japanese and Chinese (and most space-less or
Latin-script text): no model, no download, deterministic.

Rules: a sentence ends at ``。！？!?．`` (full and half width) or at ``.`` followed by white space
and not preceded by a known abbreviation, an initial or a number's decimal point; closing quotes
and brackets (``」』）"'``) stay with the sentence they close; line breaks and list bullets end a
sentence. Statements are sentences further split at ``;``/``；`` and at bullet items, then
stripped of list markers; fragments without a letter or digit are dropped.
"""

from __future__ import annotations

import re

__all__ = ["split_sentences", "split_statements"]

_ABBREV = {
    "mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "vs", "etc", "e.g", "i.e", "cf", "fig",
    "no", "vol", "inc", "ltd", "co", "corp", "jan", "feb", "mar", "apr", "jun", "jul", "aug",
    "sep", "sept", "oct", "nov", "dec", "u.s", "u.k", "approx", "dept", "est", "gen", "gov",
    "lt", "col", "sgt", "capt", "rev", "mt", "ft", "al",
}
_CLOSERS = "\"'”’」』）)]】〕》〉"
_OPENERS = "「『（【〔《〈"
_PAIRED_CLOSERS = "」』）】〕》〉"
_HARD_END = "。！？!?．‼⁇⁈⁉"
_BULLET = re.compile(r"^\s*(?:[-*•・●◦▪‣]|\(?\d{1,3}[.)）]|[（(]?[a-zA-Z][.)）])\s+")
_WORDCHAR = re.compile(r"\w", re.UNICODE)
_WORD_RUN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.")
_FIRST_LETTER = re.compile(r"[A-Za-z]")
_ACRONYM = re.compile(r"(?:[a-z]\.)+[a-z]")
_NON_SPACE = re.compile(r"\S")
_LIST_MARKER = re.compile(r"\(?\d{1,3}|[A-Za-z]")
# "etc." and "al." commonly end sentences; titles ("Dr.") never do.
_SENTENCE_ABBREV = {"etc", "al", "inc", "ltd", "co", "corp"}


def _word_before(line: str, start: int, dot: int) -> int:
    """Where the run of ASCII letters and dots that ends just before ``line[dot]`` begins, not
    before ``start``. Only a period that ends a sentence candidate asks, and such a period is
    followed by white space or a closer, neither in the run: each character is walked once per
    line, so the splitter stays linear (a backtracking ``[A-Za-z][A-Za-z.]*$`` search was
    quadratic on a long run of letters, issue 38)."""
    pos = dot
    while pos > start and line[pos - 1] in _WORD_RUN:
        pos -= 1
    return pos


def _ends_with_abbrev(word: str) -> bool:
    """``word`` is the text from the first letter of the run before the period to the period."""
    word = word.lower().rstrip(".")
    if word in _ABBREV:
        return True
    # single capital initial ("J. Smith") or dotted acronym ("U.S.A")
    return len(word) == 1 or bool(_ACRONYM.fullmatch(word))


def _period_ends(line: str, start: int, lead: int, dot: int) -> bool:
    """Whether the period at ``line[dot]``, followed by white space, a closer or the line's end,
    ends the sentence that began at ``start`` (its first non-space character at ``lead``, or
    ``dot`` if none). Reads only the run before the period and the next word's first character."""
    nxt_at = _NON_SPACE.search(line, dot + 1)
    nxt = nxt_at.group() if nxt_at else ""
    if dot > 0 and line[dot - 1].isdigit() and nxt.isdigit():
        return False
    if dot - lead <= 4 and _LIST_MARKER.fullmatch(line, lead, dot):
        return False  # a list marker: "1. Item", "a. Item"
    run = _word_before(line, start, dot)
    first_letter = _FIRST_LETTER.search(line, run, dot)
    if first_letter and _ends_with_abbrev(line[first_letter.start():dot]) and not (
            nxt.isupper() and line[run:dot].lower() in _SENTENCE_ABBREV):
        return False
    return not nxt.islower()


def _split_line(line: str) -> list[str]:
    """One line's sentences, in one pass over its characters: a sentence is the slice from
    ``start`` to its end, never a copy per candidate period."""
    out: list[str] = []
    n = len(line)
    start = 0
    lead = -1  # the first non-space character of the sentence, once seen
    depth = 0  # inside 「…」 or （…）: a quoted sentence end does not end the outer sentence
    i = 0
    while i < n:
        ch = line[i]
        if lead < 0 and not ch.isspace():
            lead = i
        end = False
        if ch in _OPENERS:
            depth += 1
        elif ch in _PAIRED_CLOSERS:
            depth = max(0, depth - 1)
        elif depth:
            pass
        elif ch in _HARD_END:
            end = True
        elif ch == "." and (i + 1 == n or line[i + 1].isspace() or line[i + 1] in _CLOSERS):
            end = _period_ends(line, start, lead if lead >= 0 else i, i)
        elif ch == "." and i + 1 < n and _is_cjk(line[i + 1]):
            end = True  # "...した.次の" in mixed text
        if end:
            while i + 1 < n and (line[i + 1] in _CLOSERS or line[i + 1] in _HARD_END):
                i += 1
            out.append(line[start : i + 1].strip())
            start, lead = i + 1, -1
        i += 1
    if start < n and line[start:].strip():
        out.append(line[start:].strip())
    return out


def _is_cjk(ch: str) -> bool:
    o = ord(ch)
    return (
        0x3040 <= o <= 0x30FF  # kana
        or 0x3400 <= o <= 0x4DBF
        or 0x4E00 <= o <= 0x9FFF  # CJK ideographs
        or 0xF900 <= o <= 0xFAFF
        or 0xAC00 <= o <= 0xD7AF  # hangul
    )


def split_sentences(text: str) -> list[str]:
    """Split ``text`` into sentences. Empty or whitespace-only input gives ``[]``."""
    if not text or not text.strip():
        return []
    out: list[str] = []
    for line in re.split(r"\r?\n+|\u2028|\u2029", text):
        if not line.strip():
            continue
        out.extend(s for s in _split_line(line) if _WORDCHAR.search(s))
    return out


def split_statements(text: str) -> list[str]:
    """Split an answer into statement-sized units for verdicts: sentences, then clauses at
    semicolons, without list markers. A cheap stand-in for LLM decomposition."""
    out: list[str] = []
    for sent in split_sentences(text):
        sent = _BULLET.sub("", sent)
        for part in re.split(r"(?<=[;；])\s*", sent):
            part = part.strip().rstrip(";；").strip()
            if part and _WORDCHAR.search(part):
                out.append(part)
    return out
