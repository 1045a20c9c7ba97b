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

What is served (the subset of https://clickhouse.com/docs/interfaces/http that clickhouse-connect,
clickhouse-go and curl use):

* ``GET|HEAD /ping`` and ``GET /`` without a query → ``Ok.``
* ``GET|POST /?query=…`` and the query in the POST body (URL part first, body appended, as the
  server does), ``Content-Encoding`` gzip, deflate, lz4 or zstd (decompressed within the body
  limit);
* ``database`` (the ragpulse one or ``system``), ``default_format`` (TabSeparated by default, as
  the server), a trailing ``FORMAT`` clause, ``param_<name>`` query parameters; transport
  parameters (``session_id``, ``query_id``, ``wait_end_of_query``...) are accepted and ignored;
* ``X-ClickHouse-Summary``/``-Format``/``-Query-Id``/``-Timezone`` response headers; errors as the
  server sends them (``Code: N. DB::Exception: …`` body, ``X-ClickHouse-Exception-Code``).

Not served: writes of any kind, sessions (each request gets a fresh chDB connection, so settings
never leak between requests), the native ``compress=1`` framing, multipart external data,
progress headers, result streaming (a result is materialized, bounded by ``max_result_bytes``).
"""

from __future__ import annotations

import base64
import hmac
import ipaddress
import json
import logging
import os
import re
import threading
import time
import uuid
import zlib
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

from ragpulse.common import (
    BodyError,
    ConnectionLimits,
    GuardedHTTPServer,
    GuardedRequestHandler,
    read_body,
    serve_in_thread,
)
from ragpulse.scorer.store import DatabaseName, remove_owner, write_owner

from . import sqlguard

__all__ = ["ClickHouseHttpFacade", "FacadeSettings", "build_facade", "is_loopback"]

log = logging.getLogger(__name__)

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
_TRAILING_FORMAT = re.compile(r"\bFORMAT\s+([A-Za-z0-9_]+)\s*;?\s*$", re.IGNORECASE)
_CODE = re.compile(r"Code:\s*(\d+)")

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


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) only accepts connections from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


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
    max_execution_time_s: int = Field(default=60, ge=1, le=3600)
    """Cap of ``max_execution_time`` for every statement (a client may ask for less)."""
    max_concurrent_queries: int = Field(default=8, ge=1, le=256)
    """Beyond this a request gets 503 (Code 202), like the server's ``max_concurrent_queries``."""
    max_connections: int = Field(default=64, ge=1, le=4096)
    """Open connections; idle or slow ones are evicted first (:mod:`ragpulse.common.http`)."""
    header_timeout_s: float = Field(default=10.0, gt=0, le=600)
    idle_timeout_s: float = Field(default=60.0, gt=0, le=3600)
    advertise: bool = True
    """Write ``ragpulse-owner.json`` (pid + URL) into the chDB directory while serving, so
    :func:`~ragpulse.scorer.store.open_store` in other processes can point at (or follow) it."""

    @model_validator(mode="after")
    def _auth(self) -> FacadeSettings:
        if self.password is not None and not self.username:
            raise ValueError("password given without username")
        if not is_loopback(self.host) and not self.auth_required:
            raise ValueError(
                f"the ClickHouse facade would listen on {self.host} without a login: set a "
                "username and password or a token (ragpulse up: --clickhouse-user/"
                "--clickhouse-password or --clickhouse-token), or bind it to 127.0.0.1")
        return self

    @property
    def auth_required(self) -> bool:
        return bool(self.username or self.token)

    def policy(self) -> sqlguard.GuardPolicy:
        caps = dict(sqlguard.DEFAULT_POLICY.caps, max_execution_time=self.max_execution_time_s,
                    max_result_bytes=self.max_result_bytes)
        return sqlguard.GuardPolicy(database=self.database, caps=caps)


class _HttpError(Exception):
    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(message)
        self.status, self.code = status, code


