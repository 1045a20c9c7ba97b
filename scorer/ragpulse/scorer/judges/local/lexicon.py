"""The local judge's English lexicon, in one place: stop words, the suffix stemmer, number words
and the synonym groups. Read by the lexical views (``text.py``: content units of questions and
context sentences) and by the faithfulness detector (``support_detector.py``: statement
features). Constants and pure functions only; safe from any thread.

The two readers use the same core with one documented difference each, kept because the
detector's ``support-lr@5`` weights and the local judge's relevance scores were measured with
them (``tests/scorer/local/test_lexicon_pins.py`` pins both):

- stop words: :data:`STOP_WORDS` is the shared core; :data:`QUESTION_STOP_WORDS` adds "whats"
  (questions), :data:`STATEMENT_STOP_WORDS` adds prepositions and reporting verbs (a statement's
  "according to", "said" is not content the context must hold);
- stemming: :func:`strip_suffix` is the one suffix stripper; the lexical views strip
  :data:`LIGHT_SUFFIXES`, the detector's :func:`stem_word` strips :data:`SUFFIXES` and also folds
  possessives, number words, a final "e" and synonyms.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "LIGHT_SUFFIXES",
    "NUMBER_WORDS",
    "QUESTION_STOP_WORDS",
    "SENTENCE_STARTERS",
    "STATEMENT_STOP_WORDS",
    "STOP_WORDS",
    "SUFFIXES",
    "SYNONYM_GROUPS",
    "stem_word",
    "strip_suffix",
    "words",
]


def words(text: str) -> frozenset[str]:
    """A word list written as text (one place to read it), as a frozenset."""
    return frozenset(text.split())


STOP_WORDS = words(
    """a an the and or but if then than so as of at by for from in into on onto to with about
    is are was were be been being am do does did have has had will would shall should can could
    may might must it its this that these those there here he she they we you i me him her them
    us my your his their our which who whom whose what when where why how all any both each
    some such only own same too very just also not no nor s t"""
)
"""Function words of English: never content."""

QUESTION_STOP_WORDS = STOP_WORDS | {"whats"}
"""Stop words of the lexical views (questions and context sentences)."""

STATEMENT_STOP_WORDS = STOP_WORDS | words(
    """above after against along among around before behind below beneath beside between beyond
    during except inside near off out outside over past since through throughout till toward
    under until up upon via within doing having it's few more most other never said says say
    according"""
)
"""Stop words of the faithfulness detector's statements: also prepositions, quantifiers and
reporting verbs."""

SENTENCE_STARTERS = words(
    """despite however although though while whereas meanwhile additionally furthermore moreover
    overall then thus therefore hence still yet instead finally first second third lastly today
    yesterday tomorrow currently recently now in on at after before during since as once
    following according unlike like both either neither many several some most one another
    other its this these those there here his her their our my your while"""
)
"""Words capitalized only because they open a sentence: never names."""

_COUNTING = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty"
).split()
NUMBER_WORDS: dict[str, str] = {w: str(i) for i, w in enumerate(_COUNTING)} | {
    "thirty": "30", "forty": "40", "fifty": "50", "sixty": "60", "seventy": "70",
    "eighty": "80", "ninety": "90", "hundred": "100", "dozen": "12"}
"""English number words and the digits :func:`stem_word` writes for them."""

SUFFIXES: tuple[str, ...] = ("ingly", "ings", "ing", "edly", "ed", "ies", "es", "s", "ly")
"""The detector's suffixes, longest first within each family."""
LIGHT_SUFFIXES: tuple[str, ...] = ("ings", "ing", "ies", "ed", "es", "s")
"""The lexical views' suffixes: plurals and verb endings only."""

SYNONYM_GROUPS: tuple[str, ...] = (
    "buy purchase", "get receive obtain", "show present", "start begin commence",
    "finish end", "big large", "biggest largest", "tall high", "tallest highest",
    "quick fast rapid", "quickly rapidly", "help assist", "need require", "allow permit",
    "use utilize utilise", "build construct", "happen occur", "choose select", "reply respond",
    "child kid", "shop store", "ship deliver", "shipping delivery", "metre meter",
    "kilometre kilometer", "centimetre centimeter", "litre liter", "colour color",
    "centre center", "organisation organization", "programme program", "cancel terminate",
    "refund reimburse", "near close", "maybe perhaps", "almost nearly", "about approximately",
    "photo photograph", "film movie", "famous renowned", "die pass", "expire lapse",
    "email e-mail", "phone telephone", "exam examination", "found establish",
    "lie sit locate situate",
)
"""Words interchangeable in nearly every context (British/American spellings included); each
group maps to the stem of its first word. Kept to true equivalences: "one month" is not
"30 days", "above" is not "over" in every sense, so neither is here."""


def strip_suffix(word: str, suffixes: Sequence[str]) -> str:
    """``word`` without the first of ``suffixes`` it ends with, when at least three letters
    remain ("ies" becomes "y"); unchanged otherwise. Expects lower case. Pure."""
    for suf in suffixes:
        if word.endswith(suf) and len(word) - len(suf) >= 3:
            return word[: -len(suf)] + ("y" if suf == "ies" else "")
    return word


def _stem_base(word: str) -> str:
    w = word.lower().replace("’", "'")
    w = w.removesuffix("'s")
    if w in NUMBER_WORDS:
        return NUMBER_WORDS[w]
    w = strip_suffix(w, SUFFIXES)
    # "purchase" / "purchased" / "purchasing" meet at "purchas".
    if len(w) >= 5 and w.endswith("e"):
        w = w[:-1]
    return w


_SYNONYM: dict[str, str] = {}
for _group in SYNONYM_GROUPS:
    _canon = _stem_base(_group.split()[0])
    for _w in _group.split():
        _SYNONYM.setdefault(_stem_base(_w), _canon)


def stem_word(word: str) -> str:
    """The detector's English stem: lower case, possessive and one of :data:`SUFFIXES` off,
    number words as digits, a final "e" off, synonyms (:data:`SYNONYM_GROUPS`) mapped to one
    stem. Pure."""
    w = _stem_base(word)
    return _SYNONYM.get(w, w)
