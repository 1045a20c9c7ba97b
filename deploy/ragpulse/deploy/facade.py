"""A read-only ClickHouse-HTTP facade over the chDB engine of the process that owns it.

chDB allows one process per data directory. While ``ragpulse up`` owns it, ``ragpulse status``,
``ragpulse report``, ``clickhouse-connect`` and Grafana's ClickHouse plugin reach the data through
this facade (``clickhouse_connect.get_client(host='127.0.0.1', port=PORT)``).

It is read-only and narrow by construction, not by a setting a client could change: every
statement is checked by :mod:`.sqlguard` (reads of the ragpulse database and a few system tables
only; no table functions or functions that touch files, URLs or processes; one statement per
request) and runs on a connection with ``readonly = 2`` (no writes); URL settings outside an
allow-list are refused. A login (HTTP Basic, ``X-ClickHouse-User``/``-Key``, ``user``/``password`` parameters,
or ``Authorization: Bearer``) is required whenever it listens on anything but loopback.

One client cannot take the facade over (issue 17): failed logins lock its address out for a
growing time (429 + ``Retry-After``), and failed checks from all addresses together have
ceilings per login and in total, which addresses that logged in lately are exempt from (issue
38, :class:`LoginThrottle`); it holds at most ``max_queries_per_client`` of the query
slots, and the slots together stay within ``memory_limit_bytes`` (a share of the machine's
memory). A reply holds its slot until it is written, so a reply a client does not read counts
against the bound too, and a client that reads it slower than ``write_min_bytes_per_s`` (after
``write_timeout_s``) is reset (issue 38). Error text that might quote a file or name a server path
is not passed on.

What is served (the subset of https://clickhouse.com/docs/interfaces/http that clickhouse-connect,
clickhouse-go and curl use):

* ``GET|HEAD /ping`` and ``GET /`` without a query → ``Ok.``
* ``GET|POST /?query=…`` and the query in the POST body (URL part first, body appended, as the
  server does), ``Content-Encoding`` gzip, deflate, lz4 or zstd (decompressed within the body
  limit);
* ``database`` (the ragpulse one or ``system``), ``default_format`` (TabSeparated by default, as
  the server), a trailing ``FORMAT`` clause, ``param_<name>`` query parameters; transport
  parameters (``session_id``, ``wait_end_of_query``...) are accepted and ignored; ``query_id``
  (1-128 of ``[A-Za-z0-9_.:-]``, else 400) is echoed in ``X-ClickHouse-Query-Id``;
* ``X-ClickHouse-Summary``/``-Format``/``-Query-Id``/``-Timezone`` response headers; errors as the
  server sends them (``Code: N. DB::Exception: …`` body, ``X-ClickHouse-Exception-Code``).

Not served: writes of any kind, sessions (each request gets a fresh chDB connection, so settings
never leak between requests), the native ``compress=1`` framing, multipart external data,
progress headers, chunked replies (a SELECT's reply is read from chDB block by block and cut at
``max_result_bytes`` of output, then sent with a Content-Length).
"""

from __future__ import annotations

import base64
import hmac
import ipaddress
import json
import logging
import math
import os
import re
import socket
import struct
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

from ragpulse.common import (
    BodyError,
    BodyTooLarge,
    ConnectionLimits,
    GuardedHTTPServer,
    GuardedRequestHandler,
    MalformedBody,
    bearer_ok,
    browser_refusal,
    inflate_bounded,
    is_loopback,
    read_body,
    self_metrics,
    serve_in_thread,
)
from ragpulse.scorer.store import DatabaseName, remove_owner, write_owner

from . import sqlguard

__all__ = ["COUNTERS", "ClickHouseHttpFacade", "FacadeSettings", "LoginThrottle", "build_facade",
           "has_secret", "is_loopback", "login_problem"]

log = logging.getLogger(__name__)

COUNTERS: dict[str, str] = {name: m.help for name, m in self_metrics("facade").items()}
"""Every counter ``ClickHouseHttpFacade.stats()`` reports, with its meaning: a view of its
declarations in :data:`ragpulse.common.SELF_METRICS` (a test checks ``stats()`` against it)."""

# URL parameters that steer the HTTP exchange, not the query (ClickHouse HTTPHandler.cpp).
_TRANSPORT_PARAMS = frozenset({
    "query", "database", "default_format", "user", "password", "quota_key", "query_id",
    "session_id", "session_timeout", "session_check", "compress", "decompress",
    "enable_http_compression", "http_zlib_compression_level",
    "http_native_compression_disable_checksumming_on_decompress",
    "wait_end_of_query", "buffer_size", "send_progress_in_http_headers",
    "http_headers_progress_interval_ms", "client_protocol_version", "role", "stacktrace",
    "http_response_buffer_size", "cancel_http_readonly_queries_on_client_close",
    "output_format_write_statistics",
})
_SETTING_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# What a client's query_id may be (clickhouse-connect and clickhouse-go send UUIDs); it is echoed
# in X-ClickHouse-Query-Id, so anything else (CR/LF would end the headers) is refused.
_QUERY_ID = re.compile(r"[A-Za-z0-9_.:\-]{1,128}")
# A header value the facade sends: printable ASCII only (never CR/LF), whatever its source.
_HEADER_SAFE = re.compile(r"[^\x20-\x7e]")
_TRAILING_FORMAT = re.compile(r"\bFORMAT\s+([A-Za-z0-9_]+)\s*;?\s*$", re.IGNORECASE)
_CODE = re.compile(r"Code:\s*(\d+)")
_ERROR_NAME = re.compile(r"\(([A-Z][A-Z0-9_]+)\)")
_PREFIX = re.compile(r"^(?:Code:\s*\d+\.\s*DB::Exception:\s*)+")
_SUFFIX = re.compile(r"(?:\s*\.?\s*\((?:[A-Z][A-Z0-9_]+|version [^)]*)\))+\s*$")
_ABS_PATH = re.compile(r"(?<![\w.:/])/[\w.@+-]+(?:/[\w.@+-]*)+")
# ClickHouse errors whose text only restates the client's own statement (names, types, syntax,
# parameters) or a limit it hit: passed on, with absolute paths cut out. Any other error (file,
# format, parse and I/O errors can quote a file's content or name server paths) is answered with
# its code and name only; the full text goes to the facade's debug log.
_EXPLAINED_ERRORS = frozenset({
    10, 16, 42, 43, 44, 46, 47, 53, 60, 62, 70, 73, 81, 115, 158, 159, 179, 184, 202, 215, 241,
    307, 352, 396, 456, 457, 497, 164,
})