def _decompress(data: bytes, encoding: str, limit: int) -> bytes:
    """``data`` decoded per ``Content-Encoding``, refusing more than ``limit`` bytes of output
    (a small compressed body cannot expand into memory)."""
    enc = encoding.strip().lower()
    if not enc or enc == "identity":
        return data
    too_big = _HttpError(413, 1, f"decompressed request body exceeds {limit} bytes")
    if enc in ("gzip", "deflate"):
        out, pending = [], data
        total = 0
        while pending:
            d = zlib.decompressobj(wbits=(16 if enc == "gzip" else 0) + zlib.MAX_WBITS)
            chunk = d.decompress(pending, limit - total + 1)
            total += len(chunk)
            if total > limit or d.unconsumed_tail:
                raise too_big
            if not d.eof:
                raise _HttpError(400, 1, f"truncated {enc} request body")
            out.append(chunk)
            pending = d.unused_data
        return b"".join(out)
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
        self._thread: threading.Thread | None = None
        self._anchor: Any = None
        self._slots = threading.BoundedSemaphore(self.settings.max_concurrent_queries)
        self._lock = threading.Lock()
        self._closed = False
        self._version = ""
        self._timezone = "UTC"
        self._stats = dict.fromkeys(
            ("requests", "queries", "errors", "refused_busy", "refused_auth", "refused_readonly",
             "refused_access"), 0)

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("facade not started")
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def port(self) -> int:
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
                                      idle_timeout_s=s.idle_timeout_s)
            try:
                server = GuardedHTTPServer((s.host, s.port), handler, limits)
            except BaseException:
                self._anchor.close()
                self._anchor = None
                raise
            self._server = server
            self._thread = serve_in_thread(server, "ragpulse-ch-http")
        if s.advertise:
            write_owner(self.path, self.url)
        log.info("read-only ClickHouse HTTP facade for %s on %s (login %s)", self.path, self.url,
                 "required" if s.auth_required else "off: loopback only")

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
        with self._lock:
            out = dict(self._stats)
            server = self._server
        if server is not None:
            out.update(server.stats())
        return out

    def _count(self, key: str) -> None:
        with self._lock:
            self._stats[key] += 1

    # -- auth --------------------------------------------------------------------------------

    def check_auth(self, headers: Any, params: dict[str, str]) -> None:
        """Raise 516 (401) unless the request carries the configured login. Constant-time."""
        s = self.settings
        if not s.auth_required:
            return
        auth = headers.get("Authorization", "")
        if s.token is not None and auth.startswith("Bearer "):
            if hmac.compare_digest(auth[7:].strip().encode(), s.token.get_secret_value().encode()):
                return
        user = password = None
        if auth.startswith("Basic "):
            try:
                user, _, password = base64.b64decode(auth[6:]).decode().partition(":")
            except Exception:
                user = None
        if user is None and "X-ClickHouse-User" in headers:
            user, password = headers.get("X-ClickHouse-User"), headers.get("X-ClickHouse-Key", "")
        if user is None and "user" in params:
            user, password = params["user"], params.get("password", "")
        if s.username and user is not None:
            want = s.password.get_secret_value() if s.password else ""
            if hmac.compare_digest(user.encode(), s.username.encode()) and \
                    hmac.compare_digest((password or "").encode(), want.encode()):
                return
        self._count("refused_auth")
        raise _HttpError(401, 516, "Authentication failed: password is incorrect, or there is no "
                         "user with such name. (AUTHENTICATION_FAILED)")

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
                               output_format=m.group(1) if m else None)
            except sqlguard.Refused as exc:
                self._count("refused_access" if exc.code == sqlguard.ACCESS_DENIED
                            else "refused_readonly")
                raise _HttpError(exc.status, exc.code, f"{exc} ({_NAMES.get(exc.code, 'ERROR')})") \
                    from None
            for k, v in settings.items():
                if not _SETTING_NAME.match(k):
                    raise _HttpError(400, 115, f"Unknown setting {k!r}. (UNKNOWN_SETTING)")
                conn.query(f"SET {k} = {_quote(v)}", "TabSeparated")
            # readonly = 2 (reads, and setting changes the guard has already filtered): with 1,
            # system.settings would report every setting unchangeable and clickhouse-connect
            # would refuse to send even the allowed ones (max_execution_time, formats).
            conn.query("SET result_overflow_mode = 'throw', readonly = 2", "TabSeparated")
            out_fmt = m.group(1) if m else fmt
            res = conn.query(statement, fmt, params=qparams)
            self._count("queries")
            out = res.bytes() or b""
            if len(out) > self.settings.max_result_bytes:
                raise _HttpError(500, 396, f"Limit for result exceeded: {len(out)} bytes > "
                                 f"{self.settings.max_result_bytes}. (TOO_MANY_ROWS_OR_BYTES)")
            summary = {
                # decimal integers, as ClickHouse sends them (clickhouse-connect int()s them)
                "read_rows": str(int(_safe(res.rows_read))),
                "read_bytes": str(int(_safe(res.bytes_read))),
                "written_rows": "0", "written_bytes": "0",
                "total_rows_to_read": str(int(_safe(res.rows_read))),
                "result_rows": "0", "result_bytes": str(len(out)),
                "elapsed_ns": str(int(_safe(res.elapsed) * 1e9)),
            }
            return out, out_fmt, summary
        except _HttpError:
            raise
        except Exception as exc:
            msg = str(exc).strip()
            m = _CODE.search(msg)
            code = int(m.group(1)) if m else 1001
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
            m = _CODE.search(text)
            raise _HttpError(400, int(m.group(1)) if m else 62, text.split(": In scope")[0]) \
                from None
        return res.bytes().decode("utf-8")


