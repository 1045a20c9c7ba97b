"""A user's own redactor, loaded by import path (``privacy.redactor``) in the privacy tests: it
replaces the words of a company's customer list, as an NER model or a dictionary would."""

import re

_CUSTOMERS = re.compile(r"\b(?:Acme Corp|Initech|Globex)\b")


def redact(text: str) -> str:
    return _CUSTOMERS.sub("[CUSTOMER]", text)


def not_text(text: str) -> int:
    return len(text)
