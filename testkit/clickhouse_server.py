"""A stand-in for a ClickHouse server, not ClickHouse: the product's read-only facade
(``ragpulse.deploy.facade``) with its guard removed, over chDB. Every test that writes "to
ClickHouse over HTTP" (the scorer's HTTP write path, tests/reliability/test_clickhouse_outage.py)
meets this, never a ClickHouse server; what it shares with one is the chDB engine (ClickHouse's
own code, in-process) and what the facade imitates of the HTTP interface, checked against
ClickHouse's docs and source in tests/deploy/test_clickhouse_standin_upstream.py (which also
lists where it differs). docs/deploy.md says what has and has not met a real server.

No ClickHouse server runs on these machines (the product's facade is read-only by design), yet
the scorer's write path over HTTP (``RAGPULSE_CLICKHOUSE__DSN=http://...``: inserts, retries,
outages) must be tested against the real HTTP protocol and the real engine. This server reuses
the facade's transport (the same HTTP handling, auth and error format) and runs every statement
unchecked, as a ClickHouse ``default`` user would, including ``INSERT … FORMAT X`` with the data
in the request body (what clickhouse-connect sends), written through a temporary file and
``INSERT … FROM INFILE``. It is a test double: never part of the product.
"""

from __future__ import annotations

import os
import re
import tempfile
from typing import Any

from ragpulse.deploy.facade import ClickHouseHttpFacade, FacadeSettings

__all__ = ["WritableClickHouse", "writable_server"]

# Bytes, not str: the data after the statement is binary, and str patterns treat \x1c-\x1f as
# whitespace (a Native block of 28 columns starts with \x1c). Only blanks may follow the format
# name before the newline that starts the data.
_INSERT_FORMAT = re.compile(
    rb"^\s*(INSERT\s+INTO\s+.+?)\s+FORMAT\s+([A-Za-z0-9_]+)[ \t]*(?:\r?\n|$)", re.IGNORECASE | re.DOTALL)
_TRAILING_FORMAT = re.compile(r"\bFORMAT\s+([A-Za-z0-9_]+)\s*;?\s*$", re.IGNORECASE)


class WritableClickHouse(ClickHouseHttpFacade):
    """``ClickHouseHttpFacade`` without the read-only guard, plus inserts with body data."""

    def handle_request(self, url_query: str, body: bytes, params: dict[str, str],
                       content_encoding: str) -> tuple[bytes, str, dict[str, Any]]:
        from ragpulse.deploy import facade as f

        data = None
        query = url_query
        insert = _INSERT_FORMAT.match(query.encode()) if query and body else None
        if insert is not None:
            data = f._decode_body(body, content_encoding, self.settings.max_body_bytes)
        elif body:
            joined = (query.encode() + b"\n" if query else b"") + f._decode_body(
                body, content_encoding, self.settings.max_body_bytes)
            insert = _INSERT_FORMAT.match(joined)
            if insert is not None:
                data = joined[insert.end():]
            else:
                query = joined.decode("utf-8", "replace")
        return self._run(query, insert, data, params)

    def _run(self, query: str, insert: Any, data: bytes | None,
             params: dict[str, str]) -> tuple[bytes, str, dict[str, Any]]:
        import chdb

        from ragpulse.deploy import facade as f

        fmt = params.get("default_format") or "TabSeparated"
        qparams = {k[6:]: v for k, v in params.items() if k.startswith("param_")}
        conn = chdb.connect(self.path)
        tmp_path = None
        try:
            if params.get("database"):
                conn.query(f"USE `{params['database']}`", "TabSeparated")
            for k, v in params.items():
                if k not in f._TRANSPORT_PARAMS and not k.startswith("param_"):
                    conn.query(f"SET {k} = {f._quote(v)}", "TabSeparated")
            if insert is not None and data is not None:
                target, in_fmt = insert.group(1).decode("utf-8", "replace"), insert.group(2).decode()
                with tempfile.NamedTemporaryFile(prefix="ragpulse-ins-", suffix=".bin",
                                                 delete=False) as tmp:
                    tmp.write(data)
                    tmp_path = tmp.name
                res = conn.query(f"{target} FROM INFILE {f._quote(tmp_path)} FORMAT {in_fmt}",
                                 "TabSeparated", params=qparams)
                out_fmt = fmt
            else:
                m = _TRAILING_FORMAT.search(query)
                out_fmt = m.group(1) if m else fmt
                res = conn.query(query, fmt, params=qparams)
            return res.bytes() or b"", out_fmt, {"result_bytes": str(len(res.bytes() or b""))}
        except Exception as exc:
            msg = str(exc).strip()
            m = f._CODE.search(msg)
            code = int(m.group(1)) if m else 1001
            raise f._HttpError(f._HTTP_STATUS.get(code, 500), code, msg) from exc
        finally:
            conn.close()
            if tmp_path:
                os.unlink(tmp_path)


def writable_server(path: str, **settings: Any) -> WritableClickHouse:
    """A not-yet-started writable server over the chDB directory ``path`` (large bodies)."""
    settings.setdefault("advertise", False)
    settings.setdefault("max_body_bytes", 256 << 20)
    return WritableClickHouse(path, FacadeSettings(**settings))
