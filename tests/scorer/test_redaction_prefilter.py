"""The redactor's digit-count pre-filter skips recognisers that cannot match; it must never change
what is redacted. Checked against the recognisers run unconditionally, in order, on texts built to
sit at the thresholds (8 digits for a phone, 13 for a card, 2 for an IBAN)."""

from __future__ import annotations

import random

import pytest

from ragpulse.scorer.privacy import PrivacySettings, Redactor, luhn_ok
from ragpulse.scorer.privacy.recognisers import _DIGIT, count_digits
from ragpulse.scorer.privacy.redactor import _Numbering


def _unfiltered(redactor: Redactor, text: str) -> str:
    """What :meth:`Redactor.redact` returns without any pre-filter: every recogniser runs."""
    numbering = _Numbering({}, {})
    for kind, spans_of, *_ in redactor._recognisers:
        spans = spans_of(text)
        if not spans:
            continue
        parts: list[str] = []
        pos = 0
        for start, end in spans:
            if start < pos:
                continue
            parts.append(text[pos:start])
            parts.append(numbering.label(kind, text[start:end]))
            pos = end
        parts.append(text[pos:])
        text = "".join(parts)
    return text


def _luhn_card(rng: random.Random, n: int) -> str:
    body = str(rng.randint(2, 6)) + "".join(str(rng.randint(0, 9)) for _ in range(n - 2))
    for check in "0123456789":
        if luhn_ok(body + check):
            return body + check
    raise AssertionError("unreachable")


FIXED = [
    "",
    "returns within 30 days of order 4471",
    "call 555-123-4567",  # 10 digits: a phone
    "call 555-12-45",  # 7 digits: nothing
    "+44 20 7946 09",  # 10 digits with +
    "+1 22 33 44",  # 7 digits: not a phone
    "13812345678",  # mainland China mobile, 11 digits
    "１３８１２３４５６７８",  # the same in full-width digits
    "card 4111 1111 1111 1111 and 4111111111111",
    "4111-1111-1111-111",  # 15 digits, fails Luhn
    "IBAN DE89 3704 0044 0532 0130 00 please",
    "GB82WEST12345698765432",
    "mail a@b.co, phone (03) 1234-5678, id 12",
    "٠١٢٣٤٥٦٧٨٩ arabic-indic digits",
]


def _random_text(rng: random.Random) -> str:
    parts = []
    for _ in range(rng.randint(1, 6)):
        pick = rng.random()
        if pick < 0.2:
            parts.append(_luhn_card(rng, rng.choice((13, 15, 16, 19))))
        elif pick < 0.4:
            digits = "".join(str(rng.randint(0, 9)) for _ in range(rng.randint(6, 12)))
            sep = rng.choice(("-", " ", ".", ""))
            parts.append(rng.choice(("+", "", "(0", "1 ")) + sep.join(
                digits[i : i + rng.randint(2, 4)] for i in range(0, len(digits), 3)))
        elif pick < 0.5:
            parts.append("DE89 3704 0044 0532 0130 00")
        elif pick < 0.6:
            parts.append(f"user{rng.randint(0, 99)}@example.com")
        else:
            parts.append(rng.choice(("the warranty", "covers", "2 years", "order 31", "日本語", "x")))
    return " ".join(parts)


@pytest.mark.parametrize("text", FIXED)
def test_prefilter_never_changes_the_redaction_fixed(text: str) -> None:
    r = Redactor(PrivacySettings())
    assert r.redact(text) == _unfiltered(r, text)


def test_prefilter_never_changes_the_redaction_random() -> None:
    rng = random.Random(7)
    r = Redactor(PrivacySettings(patterns={"ticket": r"TCK-\d+"}))
    changed = 0
    for _ in range(3000):
        text = _random_text(rng)
        got = r.redact(text)
        assert got == _unfiltered(r, text), text
        changed += got != text
    assert changed > 1000  # the generator does produce personal data to redact


def test_prefilter_skips_texts_with_too_few_digits() -> None:
    """Texts below every digit threshold never reach the digit recognisers (the speed point)."""
    calls: list[str] = []
    r = Redactor(PrivacySettings())
    r._recognisers = [
        (k, (lambda t, k=k, f=f: calls.append(k) or f(t)), needed, n)
        for k, f, needed, n in r._recognisers
    ]
    digit_kinds = ("iban", "card", "phone")  # address and person have pre-filters of their own
    r.redact("warranty #4471: 2 years, returns within 30 days")  # 7 digits
    assert [k for k in calls if k in digit_kinds] == ["iban"]  # IBAN needs 2 digits, card 13, phone 8
    calls.clear()
    r.redact("call 555-123-4567")
    assert [k for k in calls if k in digit_kinds] == ["iban", "phone"]


@pytest.mark.parametrize(
    "text", ["", "no digits", "a1b22c333", "１２３ full-width 45", "٠١٢ arabic 3", "x" * 5000 + "9" * 7]
)
def test_digit_count_matches_the_regex(text: str) -> None:
    assert count_digits(text) == len(_DIGIT.findall(text))