_NAMES = {sqlguard.SYNTAX_ERROR: "SYNTAX_ERROR", sqlguard.READONLY: "READONLY",
          sqlguard.ACCESS_DENIED: "ACCESS_DENIED"}


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
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def _read_body(self, limit: int) -> bytes:
        try:
            return read_body(self, limit, require_length=False)
        except BodyError as exc:
            self.close_connection = True
            raise _HttpError(exc.status, 1, str(exc)) from None

    def _handle(self, head: bool = False) -> None:
        f = self.facade
        f._count("requests")
        url = urlsplit(self.path)
        params = dict(parse_qsl(url.query, keep_blank_values=True))
        query_id = params.get("query_id") or str(uuid.uuid4())
        base = {"X-ClickHouse-Query-Id": query_id, "X-ClickHouse-Timezone": f._timezone,
                "X-ClickHouse-Server-Display-Name": "ragpulse"}
        body_read = False
        try:
            if url.path not in ("/", "", "/ping"):
                raise _HttpError(404, 1, f"no handler for {url.path}")
            query = params.get("query", "")
            if url.path == "/ping" or (self.command in ("GET", "HEAD") and not query):
                self._read_body(f.settings.max_body_bytes)  # drained for keep-alive
                body_read = True
                self._reply(200, b"Ok.\n", {"Content-Type": "text/html; charset=UTF-8"}, head)
                return
            # Authenticate before reading the body: a stranger's upload is never buffered.
            f.check_auth(self.headers, params)
            body = self._read_body(f.settings.max_body_bytes)
            body_read = True
            if params.get("compress") == "1" or params.get("decompress") == "1":
                raise _HttpError(400, 48, "compress=1/decompress=1 (native framing) is not "
                                 "supported by the ragpulse facade; use Content-Encoding. (NOT_IMPLEMENTED)")
            if not f._slots.acquire(blocking=False):
                f._count("refused_busy")
                raise _HttpError(503, 202, "Too many simultaneous queries. Maximum: "
                                 f"{f.settings.max_concurrent_queries}. (TOO_MANY_SIMULTANEOUS_QUERIES)")
            try:
                t0 = time.perf_counter()
                out, fmt, summary = f.handle_request(
                    query, body, params, self.headers.get("Content-Encoding", ""))
                summary["elapsed_ns"] = str(int((time.perf_counter() - t0) * 1e9))
            finally:
                f._slots.release()
            headers = dict(base)
            headers["Content-Type"] = _CONTENT_TYPES.get(fmt.lower(), "application/octet-stream")
            headers["X-ClickHouse-Format"] = fmt
            headers["X-ClickHouse-Summary"] = json.dumps(summary, separators=(",", ":"))
            self._reply(200, out, headers, head)
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
            try:
                self._reply(e.status, (msg + "\n").encode("utf-8", "replace"), headers, head)
            except OSError:
                pass
        except (BrokenPipeError, ConnectionResetError):
            pass


def build_facade(path: str, settings: FacadeSettings | None = None) -> ClickHouseHttpFacade:
    """A not-yet-started facade over the chDB directory ``path``."""
    return ClickHouseHttpFacade(path, settings)
