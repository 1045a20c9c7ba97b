"""News-style formatting noise for premises (data v3).

The QAGS-CNNDM contexts the judge is measured on are tokenized, lower-cased news text: "sarah
flower", "`` the cleaner your diet ''", "26, 000", "( evening primrose". A model trained on clean
premises only reads that formatting as a difference in content. ``news_noise`` rewrites a clean
premise that way (the hypothesis stays clean: summaries are written cleanly), so the same pair
teaches that formatting is not content. Pure and deterministic for a given ``rng``.
"""

from __future__ import annotations

import random
import re

_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}\b)")
_PUNCT = re.compile(r"(?<=\S)([,.;:!?)%])(?=[\s,.;:!?)]|$)")
_OPEN = re.compile(r"\((?=\S)")
_DQUOTE = re.compile(r'"([^"]{1,300}?)"')
_CAPWORD = re.compile(r"\b[A-Z][\w'-]*")
_SENT_START = re.compile(r"(?:^|[.!?]\s+)([A-Z][\w'-]*)")


def lower_names(text: str) -> str:
    """Lower-case capitalised words except the first word of each sentence ("Sarah Flower said"
    -> "sarah flower said"; "He said" stays)."""
    keep = {m.start(1) for m in _SENT_START.finditer(text)}
    return _CAPWORD.sub(lambda m: m.group() if m.start() in keep else m.group().lower(), text)


def space_punct(text: str) -> str:
    """Tokenizer spacing: "word, word." -> "word , word ." and "(x)" -> "( x )"."""
    text = _OPEN.sub("( ", text)
    return _PUNCT.sub(r" \1", text)


def tex_quotes(text: str) -> str:
    """Double quotes as the PTB tokenizer writes them: "x" -> `` x ''."""
    return _DQUOTE.sub(lambda m: f"`` {m.group(1).strip()} ''", text)


def spaced_thousands(text: str) -> str:
    """26,000 -> 26, 000 (the CNN/DailyMail tokenization)."""
    return _THOUSANDS.sub(", ", text)


def news_noise(text: str, rng: random.Random) -> str:
    """``text`` with a random subset (at least one) of the transforms above; half the time the
    whole text is lower-cased instead of the names only."""
    t = spaced_thousands(tex_quotes(text))
    steps = [s for s in (lower_names, space_punct) if rng.random() < 0.7] or [lower_names]
    for step in steps:
        t = step(t)
    if lower_names in steps and rng.random() < 0.5:
        t = t.lower()
    return t


def maybe_noise(premise: str, seed: int, share: float) -> str:
    """``premise`` noised (``news_noise``) for about ``share`` of premises. The choice and the
    noise depend only on the premise and ``seed``, so all rows of one premise get the same text
    (the valid split and gzip both group rows by premise)."""
    rng = random.Random(f"noise-{seed}-{premise}")
    return news_noise(premise, rng) if rng.random() < share else premise
