"""Logging for the ragpulse commands: one format, and no credentials in any log line.

kafka-python logs its whole client configuration at DEBUG (``Starting KafkaAdminClient with
configuration: {... 'sasl_plain_password': '...'}``), and URLs with user info travel in error
messages. :class:`SecretFilter` masks both on every handler of the root logger, whichever library
logged them.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import re
import sys
import threading
from collections.abc import Iterator
from typing import Any

__all__ = ["SafeStream", "SecretFilter", "configure_logging", "describe_error", "mask_secrets",
           "protect_std_streams", "quiet_logger"]

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
        """Mask the record's message in place; always keeps the record."""
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


def describe_error(exc: BaseException) -> str:
    """``Class: message`` for one line of user output, without the class named twice (kafka's
    errors start their message with their own class name)."""
    name, text = type(exc).__name__, str(exc)
    return text if text.startswith(name) else f"{name}: {text}" if text else name


@contextlib.contextmanager
def quiet_logger(name: str, level: int = logging.CRITICAL) -> Iterator[None]:
    """Hold logger ``name`` at ``level`` inside the block: a client's retry chatter while a
    command starts (kafka-python logs an ERROR per failed connection attempt, some 40 before a
    bootstrap times out) is replaced by the command's own one-line verdict. Left alone when
    the root logger is at DEBUG (the user asked for the detail)."""
    logger = logging.getLogger(name)
    if logging.getLogger().getEffectiveLevel() <= logging.DEBUG:
        yield
        return
    before = logger.level
    logger.setLevel(level)
    try:
        yield
    finally:
        logger.setLevel(before)


def _devnull_onto(fd: int) -> None:
    """Point descriptor ``fd`` at ``/dev/null`` (open or closed before; raises ``OSError``)."""
    null = os.open(os.devnull, os.O_WRONLY)
    if null != fd:  # a closed fd is the lowest free one, so /dev/null may land on it directly
        try:
            os.dup2(null, fd)
        finally:
            os.close(null)


class SafeStream(io.TextIOBase):
    """A text stream whose ``write`` and ``flush`` never raise: once a write to the wrapped
    stream fails (its pipe's reader died: ``make demo 2>&1 | tee demo.log`` and Ctrl-C, which
    kills ``tee`` too; a closed terminal), the stream is dead: every later write is dropped and
    counted, and the file descriptor is pointed at ``/dev/null`` so the bytes still buffered
    in the wrapped stream flush harmlessly at exit. A command that drains on Ctrl-C must not
    die of its own status line. Thread-safe.
    """

    def __init__(self, stream: Any) -> None:
        super().__init__()
        self._stream = stream
        self._lock = threading.Lock()
        self.dead = False
        self.dropped_writes = 0

    def _die(self) -> None:
        self.dead = True
        try:
            fd = self._stream.fileno()
            _devnull_onto(fd)
        except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
            pass  # no descriptor to redirect: the writes below are dropped all the same

    def write(self, text: str) -> int:
        """Write and flush ``text``, or drop it once the stream is dead. Never raises."""
        with self._lock:
            if not self.dead:
                try:
                    self._stream.write(text)
                    self._stream.flush()
                    return len(text)
                except (OSError, ValueError):  # EPIPE, EIO, or the stream was closed
                    self._die()
            self.dropped_writes += 1
            return len(text)

    def flush(self) -> None:
        """Flush the wrapped stream; a failure marks the stream dead instead of raising."""
        with self._lock:
            if self.dead:
                return
            try:
                self._stream.flush()
            except (OSError, ValueError):
                self._die()

    def writable(self) -> bool:
        """Always ``True``: a dead stream still accepts (and drops) writes."""
        return True

    def isatty(self) -> bool:
        """Whether the live wrapped stream is a terminal; ``False`` once dead."""
        try:
            return not self.dead and bool(self._stream.isatty())
        except (OSError, ValueError):
            return False

    def fileno(self) -> int:
        """The wrapped stream's descriptor (``/dev/null`` once dead)."""
        return int(self._stream.fileno())

    @property
    def encoding(self) -> str:  # type: ignore[override]
        """The wrapped stream's encoding (``utf-8`` when it has none)."""
        return str(getattr(self._stream, "encoding", None) or "utf-8")


def protect_std_streams() -> None:
    """Wrap ``sys.stdout`` and ``sys.stderr`` in :class:`SafeStream` (idempotent). Call it at
    the start of a long-running command, before logging is configured, so the log handlers,
    rich consoles and ``print`` all write through the wrappers.

    A descriptor 1 or 2 that was closed at start (``2>&-``) is opened on ``/dev/null`` first:
    otherwise the next file the process opens (a chDB part, a log) would become "stderr" and
    receive whatever native code writes there."""
    for fd, name in ((1, "stdout"), (2, "stderr")):
        try:
            os.fstat(fd)
        except OSError:
            _devnull_onto(fd)
            setattr(sys, name, open(fd, "w", encoding="utf-8", errors="backslashreplace",
                                    closefd=False))
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, SafeStream):
            setattr(sys, name, SafeStream(stream))
