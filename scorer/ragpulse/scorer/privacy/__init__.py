"""Privacy: redact personal data before any trace text reaches a judge or ClickHouse.

Two modules: :mod:`.recognisers` finds personal data in a text (spans per kind: the patterns,
checksums and pre-filters, what is recognised and why); :mod:`.redactor` is the policy
(:class:`PrivacySettings`) and the :class:`Redactor` that applies it to texts and samples
(placeholders, per-sample numbering, the user's own redactor, counters).

Two switches, both in :class:`PrivacySettings` (``RAGPULSE_PRIVACY__*`` in the scorer):

* ``redact`` (default on): e-mail addresses, phone numbers, payment card numbers (Luhn-checked),
  IBANs (ISO 13616 mod-97-checked), postal addresses and personal names where the text marks
  them (what is recognised, and the trade-offs: :mod:`.recognisers`), and any configured
  regular expression are replaced by typed placeholders such as ``[EMAIL_1]``. Numbering is per sample and per value, compared in a normal form
  (digits only for cards and phones, case- and width-folded for the rest), so the same card in
  a context and in the answer becomes the same placeholder however it is spaced, and two
  different card numbers stay different: a judge can still tell whether the answer's card is
  the one in the context.
* ``redactor``: the import path (``package.module:function``) of the user's own ``str -> str``
  redactor (an NER model, Presidio, a company dictionary), run on every text after the
  built-in recognisers. It is imported when the scorer starts (a bad path fails start-up).
* ``store_text`` (default on): when off, no question/answer excerpt, no explanation and no
  unsupported statement with its closest passage is written to ClickHouse at all; only scores
  and metadata are stored.

Thread-safety: a :class:`Redactor` is immutable apart from its counters, which are guarded by a
lock; one instance may be shared by threads and event loops. Nothing here blocks or does I/O.
Matching is linear in the text length (every pattern is free of nested ambiguous repetition),
so a one-megabyte hostile context costs milliseconds, not minutes.
"""

from .recognisers import BUILTIN_KINDS, iban_ok, luhn_ok
from .redactor import PrivacySettings, Redactor, build_redactor

__all__ = [
    "BUILTIN_KINDS",
    "PrivacySettings",
    "Redactor",
    "build_redactor",
    "iban_ok",
    "luhn_ok",
]
