"""The sentence splitter as it was before issue 38 (``ragpulse.scorer.segment`` at da6565e),
frozen for the differential test in ``test_segment_linear.py``: the linear splitter must split
normal text exactly as this one did. Quadratic on long runs of letters and repeated ``"a. "``;
feed it only normal text. Do not edit.
"""
# ruff: noqa

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


def _ends_with_abbrev(buf: str) -> bool:
    m = re.search(r"([A-Za-z][A-Za-z.]*)$", buf[:-1])
    if not m:
        return False
    word = m.group(1).lower().rstrip(".")
    if word in _ABBREV:
        return True
    # single capital initial ("J. Smith") or dotted acronym ("U.S.A")
    return len(word) == 1 or bool(re.fullmatch(r"(?:[a-z]\.)+[a-z]", word))


def _split_line(line: str) -> list[str]:
    out: list[str] = []
    buf: list[str] = []
    n = len(line)
    depth = 0  # inside 「…」 or （…）: a quoted sentence end does not end the outer sentence
    i = 0
    while i < n:
        ch = line[i]
        buf.append(ch)
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
            prev = line[i - 1] if i > 0 else ""
            nxt = line[i + 1 :].lstrip()[:1]
            text = "".join(buf)
            if prev.isdigit() and nxt[:1].isdigit():
                end = False
            elif re.fullmatch(r"\s*\(?\d{1,3}|\s*[A-Za-z]", text[:-1]):
                end = False  # a list marker: "1. Item", "a. Item"
            elif _ends_with_abbrev(text) and not (nxt and nxt.isupper() and _is_sentence_abbrev(text)):
                end = False
            elif nxt and nxt.islower():
                end = False
            else:
                end = True
        elif ch == "." and i + 1 < n and _is_cjk(line[i + 1]):
            end = True  # "...した.次の" in mixed text
        if end:
            while i + 1 < n and (line[i + 1] in _CLOSERS or line[i + 1] in _HARD_END):
                i += 1
                buf.append(line[i])
            out.append("".join(buf).strip())
            buf = []
        i += 1
    if buf and "".join(buf).strip():
        out.append("".join(buf).strip())
    return out


def _is_sentence_abbrev(text: str) -> bool:
    # "etc." and "al." commonly end sentences; titles ("Dr.") never do.
    m = re.search(r"([A-Za-z.]+)\.$", text)
    return bool(m and m.group(1).lower() in {"etc", "al", "inc", "ltd", "co", "corp"})


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
