"""Logging for the ragpulse commands: one format, and no credentials in any log line.

kafka-python logs its whole client configuration at DEBUG (``Starting KafkaAdminClient with
configuration: {... 'sasl_plain_password': '...'}``), and URLs with user info travel in error
messages. :class:`SecretFilter` masks both on every handler of the root logger, whichever library
logged them.
"""

from __future__ import annotations

import logging
import re

__all__ = ["SecretFilter", "configure_logging", "mask_secrets"]

_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

# 'sasl_plain_password': 'x', "api_key": "x", password=x, token: x ... (dict reprs, kv pairs)
_KEYED = re.compile(
    r"""(?P<key>['"]?[\w.-]*(?:password|passwd|secret|secret_key|private_key|access_key|token"""
    r"""|api_key|apikey|authorization)['"]?\s*[:=]\s*)"""
    r"""(?:'(?P<sq>[^']*)'|"(?P<dq>[^"]*)"|(?P<bare>(?:(?:Bearer|Basic|Token)\s+)?[^,}\s]+))""",
    re.IGNORECASE,
)


def _mask_keyed(m: re.Match[str]) -> str:
    if m.group("sq") is not None:
        return f"{m.group('key')}'***'"
    if m.group("dq") is not None:
        return f'{m.group("key")}"***"'
    return f"{m.group('key')}***"


# scheme://user:password@host
_USERINFO = re.compile(r"(?P<pre>\b[a-z][a-z0-9+.-]*://[^:/@\s]+:)[^@\s/]+(?=@)", re.IGNORECASE)
_BEARER = re.compile(r"(?P<pre>\bBearer\s+)[A-Za-z0-9._~+/=-]+", re.IGNORECASE)


def mask_secrets(text: str) -> str:
    """``text`` with credential values replaced by ``***``."""
    text = _KEYED.sub(_mask_keyed, text)
    text = _USERINFO.sub(r"\g<pre>***", text)
    return _BEARER.sub(r"\g<pre>***", text)


class SecretFilter(logging.Filter):
    """Rewrites each record's message with :func:`mask_secrets` (never drops a record)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a broken format string: leave it to the handler to report
            return True
        masked = mask_secrets(message)
        if masked != message:
            record.msg, record.args = masked, None
        return True


def configure_logging(level: str | int = "INFO") -> None:
    """Configure the root logger once for a command: our format, ``level``, and the
    :class:`SecretFilter` on every root handler. Idempotent."""
    logging.basicConfig(level=level.upper() if isinstance(level, str) else level, format=_FORMAT)
    root = logging.getLogger()
    root.setLevel(level.upper() if isinstance(level, str) else level)
    for handler in root.handlers:
        if not any(isinstance(f, SecretFilter) for f in handler.filters):
            handler.addFilter(SecretFilter())
