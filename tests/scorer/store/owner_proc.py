"""Run as a subprocess: own a chDB directory like ``ragpulse up`` does (schema + facade), print
the facade URL, and hold the directory until stdin closes."""

from __future__ import annotations

import sys

from ragpulse.scorer.store import (
    FacadeSettings,
    SchemaSettings,
    build_facade,
    init_schema,
    open_store,
)


def main() -> None:
    path, database = sys.argv[1], sys.argv[2]
    client = open_store(f"chdb://{path}")
    init_schema(client, SchemaSettings(database=database))
    facade = build_facade(path, FacadeSettings(advertise=True))
    facade.start()
    print(facade.url, flush=True)
    sys.stdin.read()  # until the test closes our stdin
    facade.shutdown()
    client.close()


if __name__ == "__main__":
    main()