def client_error(text: str, *, scope: bool = True) -> tuple[int, str]:
    """``(code, message)`` of a ClickHouse exception's ``text`` as the facade may show a client:
    never a file's content or a server path (issue 17). ``scope=False`` drops the ``In scope``
    part (the statement the error arose in, when that is the facade's own wrapper). Pure; never
    raises."""
    m = _CODE.search(text)
    code = int(m.group(1)) if m else 1001
    names = _ERROR_NAME.findall(text)
    name = names[-1] if names else "UNKNOWN_EXCEPTION"
    if code not in _EXPLAINED_ERRORS:
        return code, (f"the query failed with {name}; the ragpulse facade does not pass this "
                      f"error's text on (it may quote files or server paths). ({name})")
    first = _SUFFIX.sub("", _PREFIX.sub("", text.strip()).split("\n", 1)[0])
    if not scope:
        first = first.split(": In scope")[0]
    first = _ABS_PATH.sub("<path>", first)
    if len(first) > 1000:
        first = first[:1000] + "..."
    return code, f"{first}. ({name})"

_CONTENT_TYPES = {
    "tabseparated": "text/tab-separated-values; charset=UTF-8",
    "tsv": "text/tab-separated-values; charset=UTF-8",
    "tabseparatedwithnames": "text/tab-separated-values; charset=UTF-8",
    "tabseparatedwithnamesandtypes": "text/tab-separated-values; charset=UTF-8",
    "csv": "text/csv; charset=UTF-8; header=absent",
    "csvwithnames": "text/csv; charset=UTF-8; header=present",
    "json": "application/json; charset=UTF-8",
    "jsoncompact": "application/json; charset=UTF-8",
    "jsoneachrow": "application/x-ndjson; charset=UTF-8",
}
# ClickHouse maps some error codes to HTTP statuses (HTTPHandler::exceptionCodeToHTTPStatus).
_HTTP_STATUS = {
    60: 404, 81: 404, 62: 400, 27: 400, 47: 400, 53: 400, 46: 404, 36: 400, 164: 403,
    497: 403, 516: 401, 202: 503, 159: 504,
}


def client_key(address: str) -> str:
    """The unit the facade throttles and shares slots by: an IPv4 address, or the /64 network of
    an IPv6 one (one host commonly holds a whole /64, so single IPv6 addresses cost nothing)."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


def machine_memory_bytes() -> int:
    """Physical memory, or the cgroup's memory limit (v2 or v1) where that is lower."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path) as fh:
                limit = fh.read().strip()
        except OSError:
            continue
        if limit.isdigit() and 0 < int(limit) < total:
            total = int(limit)
    return total


def has_secret(username: str | None, password: SecretStr | None, token: SecretStr | None) -> bool:
    """Whether a login of these parts needs a secret: a username with a non-empty password, or a
    non-empty token."""
    return bool((username and password is not None and password.get_secret_value())
                or (token is not None and token.get_secret_value()))


def login_problem(host: str, username: str | None, password: SecretStr | None,
                  token: SecretStr | None) -> str | None:
    """Why a facade on ``host`` with this login must not start, or None. Off loopback a login
    with a secret is required (issue 38: ``--clickhouse-user default`` with a forgotten password
    served every row to ``Basic default:``); an empty token is refused anywhere (``Bearer ``
    would match it)."""
    if token is not None and not token.get_secret_value():
        return "token is empty: it would let in anyone who sends 'Authorization: Bearer '; set one"
    if is_loopback(host) or has_secret(username, password, token):
        return None
    if username:
        return (f"would listen on {host} with user {username!r} and no password: anyone who "
                "reaches it could read the scores; set a password or a token")
    return f"would listen on {host} without a login: set a username and password or a token"


