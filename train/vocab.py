"""Prune XLM-R's 250k pieces to what English, Japanese and Chinese text uses.

Kept: the four specials; every single-character piece (with or without the U+2581 prefix, any
script: a word of another script degrades to characters, not to ``<unk>``); every multi-character
piece made only of kana, CJK ideographs, CJK/full-width punctuation; then multi-character
pieces made only of ASCII/Latin-1/general punctuation, first those a corpus of the training text
uses (most used first: the full vocabulary's segmentation of it, ``counts``), then the most
probable by score, until ``size`` pieces are kept. (Score alone is not enough: XLM-R's scores are
global over 100 languages, and "▁includes" ranks below 36k Latin pieces of other languages.)
Unigram scores are log-probabilities, so the pruned tokenizer still picks the most probable
segmentation among what is left; a dropped Latin word is spelled with shorter pieces.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .spm import META, SPECIALS

__all__ = ["corpus_counts", "keep_ids"]


def _cjk(o: int) -> bool:
    return (0x3000 <= o <= 0x30FF or 0x31F0 <= o <= 0x31FF or 0x3200 <= o <= 0x33FF
            or 0x3400 <= o <= 0x4DBF or 0x4E00 <= o <= 0x9FFF or 0xF900 <= o <= 0xFAFF
            or 0xFF00 <= o <= 0xFFEF)


def _latin(o: int) -> bool:
    return 0x20 <= o <= 0x7E or 0xA0 <= o <= 0xFF or 0x2000 <= o <= 0x206F


def keep_ids(pieces: Sequence[str], scores: Sequence[float], size: int = 80_000,
             counts: np.ndarray | None = None) -> np.ndarray:
    """Sorted ids of the pieces to keep (ids 0-3, the specials, first). ``counts[i]``: how often
    piece ``i`` occurs in the corpus' full-vocabulary segmentation."""
    sc = np.asarray(scores)
    keep: set[int] = set()
    lat: list[int] = []
    for i, p in enumerate(pieces):
        if p in SPECIALS:
            keep.add(i)
            continue
        body = p[1:] if p.startswith(META) else p
        if len(body) <= 1:
            keep.add(i)
            continue
        cps = [ord(c) for c in body]
        if all(_cjk(o) or _latin(o) for o in cps) and any(_cjk(o) for o in cps):
            keep.add(i)
        elif all(_latin(o) for o in cps):
            lat.append(i)
    cnt = np.zeros(len(pieces)) if counts is None else np.asarray(counts, dtype=np.float64)
    lat.sort(key=lambda i: (-cnt[i], -sc[i]))
    keep.update(lat[: max(0, size - len(keep))])
    return np.array(sorted(keep), dtype=np.int64)


def corpus_counts(tokenizer_json: str, texts: Sequence[str], n: int) -> np.ndarray:
    """Occurrences of each of the ``n`` pieces in ``texts`` under ``tokenizer_json`` (the full
    vocabulary's ``tokenizers`` export)."""
    from tokenizers import Tokenizer

    tk = Tokenizer.from_str(tokenizer_json)
    tk.no_truncation()
    counts = np.zeros(n, dtype=np.int64)
    for k in range(0, len(texts), 2000):
        for e in tk.encode_batch(list(texts[k : k + 2000]), add_special_tokens=False):
            np.add.at(counts, np.asarray(e.ids, dtype=np.int64), 1)
    return counts
