"""Open a ClickHouse client for a DSN, knowing that a chDB directory has one owning process.

``open_store("chdb:///var/lib/ragpulse/chdb")`` opens the engine in this process;
``open_store("http://127.0.0.1:8123")`` talks to a server or to the
read-only ClickHouse-HTTP facade (``ragpulse.deploy.facade``) of the process owning a chDB directory.
The owner advertises itself in ``<chdb dir>/ragpulse-owner.json`` (:func:`write_owner`), so a
second process gets a precise error naming the URL to use, or follows it (``follow_owner``).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from ragpulse.common.schema import DatabaseName

from .errors import StoreError, StoreLockedError

__all__ = ["OWNER_FILE", "OwnerInfo", "StoreSettings", "chdb_path", "credentials_from_env",
           "lock_holder", "open_store", "read_owner", "remove_owner", "write_owner"]

OWNER_FILE = "ragpulse-owner.json"


DEFAULT_DSN = "chdb://.ragpulse/chdb"
"""Where every command looks by default: ``ragpulse up``'s store (``--data-dir .ragpulse``)."""


LEGACY_DIR = "ragpulse-data/chdb"
"""Where ``db`` and the standalone scorer kept their store before the default became
:data:`DEFAULT_DSN`."""


def legacy_store_note(dsn: str) -> str | None:
    """A note when ``dsn`` is the default and ``./ragpulse-data/chdb``, the earlier default of
    ``ragpulse db`` and ``ragpulse scorer``, exists: its scores are not where the command looks."""
    if dsn != DEFAULT_DSN or not os.path.isdir(LEGACY_DIR):
        return None
    return (f"note: ./{LEGACY_DIR} exists, the store of an earlier ragpulse; the default is now "
            f"./.ragpulse/chdb (move it there, or pass --clickhouse chdb://{LEGACY_DIR})")


class StoreSettings(BaseModel):
    """Where scores are stored. Nest it in a component's settings (``RAGPULSE_CLICKHOUSE__DSN``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    dsn: str = DEFAULT_DSN
    """``chdb:///abs/path`` / ``chdb://rel/path`` (in-process engine) or
    ``http(s)://[user:password@]host:port`` (a ClickHouse server or a ragpulse facade)."""
    database: DatabaseName = "rag"
    username: str | None = None
    password: SecretStr | None = None
    token: SecretStr | None = None
    """Bearer token (``Authorization: Bearer``) for http(s) DSNs, e.g. a ragpulse facade's."""
    connect_timeout_s: float = Field(default=10.0, gt=0)
    send_receive_timeout_s: float = Field(default=300.0, gt=0)

    @field_validator("dsn")
    @classmethod
    def _dsn(cls, v: str) -> str:
        dsn_scheme(v)
        return v


def dsn_scheme(dsn: str) -> str:
    """``"chdb"``, ``"http"`` or ``"https"``: the scheme of a DSN :func:`open_store` can open
    (case-insensitive). Raises ``ValueError`` for any other DSN; the one check of a ClickHouse
    DSN, shared by every settings model that holds one."""
    scheme = urlsplit(dsn).scheme.lower()
    if scheme not in ("chdb", "http", "https"):
        raise ValueError(f"unsupported ClickHouse DSN {dsn!r}: use chdb:///path or http(s)://host:port")
    return scheme


@dataclass(frozen=True)
class OwnerInfo:
    """Who owns a chDB directory and where its facade listens."""

    pid: int
    url: str
    started_at: float
    host: str

    def alive(self) -> bool:
        """Whether the owning process still exists (on this host)."""
        if self.host != socket.gethostname():
            return True  # cannot tell; assume the lock is real
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


def chdb_path(dsn: str) -> str:
    """The directory a ``chdb://`` DSN names (``chdb:///abs`` → ``/abs``, ``chdb://rel`` → ``rel``)."""
    parts = urlsplit(dsn)
    if parts.scheme.lower() != "chdb":
        raise ValueError(f"not a chdb DSN: {dsn!r}")
    path = (parts.netloc + parts.path) if parts.netloc else parts.path
    if not path:
        raise ValueError(f"chdb DSN {dsn!r} names no directory")
    return os.path.realpath(path)