class FacadeSettings(BaseModel):
    """Where and how the facade listens. Frozen; validated on construction."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    host: str = "127.0.0.1"
    """Loopback by default. Any other address requires a login (``username``/``password`` or
    ``token``); construction fails without one."""
    port: int = Field(default=0, ge=0, le=65535)
    """0 picks a free port; read :attr:`ClickHouseHttpFacade.url` after ``start()``."""
    database: DatabaseName = "rag"
    """The one user database readable through the facade (besides allow-listed system tables)."""
    username: str | None = None
    password: SecretStr | None = None
    token: SecretStr | None = None
    """Bearer token accepted in ``Authorization: Bearer …``."""
    max_body_bytes: int = Field(default=1 << 20, ge=1024)
    """Largest query text, after decompression (the server's ``max_query_size`` is 256 KiB)."""
    max_result_bytes: int = Field(default=512 * 2**20, ge=1024)
    """Largest result; capped further by each slot's memory share (see ``memory_limit_bytes``)."""
    max_execution_time_s: int = Field(default=60, ge=1, le=3600)
    """Cap of ``max_execution_time`` for every statement (a client may ask for less)."""
    anonymous_max_execution_time_s: int = Field(default=30, ge=1, le=3600)
    """The cap instead, when no login is configured (loopback): every local client then shares
    one address and so one slot share, and a shorter cap frees slots sooner."""
    max_concurrent_queries: int = Field(default=8, ge=1, le=256)
    """Beyond this a request gets 503 (Code 202), like the server's ``max_concurrent_queries``."""
    max_queries_per_client: int | None = Field(default=None, ge=1, le=256)
    """Slots one client address may hold at once; beyond, 429 with ``Retry-After`` (Code 202),
    so one client's long queries cannot lock the others out. Unset: half of
    ``max_concurrent_queries`` (at least 1)."""
    memory_limit_bytes: int | None = Field(default=None, ge=64 << 20)
    """Memory the facade's queries may hold at once, all slots together. Unset:
    ``memory_fraction`` of the machine's memory (its cgroup limit where lower). Each slot gets an
    equal share: half of it is the query's ``max_memory_usage`` (ClickHouse refuses the query
    with MEMORY_LIMIT_EXCEEDED beyond it), a quarter the largest result (held twice: by chDB and
    as the reply)."""
    memory_fraction: float = Field(default=0.25, gt=0, le=0.9)
    """Share of the machine's memory for ``memory_limit_bytes`` when that is unset."""
    max_connections: int = Field(default=64, ge=1, le=4096)
    """Open connections; idle or slow ones are evicted first (:mod:`ragpulse.common.http`)."""
    login_free_failures: int = Field(default=5, ge=1, le=1000)
    """Failed logins from one client address answered 401 before that address is locked out."""
    login_lockout_s: float = Field(default=1.0, gt=0, le=3600)
    """The first lockout; each further failure doubles it, up to ``login_lockout_max_s``. While
    locked out, every request of the address gets 429 with ``Retry-After``, right password or
    not, and its login is not checked (https://owasp.org/www-community/controls/Blocking_Brute_Force_Attacks)."""
    login_lockout_max_s: float = Field(default=300.0, gt=0, le=86400)
    """Longest lockout; an address with no failure for this long starts over."""
    login_user_ceiling_burst: int = Field(default=30, ge=1, le=100_000)
    """Failed checks of one configured login (the user name, or the token) from all addresses
    together, at once; then ``login_user_ceiling_per_s`` (issue 38: 2,000 addresses x 5 guesses
    were 10,000 checked guesses). Beyond, 429 with ``Retry-After``, the login not checked."""
    login_user_ceiling_per_s: float = Field(default=0.1, gt=0, le=10_000)
    """The refill of ``login_user_ceiling_burst``: 0.1 is 360 guesses an hour, 8,640 a day."""
    login_ceiling_burst: int = Field(default=100, ge=1, le=100_000)
    """Failed checks of any login (any user name, none, the token) together, at once; then
    ``login_ceiling_per_s``."""
    login_ceiling_per_s: float = Field(default=1.0, gt=0, le=10_000)
    login_known_address_s: float = Field(default=86_400.0, ge=0, le=30 * 86_400)
    """An address that logged in within this long is exempt from both ceilings (its own
    lockout still applies): an attack that spends them does not lock out Grafana or a user who
    came lately. A new address waits for the ceiling's next token (``Retry-After``)."""
    header_timeout_s: float = Field(default=10.0, gt=0, le=600)
    idle_timeout_s: float = Field(default=60.0, gt=0, le=3600)
    write_timeout_s: float = Field(default=10.0, gt=0, le=600)
    """A reply must be taken by its client within this long plus its length at
    ``write_min_bytes_per_s``; a client that reads slower is cut off (connection reset, counted
    ``replies_cut_slow``). The reply holds its query slot, hence its share of
    ``memory_limit_bytes``, until it is written or cut (issue 38: unread replies held memory
    outside the bound)."""
    write_min_bytes_per_s: int = Field(default=1 << 20, ge=1024)
    """The slowest reading a reply allows after ``write_timeout_s``: a client that never reads
    frees its slot within ``write_timeout_s`` plus what the kernel buffers took at this rate."""
    advertise: bool = True
    """Write ``ragpulse-owner.json`` (pid + URL) into the chDB directory while serving, so
    :func:`~ragpulse.scorer.store.open_store` in other processes can point at (or follow) it."""

    @model_validator(mode="after")
    def _auth(self) -> FacadeSettings:
        if self.password is not None and not self.username:
            raise ValueError("password given without username")
        problem = login_problem(self.host, self.username, self.password, self.token)
        if problem:
            raise ValueError(f"the ClickHouse facade {problem} (ragpulse up: --clickhouse-user "
                             "with --clickhouse-password, or --clickhouse-token), or bind it "
                             "to 127.0.0.1")
        return self

    @property
    def auth_required(self) -> bool:
        """Whether a login (username or token) is configured and checked."""
        return bool(self.username or self.token)

    @property
    def secret_login(self) -> bool:
        """Whether the login needs a secret: a username with a non-empty password, or a token.
        A username alone (an empty password) is checked but keeps nobody out, so the facade
        treats it as no login for its loopback guards (Host/Origin) and time cap."""
        return has_secret(self.username, self.password, self.token)

    @property
    def client_share(self) -> int:
        """Slots one client address may hold (``max_queries_per_client`` or its default)."""
        return self.max_queries_per_client or max(1, self.max_concurrent_queries // 2)

    def memory_limits(self) -> tuple[int, int]:
        """``(max_memory_usage, max_result_bytes)`` of one query: together, over all slots, at
        most ``memory_limit_bytes`` (a result counts twice)."""
        budget = self.memory_limit_bytes or int(machine_memory_bytes() * self.memory_fraction)
        share = budget // self.max_concurrent_queries
        return share // 2, max(1024, min(self.max_result_bytes, share // 4))

    def policy(self) -> sqlguard.GuardPolicy:
        """The statement checker's policy: this database, and per-query caps on time, result
        size and memory from :meth:`memory_limits`."""
        query_memory, result_bytes = self.memory_limits()
        timeout = self.max_execution_time_s if self.secret_login else \
            min(self.max_execution_time_s, self.anonymous_max_execution_time_s)
        caps = dict(sqlguard.DEFAULT_POLICY.caps, max_execution_time=timeout,
                    max_result_bytes=result_bytes, max_memory_usage=query_memory)
        return sqlguard.GuardPolicy(database=self.database, caps=caps)


class _HttpError(Exception):
    def __init__(self, status: int, code: int, message: str,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.code = status, code
        self.headers = headers or {}


class _Bucket:
    """A token bucket: ``burst`` tokens, refilled at ``rate`` a second."""

    __slots__ = ("at", "burst", "level", "rate")

    def __init__(self, burst: int, rate: float, now: float) -> None:
        self.burst, self.rate, self.level, self.at = burst, rate, float(burst), now

    def take(self, now: float) -> float:
        """Take a token: 0.0, or the seconds until one is there (nothing taken)."""
        self.level = min(self.burst, self.level + (now - self.at) * self.rate)
        self.at = now
        if self.level >= 1:
            self.level -= 1
            return 0.0
        return (1 - self.level) / self.rate

    def give(self) -> None:
        self.level = min(self.burst, self.level + 1)


class LoginThrottle:
    """Failed logins, per client address and in total, and what they earn (issues 17, 38).

    * **Per address**: the ``free_failures``-th failure locks the address out for ``lockout_s``,
      each further one (after a lockout ended) for twice the last, capped at ``max_s``.
      At most ``max_addresses`` addresses are remembered; to make room the oldest one with fewer
      than ``free_failures`` failures (or quiet for ``max_s``) is forgotten, never one that is
      locked out or would be at its next failure, so failing once from many other addresses
      cannot reset a locked-out one. A table full of those fails closed: addresses it does not
      hold are refused until an entry may go.
    * **Ceilings**, token buckets of failed checks: ``user_burst`` at ``user_per_s`` for each
      configured login (the user name, the token), ``global_burst`` at ``global_per_s`` for all
      checks together (any name). A check takes a token from both before it runs (a right login
      gives them back), so many addresses cannot multiply the guesses; without a token the
      request is refused unchecked.
    * **Known addresses**: one that logged in within ``known_s`` (at most ``max_known``, the
      oldest success forgotten first; only a right login adds one) is exempt from the ceilings
      and from the closed table: while an attack spends the ceilings, Grafana and the people
      who used the facade lately still get in, each still under its own address's lockout.

    Thread-safe; never blocks. Addresses are :func:`client_key` values; ``clock`` is monotonic.
    """

    def __init__(self, free_failures: int, lockout_s: float, max_s: float, *,
                 max_addresses: int = 10_000, user_burst: int = 30, user_per_s: float = 0.1,
                 global_burst: int = 100, global_per_s: float = 1.0, known_s: float = 86_400.0,
                 max_known: int = 1024, clock: Callable[[], float] = time.monotonic) -> None:
        self.free_failures, self.lockout_s, self.max_s = free_failures, lockout_s, max_s
        self.max_addresses, self.known_s, self.max_known = max_addresses, known_s, max_known
        self.clock = clock
        self._lock = threading.Lock()
        # address -> (failures, time of the last failure, locked until); insertion order = age
        self._state: dict[str, tuple[int, float, float]] = {}
        self._closed_until = 0.0  # the table is full of entries it may not forget until then
        self._known: dict[str, float] = {}  # address -> time of its last right login (in order)
        now = clock()
        self._user_rate = (user_burst, user_per_s)
        self._users: dict[str, _Bucket] = {}
        self._global = _Bucket(global_burst, global_per_s, now)

    def retry_after(self, address: str) -> float:
        """Seconds ``address`` is still locked out (or, not remembered, refused while the table
        is full of locked-out addresses); 0 when it may try a login."""
        now = self.clock()
        with self._lock:
            state = self._state.get(address)
            if state is None:
                closed = self._closed_until - now
                return closed if closed > 0 and not self._is_known(address, now) else 0.0
        return max(0.0, state[2] - now)

    def admit(self, address: str, login: str | None) -> float:
        """Take the ceilings' tokens for one login check of ``address`` claiming ``login`` (a
        configured login's key, or None for any other name): 0.0 when it may be checked (give
        them back with :meth:`succeeded`), else the seconds until a token is there."""
        now = self.clock()
        with self._lock:
            if self._is_known(address, now):
                return 0.0
            wait = self._global.take(now)
            if wait or login is None:
                return wait
            bucket = self._users.get(login)
            if bucket is None:
                bucket = self._users[login] = _Bucket(*self._user_rate, now)
            wait = bucket.take(now)
            if wait:
                self._global.give()
            return wait

    def failed(self, address: str) -> float:
        """Count a failed login of ``address``; returns the lockout it starts (0: none yet)."""
        now = self.clock()
        with self._lock:
            failures, last, _ = self._state.pop(address, (0, now, 0.0))
            if now - last > self.max_s:
                failures = 0  # quiet for the longest lockout: start over
            failures += 1
            # The free_failures-th failure locks for lockout_s, each further one doubles it.
            excess = failures - self.free_failures
            lockout = min(self.lockout_s * 2.0 ** min(excess, 64), self.max_s) if excess >= 0 else 0.0
            if len(self._state) >= self.max_addresses and not self._make_room(now):
                return lockout  # fail closed: not remembered, but refused by retry_after
            self._state[address] = (failures, now, now + lockout)
        return lockout

    def _make_room(self, now: float) -> bool:
        """Forget the oldest entry that may go (caller holds the lock); False: none may."""
        for key, (failures, last, until) in self._state.items():
            if until <= now and (failures < self.free_failures or now - last > self.max_s):
                del self._state[key]
                return True
        self._closed_until = min(max(until, last + self.max_s)
                                 for _, last, until in self._state.values())
        return False

    def succeeded(self, address: str, login: str | None = None) -> None:
        """A right login of ``address``: forget its failures, give back the ceilings' tokens
        :meth:`admit` took, remember the address as known. Thread-safe."""
        now = self.clock()
        with self._lock:
            self._state.pop(address, None)
            if not self._is_known(address, now):
                self._global.give()
                if login is not None and login in self._users:
                    self._users[login].give()
            self._known.pop(address, None)
            self._known[address] = now
            while len(self._known) > self.max_known:
                del self._known[next(iter(self._known))]

    def _is_known(self, address: str, now: float) -> bool:
        seen = self._known.get(address)
        return seen is not None and now - seen <= self.known_s


def _decompress(data: bytes, encoding: str, limit: int) -> bytes:
    """``data`` decoded per ``Content-Encoding``, refusing more than ``limit`` bytes of output
    (a small compressed body cannot expand into memory)."""
    enc = encoding.strip().lower()
    if not enc or enc == "identity":
        return data
    too_big = _HttpError(413, 1, f"decompressed request body exceeds {limit} bytes")
    if enc in ("gzip", "deflate"):
        try:
            return inflate_bounded(data, limit, enc)
        except BodyTooLarge:
            raise too_big from None
        except MalformedBody as exc:
            raise _HttpError(400, 1, f"cannot decode {enc} request body: {exc}") from None
    if enc == "lz4":
        import lz4.frame

        out, total = [], 0
        while data:  # streaming clients send one frame per block
            d = lz4.frame.LZ4FrameDecompressor()
            chunk = d.decompress(data, max_length=limit - total + 1)
            total += len(chunk)
            if total > limit or (not d.eof and d.needs_input is False):
                raise too_big
            if not d.eof:
                raise _HttpError(400, 1, "truncated lz4 frame in request body")
            out.append(chunk)
            data = d.unused_data
        return b"".join(out)
    if enc == "zstd":
        import io

        try:
            import zstandard
        except ImportError as exc:
            raise _HttpError(415, 1, "zstd request bodies need the zstandard package") from exc
        reader = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data), read_across_frames=True)
        out_bytes = reader.read(limit + 1)
        if len(out_bytes) > limit:
            raise too_big
        return out_bytes
    raise _HttpError(415, 1, f"unsupported Content-Encoding {encoding!r}")


def _decode_body(data: bytes, encoding: str, limit: int) -> bytes:
    try:
        return _decompress(data, encoding, limit)
    except _HttpError:
        raise
    except Exception as exc:  # corrupt gzip/lz4/zstd: the client's fault, not a 500
        raise _HttpError(400, 1, f"cannot decode {encoding} request body: {exc}") from exc


def _quote(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


class ClickHouseHttpFacade:
    """Serves ClickHouse's HTTP interface, read-only, from this process's chDB engine.

    ``start()`` opens the engine at ``path`` (or joins it when this process already has it open,
    e.g. through a clickhouse-connect ``chdb://`` client) and listens on a background thread;
    ``shutdown()`` is idempotent, safe without ``start()``, and waits for running requests.
    Requests run concurrently on server threads, each on its own chDB connection.
    """

    def __init__(self, path: str, settings: FacadeSettings | None = None) -> None:
        self.path = os.path.realpath(path)
        self.settings = settings or FacadeSettings()
        self.policy = self.settings.policy()
        self._server: GuardedHTTPServer | None = None
        self._served: GuardedHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._anchor: Any = None
        self._slots = threading.BoundedSemaphore(self.settings.max_concurrent_queries)
        self._client_slots: dict[str, int] = {}  # address -> slots held (only while > 0)
        self._lock = threading.Lock()
        self._closed = False
        self._version = ""
        self._timezone = "UTC"
        self._stats = dict.fromkeys(
            ("requests", "queries", "errors", "refused_busy", "refused_client_share",
             "refused_auth", "refused_login_throttled", "refused_login_ceiling",
             "refused_readonly", "refused_access",
             "refused_origin", "refused_query_id", "replies_cut_slow"), 0)
        s = self.settings
        self.login_throttle = LoginThrottle(
            s.login_free_failures, s.login_lockout_s, s.login_lockout_max_s,
            user_burst=s.login_user_ceiling_burst, user_per_s=s.login_user_ceiling_per_s,
            global_burst=s.login_ceiling_burst, global_per_s=s.login_ceiling_per_s,
            known_s=s.login_known_address_s)

    @property
    def url(self) -> str:
        """``http://host:port`` of the listening facade; raises ``RuntimeError`` before
        :meth:`start`."""
        if self._server is None:
            raise RuntimeError("facade not started")
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def port(self) -> int:
        """The bound port; raises ``RuntimeError`` before :meth:`start`."""
        if self._server is None:
            raise RuntimeError("facade not started")
        return int(self._server.server_address[1])

    def start(self) -> None:
        """Open the engine and listen. Blocks until the socket is bound. Raises ``OSError`` if
        the port is taken, ``chdb`` errors if the directory is locked by another process."""
        import chdb

        s = self.settings
        with self._lock:
            if self._closed:
                raise RuntimeError("facade was shut down")
            if self._server is not None:
                raise RuntimeError("facade already started")
            # Held for the facade's lifetime so the engine is not torn down and re-opened
            # (~0.4 s) whenever the last per-request connection closes.
            self._anchor = chdb.connect(self.path)
            row = self._anchor.query("SELECT version(), timezone()", "TabSeparated").bytes()
            self._version, self._timezone = row.decode().strip().split("\t")
            handler = type("Handler", (_Handler,), {"facade": self})
            limits = ConnectionLimits(max_connections=s.max_connections,
                                      header_timeout_s=s.header_timeout_s,
                                      idle_timeout_s=s.idle_timeout_s,
                                      write_timeout_s=s.write_timeout_s)
            try:
                server = GuardedHTTPServer((s.host, s.port), handler, limits)
            except BaseException:
                self._anchor.close()
                self._anchor = None
                raise
            self._server = self._served = server
            self._thread = serve_in_thread(server, "ragpulse-ch-http")
        if s.advertise:
            write_owner(self.path, self.url)
        log.info("read-only ClickHouse HTTP facade for %s on %s (login %s)", self.path, self.url,
                 "required" if s.auth_required else "off: loopback only")
        if s.auth_required and not s.secret_login:
            log.warning("the ClickHouse facade on %s has user %r with an EMPTY password, so anyone "
                        "on this machine can read the store; set a password to keep them out",
                        self.url, s.username)

    def shutdown(self) -> None:
        """Stop listening and close the engine handle. Idempotent."""
        with self._lock:
            self._closed = True
            server, self._server = self._server, None
            thread, self._thread = self._thread, None
            anchor, self._anchor = self._anchor, None
        if server is not None and self.settings.advertise:
            remove_owner(self.path)
        if server is not None:
            server.stop_accepting()
            server.shutdown()
            server.server_close()
            server.close_idle()
        if thread is not None:
            thread.join()
        # Wait for in-flight requests: they hold a slot each.
        for _ in range(self.settings.max_concurrent_queries):
            self._slots.acquire()
        for _ in range(self.settings.max_concurrent_queries):
            self._slots.release()
        if anchor is not None:
            anchor.close()

    def stats(self) -> dict[str, int]:
        """A snapshot of the request counters and the connection guard's (kept after shutdown).
        Thread-safe."""
        with self._lock:
            out = dict(self._stats)
            server = self._served  # kept after shutdown: counters never go back
        out.update(server.stats() if server is not None else dict.fromkeys(
            ("connections_refused", "connections_evicted", "requests_timed_out"), 0))
        return out

    def acquire_slot(self, address: str) -> None:
        """Take one of the client's and one of the facade's query slots, or raise 429 (the
        client holds its share) or 503 (all slots busy). Never blocks; pair with
        :meth:`release_slot`."""
        with self._lock:
            held = self._client_slots.get(address, 0)
            if held >= self.settings.client_share:
                self._stats["refused_client_share"] += 1
                raise _HttpError(429, 202, f"Too many simultaneous queries from this client. "
                                 f"Maximum: {self.settings.client_share}. "
                                 "(TOO_MANY_SIMULTANEOUS_QUERIES)", {"Retry-After": "1"})
            if not self._slots.acquire(blocking=False):
                self._stats["refused_busy"] += 1
                raise _HttpError(503, 202, "Too many simultaneous queries. Maximum: "
                                 f"{self.settings.max_concurrent_queries}. "
                                 "(TOO_MANY_SIMULTANEOUS_QUERIES)", {"Retry-After": "1"})
            self._client_slots[address] = held + 1

    def release_slot(self, address: str) -> None:
        """Give back the slots :meth:`acquire_slot` took for ``address``. Never blocks."""
        with self._lock:
            held = self._client_slots.pop(address, 0) - 1
            if held > 0:
                self._client_slots[address] = held
            self._slots.release()

    def _count(self, key: str) -> None:
        with self._lock:
            self._stats[key] += 1

    # -- auth --------------------------------------------------------------------------------

    def check_origin(self, headers: Any) -> None:
        """Raise 497 (403) for a request a web page could have sent while no login protects the
        facade (loopback): a ``Host`` that does not name this machine (DNS rebinding: a page of
        evil.example whose name now resolves to 127.0.0.1) or an ``Origin`` of another site (a
        cross-site POST needs no preflight). Clients (clickhouse-connect, Grafana's plugin,
        curl) send ``Host: 127.0.0.1:8123`` or ``localhost`` and no ``Origin``. A username
        without a password is no login here: a page can send ``?user=NAME``."""
        if self.settings.secret_login:
            return
        # "same-site" is a page of this machine on another port (a local tool whose Origin
        # passes); the shared guard refuses only "cross-site".
        why = browser_refusal(headers, check_host=True)
        if why is not None:
            self._count("refused_origin")
            raise _HttpError(403, 497, f"Not enough privileges: {why}")

    def check_auth(self, headers: Any, params: dict[str, str], address: str = "") -> None:
        """Raise 516 (401) unless the request carries the configured login (constant-time), or
        516 with 429 and ``Retry-After`` while ``address`` is locked out after failed logins or
        the failed-login ceilings are spent (:class:`LoginThrottle`; the login is not checked
        then, so a right guess meanwhile tells nothing)."""
        if not self.settings.auth_required:
            return
        wait = self.login_throttle.retry_after(address)
        if wait > 0:
            self._count("refused_login_throttled")
            raise _HttpError(429, 516, "Authentication failed: too many failed logins from this "
                             f"address; retry in {math.ceil(wait)} s. (AUTHENTICATION_FAILED)",
                             {"Retry-After": str(math.ceil(wait))})
        login, check = self._login(headers, params)
        wait = self.login_throttle.admit(address, login)
        if wait > 0:
            self._count("refused_login_ceiling")
            raise _HttpError(429, 516, "Authentication failed: too many failed logins to this "
                             f"facade; retry in {math.ceil(wait)} s. (AUTHENTICATION_FAILED)",
                             {"Retry-After": str(math.ceil(wait))})
        if check():
            self.login_throttle.succeeded(address, login)
            return
        self.login_throttle.failed(address)
        self._count("refused_auth")
        raise _HttpError(401, 516, "Authentication failed: password is incorrect, or there is no "
                         "user with such name. (AUTHENTICATION_FAILED)")

    def _login(self, headers: Any, params: dict[str, str]) -> tuple[str | None, Callable[[], bool]]:
        """Which configured login a request claims (``"token"``, ``"user"``; None: another name
        or none) and the check of its secret (constant-time), run only once admitted."""
        s = self.settings
        auth = headers.get("Authorization", "")
        if s.token is not None and auth[:7].lower() == "bearer ":
            token = s.token.get_secret_value()
            return "token", lambda: bearer_ok(auth, token)
        user, password = self._credentials(headers, params)
        if not s.username or user is None:
            return None, lambda: False
        want = s.password.get_secret_value() if s.password else ""
        claims = hmac.compare_digest(user.encode(), s.username.encode())
        return ("user" if claims else None), \
            lambda: claims and hmac.compare_digest((password or "").encode(), want.encode())

    @staticmethod
    def _credentials(headers: Any, params: dict[str, str]) -> tuple[str | None, str | None]:
        """The user name and password a request sends (Basic, X-ClickHouse-User/-Key, or the
        ``user``/``password`` parameters, in that order)."""
        auth = headers.get("Authorization", "")
        user = password = None
        if auth[:6].lower() == "basic ":
            try:
                user, _, password = base64.b64decode(auth[6:]).decode().partition(":")
            except Exception:
                user = None
        if user is None and "X-ClickHouse-User" in headers:
            user, password = headers.get("X-ClickHouse-User"), headers.get("X-ClickHouse-Key", "")
        if user is None and "user" in params:
            user, password = params["user"], params.get("password", "")
        return user, password

    # -- execution ---------------------------------------------------------------------------

    def handle_request(self, url_query: str, body: bytes, params: dict[str, str],
                       content_encoding: str) -> tuple[bytes, str, dict[str, Any]]:
        """One request's statement: the URL's ``query`` followed by the (decompressed) body, as
        the server joins them, then :meth:`execute`."""
        query = url_query
        if body:
            text = _decode_body(body, content_encoding, self.settings.max_body_bytes)
            query = (query + "\n" if query else "") + text.decode("utf-8", "replace")
        return self.execute(query, params)

    def _reply_bytes(self, conn: Any, statement: str, fmt: str, qparams: dict[str, str],
                     streamed: bool) -> tuple[bytes, dict[str, str]]:
        """The formatted reply of a checked statement and its X-ClickHouse-Summary. A SELECT
        (``streamed``) is read from chDB block by block and cut at ``max_result_bytes`` of
        output: that setting counts result blocks, not the reply, which Pretty padding, names
        repeated on every row (JSON, TSKV, XML) or escaping can make far larger (round 5: 100 KB
        of data, a 2 GB reply). SHOW, DESCRIBE and EXISTS (chDB streams SELECTs only) answer a
        few short rows, in one piece."""
        limit = self.policy.caps["max_result_bytes"]
        parts: list[bytes] = []
        size = 0
        read_rows = read_bytes = elapsed = 0.0
        stream = conn.send_query(statement, fmt, params=qparams) if streamed \
            else [conn.query(statement, fmt, params=qparams)]
        for chunk in stream:
            data = chunk.bytes() or b""
            size += len(data)
            if size > limit:
                if streamed:
                    stream.cancel()
                raise _HttpError(500, 396, f"Limit for result exceeded: more than {limit} bytes "
                                 "of output. (TOO_MANY_ROWS_OR_BYTES)")
            parts.append(data)
            read_rows += _safe(chunk.rows_read)
            read_bytes += _safe(chunk.bytes_read)
            elapsed = max(elapsed, _safe(chunk.elapsed))
        out = b"".join(parts)
        return out, {
            # decimal integers, as ClickHouse sends them (clickhouse-connect int()s them)
            "read_rows": str(int(read_rows)), "read_bytes": str(int(read_bytes)),
            "written_rows": "0", "written_bytes": "0", "total_rows_to_read": str(int(read_rows)),
            "result_rows": "0", "result_bytes": str(len(out)), "elapsed_ns": str(int(elapsed * 1e9)),
        }

    def execute(self, query: str, params: dict[str, str]) -> tuple[bytes, str, dict[str, Any]]:
        """Check and run one read-only statement on a fresh chDB connection. Blocks (chDB
        releases the GIL while it works). Returns (result bytes, format, summary); raises
        ``_HttpError`` (refusals carry ClickHouse's codes: 164 READONLY, 497 ACCESS_DENIED)."""
        import chdb

        fmt = params.get("default_format") or "TabSeparated"
        qparams = {k[6:]: v for k, v in params.items() if k.startswith("param_")}
        requested = {k: v for k, v in params.items()
                     if k not in _TRANSPORT_PARAMS and not k.startswith("param_")}
        if not query.strip():
            raise _HttpError(400, 62, "Empty query. (SYNTAX_ERROR)")
        conn = chdb.connect(self.path)
        try:
            try:
                settings = sqlguard.filter_settings(requested, self.policy)
                database = self._use_database(conn, params.get("database"))
                statement = self._canonical(conn, query)
                # With the parameters bound: an {x:Identifier} parameter names a table.
                tree = sqlguard.parse_ast(conn.query(
                    "EXPLAIN AST " + statement, "TabSeparated", params=qparams).bytes().decode())
                m = _TRAILING_FORMAT.search(statement)
                sqlguard.check(tree, database, self.policy,
                               output_format=m.group(1) if m else None, statement=statement)
            except sqlguard.Refused as exc:
                self._count("refused_access" if exc.code == sqlguard.ACCESS_DENIED
                            else "refused_readonly")
                raise _HttpError(exc.status, exc.code, f"{exc} ({_NAMES.get(exc.code, 'ERROR')})") \
                    from None
            for k, v in settings.items():
                if not _SETTING_NAME.match(k):
                    raise _HttpError(400, 115, f"Unknown setting {k!r}. (UNKNOWN_SETTING)")
                conn.query(f"SET {k} = {_quote(v)}", "TabSeparated")
            bare = statement[:m.start()] if m else statement
            block = _block_rows(conn, bare, qparams)
            if block is not None and block < int(settings.get("max_block_size", "65536")):
                conn.query(f"SET max_block_size = {block}", "TabSeparated")
            # readonly = 2 (reads, and setting changes the guard has already filtered): with 1,
            # system.settings would report every setting unchangeable and clickhouse-connect
            # would refuse to send even the allowed ones (max_execution_time, formats).
            conn.query("SET result_overflow_mode = 'throw', readonly = 2", "TabSeparated")
            out_fmt = m.group(1) if m else fmt
            out, summary = self._reply_bytes(conn, statement, fmt, qparams, streamed=block is not None)
            self._count("queries")
            return out, out_fmt, summary
        except _HttpError:
            raise
        except Exception as exc:
            log.debug("facade query failed: %s", exc)
            code, msg = client_error(str(exc))
            raise _HttpError(_HTTP_STATUS.get(code, 500), code, msg) from exc
        finally:
            conn.close()

    def _use_database(self, conn: Any, requested: str | None) -> str:
        """Make ``requested`` (default: the ragpulse database) current; returns the current one."""
        name = requested or self.policy.database
        if not self.policy.database_allowed(name):
            raise sqlguard.Refused(sqlguard.ACCESS_DENIED, f"Not enough privileges: database "
                                   f"{name} is not readable through the ragpulse facade")
        try:
            conn.query(f"USE `{name}`", "TabSeparated")
        except Exception:
            if requested:
                raise
            return "default"  # schema not created yet: unqualified names resolve to nothing
        return name

    @staticmethod
    def _canonical(conn: Any, query: str) -> str:
        """The statement as ClickHouse's parser re-prints it; refuses several statements."""
        try:
            res = conn.query(f"SELECT formatQuerySingleLine({_quote(query)})", "RawBLOB")
        except Exception as exc:
            text = str(exc)
            if "Multi-statements are not allowed" in text:
                raise sqlguard.Refused(sqlguard.SYNTAX_ERROR, "Syntax error: multi-statements are "
                                       "not allowed (one statement per request)") from None
            code, msg = client_error(text, scope=False)
            raise _HttpError(400, code, msg) from None
        return res.bytes().decode("utf-8")


_NAMES = {sqlguard.SYNTAX_ERROR: "SYNTAX_ERROR", sqlguard.READONLY: "READONLY",
          sqlguard.ACCESS_DENIED: "ACCESS_DENIED"}


# The formatted rows one streamed block may hold: text formats repeat every column name on every
# row (JSONEachRow, TSKV, XML, Vertical) and escaping can make a character 6 bytes, so a block
# holds at most this many bytes of names (a query's result names are its own text: an alias of
# 100 KB made a 500 MB block of 5,000 rows).
_BLOCK_NAME_BYTES = 64 << 20


def _block_rows(conn: Any, statement: str, params: dict[str, str]) -> int | None:
    """The ``max_block_size`` that keeps one block's repeated column names under
    ``_BLOCK_NAME_BYTES``, from the statement's result columns (``DESCRIBE``); None when the
    statement has no such description (SHOW, EXISTS, DESCRIBE: short fixed names)."""
    try:
        desc = conn.query(f"DESCRIBE ({statement})", "TabSeparated", params=params).bytes()
    except Exception:
        return None
    names = sum(len(line.split(b"\t", 1)[0]) + 8 for line in (desc or b"").splitlines())
    return max(16, _BLOCK_NAME_BYTES // (6 * names + 64)) if names else None


# A reply is sent in pieces of this size, each with its own deadline (``_Handler._write_body``).
_WRITE_PIECE = 256 << 10


def _safe(fn: Any) -> float:
    try:
        v = fn() if callable(fn) else fn
        return float(v or 0)
    except Exception:
        return 0.0


class _Handler(GuardedRequestHandler):
    facade: ClickHouseHttpFacade
    server_version = "ragpulse-clickhouse-facade"

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("facade: " + format, *args)

    def do_HEAD(self) -> None:
        self._handle(head=True)

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def _reply(self, status: int, body: bytes, headers: dict[str, str], head: bool = False) -> None:
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, _HEADER_SAFE.sub("?", v))
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self._write_body(body)

    def _write_body(self, body: bytes) -> None:
        """Send ``body`` in pieces, each due by ``write_timeout_s`` plus the bytes sent so far at
        ``write_min_bytes_per_s`` from the start: a client that reads slower (or never) is reset,
        so the reply's memory and its slot are freed (the kernel drops what it still holds)."""
        s = self.facade.settings
        sock = self.connection
        view = memoryview(body)
        start, sent = time.monotonic(), 0
        try:
            while sent < len(view):
                piece = view[sent:sent + _WRITE_PIECE]
                left = start + s.write_timeout_s + (sent + len(piece)) / s.write_min_bytes_per_s \
                    - time.monotonic()
                if left <= 0:
                    raise TimeoutError("write deadline passed")
                sock.settimeout(left)
                sock.sendall(piece)
                sent += len(piece)
        except TimeoutError:
            self.facade._count("replies_cut_slow")
            self.close_connection = True
            try:  # closed with a reset: the unsent bytes are dropped, not kept for the peer
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            except OSError:
                pass
            log.debug("facade: reply cut after %d of %d bytes (client too slow)", sent, len(view))

    def _read_body(self, limit: int) -> bytes:
        try:
            return read_body(self, limit, require_length=False)
        except BodyError as exc:
            self.close_connection = True
            raise _HttpError(exc.status, 1, str(exc)) from None

    def _answer(self, query: str, body: bytes, params: dict[str, str], base: dict[str, str],
                head: bool) -> None:
        """Run the request's statement and send its reply (the caller holds a slot)."""
        t0 = time.perf_counter()
        out, fmt, summary = self.facade.handle_request(
            query, body, params, self.headers.get("Content-Encoding", ""))
        summary["elapsed_ns"] = str(int((time.perf_counter() - t0) * 1e9))
        headers = dict(base)
        headers["Content-Type"] = _CONTENT_TYPES.get(fmt.lower(), "application/octet-stream")
        headers["X-ClickHouse-Format"] = fmt
        headers["X-ClickHouse-Summary"] = json.dumps(summary, separators=(",", ":"))
        self._reply(200, out, headers, head)

    def _handle(self, head: bool = False) -> None:
        f = self.facade
        f._count("requests")
        url = urlsplit(self.path)
        params = dict(parse_qsl(url.query, keep_blank_values=True))
        asked_id = params.get("query_id")
        bad_id = bool(asked_id) and not _QUERY_ID.fullmatch(asked_id)
        query_id = asked_id if asked_id and not bad_id else str(uuid.uuid4())
        base = {"X-ClickHouse-Query-Id": query_id, "X-ClickHouse-Timezone": f._timezone,
                "X-ClickHouse-Server-Display-Name": "ragpulse"}
        body_read = False
        try:
            if url.path not in ("/", "", "/ping"):
                raise _HttpError(404, 1, f"no handler for {url.path}")
            if bad_id:
                f._count("refused_query_id")
                raise _HttpError(400, 36, "query_id must be 1-128 letters, digits or _.:- (it is "
                                 "sent back in a response header). (BAD_ARGUMENTS)")
            query = params.get("query", "")
            if url.path == "/ping" or (self.command in ("GET", "HEAD") and not query):
                self._read_body(f.settings.max_body_bytes)  # drained for keep-alive
                body_read = True
                self._reply(200, b"Ok.\n", {"Content-Type": "text/html; charset=UTF-8"}, head)
                return
            # Authenticate before reading the body: a stranger's upload is never buffered.
            client = client_key(str(self.client_address[0]))
            f.check_origin(self.headers)
            f.check_auth(self.headers, params, client)
            body = self._read_body(f.settings.max_body_bytes)
            body_read = True
            if params.get("compress") == "1" or params.get("decompress") == "1":
                raise _HttpError(400, 48, "compress=1/decompress=1 (native framing) is not "
                                 "supported by the ragpulse facade; use Content-Encoding. (NOT_IMPLEMENTED)")
            # The slot is held until the reply is written (or cut): the reply's memory is part of
            # the slot's share of the bound, however slowly the client reads it.
            f.acquire_slot(client)
            try:
                self._answer(query, body, params, base, head)
            finally:
                f.release_slot(client)
        except _HttpError as e:
            f._count("errors")
            if not body_read:
                self.close_connection = True  # the unread body would desync keep-alive
            msg = str(e)
            if not msg.startswith("Code:"):
                msg = f"Code: {e.code}. DB::Exception: {msg}"
            if not msg.endswith(")") or "(version" not in msg:
                msg = f"{msg} (version {f._version})"
            headers = dict(base)
            headers["Content-Type"] = "text/plain; charset=UTF-8"
            headers["X-ClickHouse-Exception-Code"] = str(e.code)
            headers.update(e.headers)
            try:
                self._reply(e.status, (msg + "\n").encode("utf-8", "replace"), headers, head)
            except OSError:
                pass
        except (BrokenPipeError, ConnectionResetError):
            pass


def build_facade(path: str, settings: FacadeSettings | None = None) -> ClickHouseHttpFacade:
    """A not-yet-started facade over the chDB directory ``path``."""
    return ClickHouseHttpFacade(path, settings)
