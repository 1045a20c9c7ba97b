"""Run as a subprocess: own a chDB directory (schema + ClickHouse-HTTP facade on a given port),
print the facade URL, serve until killed. The ClickHouse outage test SIGKILLs it and starts it
again on the same directory and port, like a database server crashing and coming back."""

from __future__ import annotations

import sys
import threading

from ragpulse.scorer.store import (
    FacadeSettings,
    SchemaSettings,
    build_facade,
    init_schema,
    open_store,
)


def main() -> None:
    path, database, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    client = open_store(f"chdb://{path}")
    init_schema(client, SchemaSettings(database=database))
    facade = build_facade(path, FacadeSettings(port=port, advertise=False))
    facade.start()
    print(facade.url, flush=True)
    threading.Event().wait()  # until SIGKILL or SIGTERM


if __name__ == "__main__":
    main()
