"""What the facade attack tests share: the facade over a fresh chDB store, a recording HTTP
listener (an attack that made the engine fetch a URL shows up in its hits), and a raw POST the
way curl sends it."""

from __future__ import annotations

import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

from ragpulse.deploy.facade import ClickHouseHttpFacade, FacadeSettings, build_facade


@contextmanager
def running_facade(chdb_dir: Path, database: str) -> Iterator[ClickHouseHttpFacade]:
    facade = build_facade(str(chdb_dir), FacadeSettings(database=database, advertise=False))
    facade.start()
    try:
        yield facade
    finally:
        facade.shutdown()


@contextmanager
def recording_listener(body: bytes, path: str = "") -> Iterator[tuple[str, list[str]]]:
    """(URL, paths requested so far) of an HTTP server that answers every GET with ``body``."""
    hits: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hits.append(self.path)
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}{path}", hits
    finally:
        server.shutdown()
        server.server_close()


def post(url: str, sql: str, **params: str) -> tuple[int, str, str]:
    """(status, X-ClickHouse-Exception-Code, body) of a raw POST, the way curl sends it."""
    req = urllib.request.Request(f"{url}/?{urllib.parse.urlencode(params)}", data=sql.encode(),
                                 method="POST")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, "", r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("X-ClickHouse-Exception-Code", ""), e.read().decode()