def lock_holder(path: str) -> int | None:
    """The pid holding chDB's lock on ``path`` (its ``status`` file), from ``/proc/locks``.

    chDB (like clickhouse-server) ``flock``s ``<path>/status`` for as long as the engine is open.
    Asking the kernel is instant, whereas letting a second engine try the lock costs seconds.
    Returns None when unlocked, or when it cannot tell (no ``/proc/locks``: not Linux).
    """
    try:
        st = os.stat(os.path.join(path, "status"))
        with open("/proc/locks", encoding="ascii", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    want = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    for line in lines:
        parts = line.split()
        # "1: FLOCK  ADVISORY  WRITE 21762 fe:00:2146997 0 EOF" (blocked waiters carry "->")
        if len(parts) >= 6 and parts[1] == "FLOCK" and parts[5] == want:
            try:
                return int(parts[4])
            except ValueError:
                return None
    return None


def write_owner(path: str, url: str, *, pid: int | None = None) -> str:
    """Advertise that this process owns the chDB directory ``path`` and serves it at ``url``.
    Atomic (write + rename). Returns the file's path."""
    os.makedirs(path, exist_ok=True)
    target = os.path.join(path, OWNER_FILE)
    tmp = f"{target}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"pid": pid or os.getpid(), "url": url, "started_at": time.time(),
                   "host": socket.gethostname()}, f)
    os.replace(tmp, target)
    return target


def read_owner(path: str) -> OwnerInfo | None:
    """The advertised owner of ``path``, or None (no file, unreadable file)."""
    try:
        with open(os.path.join(path, OWNER_FILE), encoding="utf-8") as f:
            d = json.load(f)
        return OwnerInfo(int(d["pid"]), str(d["url"]), float(d.get("started_at", 0)),
                         str(d.get("host", socket.gethostname())))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def remove_owner(path: str, *, pid: int | None = None) -> None:
    """Remove the owner file if it names ``pid`` (default: this process)."""
    info = read_owner(path)
    if info is not None and info.pid == (pid or os.getpid()):
        try:
            os.unlink(os.path.join(path, OWNER_FILE))
        except FileNotFoundError:
            pass


def credentials_from_env(environ: dict[str, str] | None = None) -> dict[str, str | None]:
    """``username``/``password``/``token`` for :func:`open_store` from ``RAGPULSE_CLICKHOUSE__*``
    (the names the scorer's :class:`StoreSettings` reads; ``*_FILE`` variants are resolved by
    the ``ragpulse`` command at start-up). Used by commands that reach a store (``status``,
    ``report``, ``db status``), e.g. through the login of ``ragpulse up``'s facade."""
    env = os.environ if environ is None else environ
    return {k: env.get(f"RAGPULSE_CLICKHOUSE__{k.upper()}") or None
            for k in ("username", "password", "token")}


