"""Run as a subprocess: own a chDB directory (schema + a writable ClickHouse-HTTP server on a
given port, testkit/clickhouse_server.py), print its URL, serve until killed. The ClickHouse
outage test SIGKILLs it and starts it again on the same directory and port, like a database
server crashing and coming back."""

from __future__ import annotations

import sys
import threading

from ragpulse.scorer.store import SchemaSettings, init_schema, open_store
from testkit.clickhouse_server import writable_server


def main() -> None:
    path, database, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    client = open_store(f"chdb://{path}")
    init_schema(client, SchemaSettings(database=database))
    facade = writable_server(path, port=port)
    facade.start()
    print(facade.url, flush=True)
    threading.Event().wait()  # until SIGKILL or SIGTERM


if __name__ == "__main__":
    main()
