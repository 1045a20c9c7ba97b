"""``*_FILE`` environment variables: credentials read from files (Kubernetes and Docker secrets).

For every variable ``NAME_FILE`` among ``RAGPULSE_*``, ``OPENAI_API_KEY`` and ``GRAFANA_TOKEN``, the
file's content (one trailing newline removed) becomes ``NAME``, unless ``NAME`` is set already
(an explicit value wins). The values never pass through a log line or an error message.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping
from pathlib import Path

__all__ = ["SecretFileError", "load_secret_files"]

_PLAIN_NAMES = ("OPENAI_API_KEY", "AZURE_OPENAI_API_KEY", "GRAFANA_TOKEN")
_MAX_BYTES = 64 * 1024


class SecretFileError(ValueError):
    """A ``*_FILE`` variable names a file that cannot be read (the message names the variable
    and the path, never the content)."""


def load_secret_files(environ: MutableMapping[str, str] | None = None) -> list[str]:
    """Resolve ``*_FILE`` variables into ``environ`` (default ``os.environ``); a resolved
    ``RAGPULSE_SECTION__NAME_FILE`` is removed (its section would refuse it). Returns the names
    set. Raises :class:`SecretFileError` for a missing, unreadable, empty or oversized file."""
    env = os.environ if environ is None else environ
    loaded: list[str] = []
    for var in sorted(env):
        if not var.endswith("_FILE"):
            continue
        name = var[: -len("_FILE")]
        if not (name.startswith("RAGPULSE_") or name in _PLAIN_NAMES) or env.get(name):
            continue
        path = Path(env[var])
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise SecretFileError(f"{var}: cannot read {path}: {exc.strerror or exc}") from None
        if len(data) > _MAX_BYTES:
            raise SecretFileError(f"{var}: {path} is larger than {_MAX_BYTES} bytes")
        try:
            value = data.decode("utf-8").removesuffix("\n").removesuffix("\r")
        except UnicodeDecodeError:
            raise SecretFileError(f"{var}: {path} is not UTF-8 text") from None
        if not value:
            raise SecretFileError(f"{var}: {path} is empty")
        env[name] = value
        loaded.append(name)
        if "__" in name:
            # A nested settings field (RAGPULSE_OTLP__AUTH_TOKEN): pydantic-settings would also
            # read RAGPULSE_OTLP__AUTH_TOKEN_FILE as a field 'auth_token_file' of that section
            # and refuse it as unknown. Its value is resolved: drop the name.
            del env[var]
    return loaded
