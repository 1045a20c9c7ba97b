"""A ClickHouse-HTTP-compatible facade over the chDB engine of the process that owns it.

chDB allows one process per data directory. While ``ragpulse up`` owns it, ``ragpulse status``,
``ragpulse report`` (and, in a pinch, Grafana's ClickHouse plugin) reach the data through this
facade with the ordinary ``clickhouse_connect.get_client(host='127.0.0.1', port=PORT)``.

What is served (the subset of https://clickhouse.com/docs/interfaces/http that clickhouse-connect
and curl use):

* ``GET|HEAD /ping`` and ``GET /`` without a query → ``Ok.``
* ``GET|POST /?query=…`` and the query in the POST body (URL part first, body appended, as the
  server does); ``INSERT … FORMAT X`` with the data in the body (``Content-Encoding`` lz4, gzip,
  deflate, zstd) is written to a temporary file and run as ``INSERT … FROM INFILE``.
* ``database``, ``default_format`` (TabSeparated by default, as the server), a trailing ``FORMAT``
  clause, ``param_<name>`` query parameters, and any other URL parameter as a query-level
  setting; transport parameters (``session_id``, ``query_id``, ``wait_end_of_query``,
  compression flags…) are accepted and ignored.
* ``X-ClickHouse-Summary``/``-Format``/``-Query-Id``/``-Timezone`` response headers; errors as
  the server sends them (``Code: N. DB::Exception: …`` body, ``X-ClickHouse-Exception-Code``).
* Optional auth: HTTP Basic, ``X-ClickHouse-User``/``-Key`` headers or ``user``/``password``
  parameters against one configured user, or ``Authorization: Bearer <token>``.

Not served: sessions (each request gets a fresh chDB connection, so settings never leak between
requests), the native-compressed ``compress=1``/``decompress=1`` framing, multipart external
data, progress headers, and result streaming (a result is materialized before it is sent, bounded
by ``max_result_bytes``).
"""

from __future__ import annotations

import base64
import gzip
import hmac
import json
import logging
import os
import re
import tempfile
import threading
import time
import uuid
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

from .client import remove_owner, write_owner

__all__ = ["ClickHouseHttpFacade", "FacadeSettings", "build_facade"]

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
# Bytes, not str: the data after the statement is binary, and str patterns treat \x1c-\x1f as
# whitespace (a Native block of 28 columns starts with \x1c). Only blanks may follow the format
# name before the newline that starts the data.
_INSERT_FORMAT = re.compile(
    rb"^\s*(INSERT\s+INTO\s+.+?)\s+FORMAT\s+([A-Za-z0-9_]+)[ \t]*(?:\r?\n|$)", re.IGNORECASE | re.DOTALL)
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