def open_store(
    dsn: str | StoreSettings,
    *,
    username: str | None = None,
    password: str | None = None,
    token: str | None = None,
    follow_owner: bool = False,
    must_exist: bool = False,
    **client_kw: Any,
) -> Any:
    """A clickhouse-connect client for ``dsn`` (a DSN string or :class:`StoreSettings`).
    Blocks while connecting.

    For ``chdb://`` DSNs: if another live process advertises ownership of the directory, raises
    :class:`StoreLockedError` naming its facade URL, or (``follow_owner=True``) returns a client
    for that URL. A directory locked by a process that did not advertise itself also raises
    :class:`StoreLockedError`. Other failures raise :class:`StoreError` with the DSN in the message
    (credentials removed). ``must_exist`` (read-only commands): a ``chdb://`` directory that
    does not exist raises :class:`StoreError` instead of being created. Extra keyword arguments
    go to ``clickhouse_connect.get_client``.
    """
    import clickhouse_connect

    if isinstance(dsn, StoreSettings):
        st = dsn
        dsn = st.dsn
        username = username or st.username
        if password is None and st.password is not None:
            password = st.password.get_secret_value()
        if token is None and st.token is not None:
            token = st.token.get_secret_value()
        if urlsplit(dsn).scheme.lower() != "chdb":
            client_kw.setdefault("connect_timeout", st.connect_timeout_s)
            client_kw.setdefault("send_receive_timeout", st.send_receive_timeout_s)
    parts = urlsplit(dsn)
    scheme = dsn_scheme(dsn)
    if scheme == "chdb":
        path = chdb_path(dsn)
        owner = read_owner(path)
        if owner is not None and owner.pid != os.getpid() and owner.alive():
            if follow_owner:
                return open_store(owner.url, username=username, password=password, token=token,
                                  **client_kw)
            raise StoreLockedError(
                f"the chDB directory {path} is owned by a running `ragpulse up` (pid {owner.pid}); "
                f"read it through its ClickHouse facade (read-only): --clickhouse {owner.url}; "
                "to write to it, stop that `up` or use another directory",
                owner_pid=owner.pid)
        if must_exist and not os.path.isdir(path):
            raise StoreError(f"no ragpulse store at {path}: `ragpulse up` creates one there "
                             "(--data-dir DIR: DIR/chdb), or `ragpulse db init --clickhouse "
                             f"chdb://{path}`; for a ClickHouse server pass --clickhouse URL")
        return _open_chdb(path, client_kw)
    # http or https
    safe = f"{scheme}://{parts.hostname}:{parts.port or (8443 if scheme == 'https' else 8123)}"
    kw = dict(client_kw)
    if username or parts.username:
        kw["username"] = username or parts.username
    if password or parts.password:
        kw["password"] = password or parts.password
    if token:  # clickhouse-connect takes a bearer token or a user/password, not both
        kw.pop("username", None)
        kw.pop("password", None)
        kw["access_token"] = token
    try:
        return clickhouse_connect.get_client(dsn=dsn, **kw)
    except Exception as exc:
        raise StoreError(f"cannot connect to ClickHouse at {safe}: {_connect_error(exc)}") from exc


class _BareDriverWarning(logging.Filter):
    """Drops the HTTP driver's "Unexpected Http Driver Exception" warning when it carries no
    traceback: the driver raises right after it with the cause in the exception, which every
    caller here reports (a stray line ahead of the message that says it all). Thread-safe and
    scoped to that one message, unlike muting the driver's logger."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.msg == "Unexpected Http Driver Exception" and not record.exc_info)


_driver_log = logging.getLogger("clickhouse_connect.driver._backend.http_sync")
if not any(isinstance(f, _BareDriverWarning) for f in _driver_log.filters):
    _driver_log.addFilter(_BareDriverWarning())


def _open_chdb(path: str, client_kw: dict[str, Any]) -> Any:
    """The in-process engine on ``path``, owned by no live ``ragpulse up``: chDB's own lock
    failures become :class:`StoreLockedError`, the rest :class:`StoreError`."""
    import clickhouse_connect

    holder = lock_holder(path)
    if holder is not None and holder != os.getpid():
        raise StoreLockedError(
            f"the chDB directory {path} is locked by another process (pid {holder}); chDB "
            "allows one process per directory and that process advertises no facade URL: "
            "stop it, or query through it")
    try:
        return clickhouse_connect.get_client(dsn=f"chdb://{path}", **client_kw)
    except Exception as exc:
        text = str(exc)
        if "Cannot lock file" in text or "Another server instance" in text or (
                "Error initializing EmbeddedServer" in text and lock_holder(path) is not None):
            raise StoreLockedError(
                f"the chDB directory {path} is locked by another process (chDB allows one "
                "process per directory) that does not advertise a facade URL; stop it, or "
                "query through the process that owns it") from exc
        if "already initialized with path" in text:
            raise StoreError(
                f"this process already runs chDB on another directory; chDB allows one "
                f"directory per process, so {path} cannot be opened here: {text}") from exc
        raise StoreError(f"cannot open chDB at {path}: {text}") from exc


def _connect_error(exc: BaseException) -> str:
    """The cause of a failed connection in a few words (the driver's text holds a urllib3 repr
    and the query id); the whole text when it is none of the usual ones."""
    text = str(exc)
    for needle, say in (("Connection refused", "connection refused (nothing listens there)"),
                        ("Name or service not known", "unknown host"),
                        ("timed out", "timed out"),
                        ("certificate verify failed", "TLS certificate not trusted")):
        if needle in text:
            return say
    return text