class FacadeSettings(BaseModel):
    """Where and how the facade listens. Frozen; validated on construction."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    host: str = "127.0.0.1"
    """Loopback by default: the facade exposes the whole database."""
    port: int = Field(default=0, ge=0, le=65535)
    """0 picks a free port; read :attr:`ClickHouseHttpFacade.url` after ``start()``."""
    username: str | None = None
    password: SecretStr | None = None
    token: SecretStr | None = None
    """Bearer token accepted in ``Authorization: Bearer …``."""
    readonly: bool = False
    """Refuse writes (``readonly = 1`` on every request's connection)."""
    max_body_bytes: int = Field(default=256 * 2**20, ge=1024)
    max_result_bytes: int = Field(default=512 * 2**20, ge=1024)
    max_concurrent_queries: int = Field(default=8, ge=1, le=256)
    """Beyond this a request gets 503 (Code 202), like the server's ``max_concurrent_queries``."""
    advertise: bool = True
    """Write ``ragpulse-owner.json`` (pid + URL) into the chDB directory while serving, so
    :func:`~ragpulse.scorer.store.open_store` in other processes can point at (or follow) it."""

    @model_validator(mode="after")
    def _auth(self) -> FacadeSettings:
        if self.password is not None and not self.username:
            raise ValueError("password given without username")
        return self

    @property
    def auth_required(self) -> bool:
        return bool(self.username or self.token)


class _HttpError(Exception):
    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(message)
        self.status, self.code = status, code


def _decompress(data: bytes, encoding: str) -> bytes:
    enc = encoding.strip().lower()
    if not enc or enc == "identity":
        return data
    if enc == "gzip":
        return gzip.decompress(data)
    if enc == "deflate":
        return zlib.decompress(data)
    # Streaming clients (clickhouse-connect inserts) send one compressed frame per block, so
    # a body is a concatenation of frames: decode until nothing is left.
    if enc == "lz4":
        import lz4.frame

        out = []
        while data:
            d = lz4.frame.LZ4FrameDecompressor()
            out.append(d.decompress(data))
            if not d.eof:
                raise _HttpError(400, 1, "truncated lz4 frame in request body")
            data = d.unused_data
        return b"".join(out)
    if enc == "zstd":
        try:
            import zstandard
        except ImportError as exc:
            raise _HttpError(415, 1, "zstd request bodies need the zstandard package") from exc
        out = []
        while data:
            z = zstandard.ZstdDecompressor().decompressobj()
            out.append(z.decompress(data))
            data = z.unused_data
        return b"".join(out)
    raise _HttpError(415, 1, f"unsupported Content-Encoding {encoding!r}")


def _decode_body(data: bytes, encoding: str) -> bytes:
    try:
        return _decompress(data, encoding)
    except _HttpError:
        raise
    except Exception as exc:  # corrupt gzip/lz4/zstd: the client's fault, not a 500
        raise _HttpError(400, 1, f"cannot decode {encoding} request body: {exc}") from exc


def _quote(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


class ClickHouseHttpFacade:
    """Serves ClickHouse's HTTP interface from this process's chDB engine.

    ``start()`` opens the engine at ``path`` (or joins it when this process already has it open,
    e.g. through a clickhouse-connect ``chdb://`` client) and listens on a background thread;
    ``shutdown()`` is idempotent, safe without ``start()``, and waits for running requests.
    Requests run concurrently on server threads, each on its own chDB connection.
    """

    def __init__(self, path: str, settings: FacadeSettings | None = None) -> None:
        self.path = os.path.realpath(path)
        self.settings = settings or FacadeSettings()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._anchor: Any = None
        self._slots = threading.BoundedSemaphore(self.settings.max_concurrent_queries)
        self._lock = threading.Lock()
        self._closed = False
        self._version = ""
        self._timezone = "UTC"
        self._stats = dict.fromkeys(
            ("requests", "queries", "inserts", "errors", "refused_busy", "refused_auth"), 0)

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
            try:
                server = ThreadingHTTPServer((self.settings.host, self.settings.port), handler)
            except BaseException:
                self._anchor.close()
                self._anchor = None
                raise
            server.daemon_threads = True
            self._server = server
            self._thread = threading.Thread(
                target=server.serve_forever, kwargs={"poll_interval": 0.2},
                name="ragpulse-ch-http", daemon=True)
            self._thread.start()
        if self.settings.host not in ("127.0.0.1", "::1", "localhost") \
                and not self.settings.auth_required:
            log.warning("the ClickHouse facade listens on %s without authentication: anyone who "
                        "can reach it can read and change every table", self.url)
        if self.settings.advertise:
            write_owner(self.path, self.url)
        log.info("ClickHouse HTTP facade for %s on %s", self.path, self.url)

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
            server.shutdown()
            server.server_close()
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
            return dict(self._stats)

    def _count(self, key: str) -> None:
        with self._lock:
            self._stats[key] += 1

    # -- auth --------------------------------------------------------------------------------

    def check_auth(self, headers: Any, params: dict[str, str]) -> None:
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

    def execute(self, query: str, body: bytes, params: dict[str, str],
                content_encoding: str, *, readonly: bool = False) -> tuple[bytes, str, dict[str, Any]]:
        """Run one request's statement on a fresh chDB connection. Blocks (chDB releases the GIL
        while it works). Returns (result bytes, format, summary); raises ``_HttpError``."""
        import chdb

        fmt = params.get("default_format") or "TabSeparated"
        qparams = {k[6:]: v for k, v in params.items() if k.startswith("param_")}
        settings = {k: v for k, v in params.items()
                    if k not in _TRANSPORT_PARAMS and not k.startswith("param_")}
        data: bytes | None = None
        insert: re.Match[bytes] | None = None
        if body:
            insert = _INSERT_FORMAT.match(query.encode()) if query else None
            if insert is not None:
                data = _decode_body(body, content_encoding)
            else:
                joined = (query.encode() + b"\n" if query else b"") + _decode_body(body, content_encoding)
                insert = _INSERT_FORMAT.match(joined)
                if insert is not None:
                    # INSERT … FORMAT X<newline><data> in one body: split at the statement's end.
                    data = joined[insert.end():]
                else:
                    query = joined.decode("utf-8", "replace")
        if data is None and not query.strip():
            raise _HttpError(400, 62, "Empty query. (SYNTAX_ERROR)")
        conn = chdb.connect(self.path)
        tmp_path = None
        try:
            db = params.get("database")
            if db:
                if not _SETTING_NAME.match(db):
                    raise _HttpError(404, 81, f"Database {db} does not exist. (UNKNOWN_DATABASE)")
                conn.query(f"USE `{db}`", "TabSeparated")
            ro = settings.pop("readonly", "0")
            for k, v in settings.items():
                if not _SETTING_NAME.match(k):
                    raise _HttpError(400, 115, f"Unknown setting {k!r}. (UNKNOWN_SETTING)")
                conn.query(f"SET {k} = {_quote(v)}", "TabSeparated")
            if "max_result_bytes" not in settings:
                # Stop a runaway result inside the engine, before it is materialized here.
                conn.query(f"SET max_result_bytes = {self.settings.max_result_bytes}, "
                           "result_overflow_mode = 'throw'", "TabSeparated")
            # Last: a read-only connection refuses further SETs.
            if readonly or self.settings.readonly or ro not in ("", "0"):
                conn.query(f"SET readonly = {2 if ro == '2' else 1}", "TabSeparated")
            if data is not None and insert is not None:
                target, in_fmt = insert.group(1).decode("utf-8", "replace"), insert.group(2).decode()
                with tempfile.NamedTemporaryFile(prefix="ragpulse-ins-", suffix=".bin",
                                                 delete=False) as f:
                    f.write(data)
                    tmp_path = f.name
                sql = f"{target} FROM INFILE {_quote(tmp_path)} FORMAT {in_fmt}"
                res = conn.query(sql, "TabSeparated", params=qparams)
                self._count("inserts")
                out_fmt = fmt
            else:
                m2 = _TRAILING_FORMAT.search(query)
                out_fmt = m2.group(1) if m2 else fmt
                res = conn.query(query, fmt, params=qparams)
                self._count("queries")
            out = res.bytes() or b""
            if len(out) > self.settings.max_result_bytes:
                raise _HttpError(500, 396, f"Limit for result exceeded: {len(out)} bytes > "
                                 f"{self.settings.max_result_bytes}. (TOO_MANY_ROWS_OR_BYTES)")
            summary = {
                "read_rows": str(_safe(res.rows_read)), "read_bytes": str(_safe(res.bytes_read)),
                "written_rows": str(_safe(getattr(res, "rows_written", None))),
                "written_bytes": str(_safe(getattr(res, "bytes_written", None))),
                "total_rows_to_read": str(_safe(res.rows_read)),
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
            if tmp_path:
                try:
                    os.unlink(tmp_path)
                except OSError:
                    pass


def _safe(fn: Any) -> float:
    try:
        v = fn() if callable(fn) else fn
        return float(v or 0)
    except Exception:
        return 0.0


class _Handler(BaseHTTPRequestHandler):
    facade: ClickHouseHttpFacade
    protocol_version = "HTTP/1.1"  # keep-alive: clickhouse-connect pools connections
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
        """The request body, de-chunked (clickhouse-connect streams inserts chunked); raises
        413 beyond ``limit`` bytes (and drops the connection: the rest is unread)."""
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            parts: list[bytes] = []
            total = 0
            while True:
                line = self.rfile.readline(1024)
                try:
                    size = int(line.split(b";", 1)[0].strip(), 16)
                except ValueError:
                    self.close_connection = True
                    raise _HttpError(400, 1, "malformed chunked body") from None
                if size == 0:
                    while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return b"".join(parts)
                total += size
                if total > limit:
                    self.close_connection = True
                    raise _HttpError(413, 1, f"request body exceeds max_body_bytes={limit}")
                parts.append(self.rfile.read(size))
                self.rfile.readline(8)  # the CRLF after each chunk
        length = int(self.headers.get("Content-Length") or 0)
        if length > limit:
            self.close_connection = True
            raise _HttpError(413, 1, f"request body of {length} bytes exceeds max_body_bytes={limit}")
        return self.rfile.read(length) if length else b""

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
                # The server treats GET (and so HEAD) as read-only.
                out, fmt, summary = f.execute(query, body, params,
                                              self.headers.get("Content-Encoding", ""),
                                              readonly=self.command in ("GET", "HEAD"))
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
