"""Run as a subprocess: own a chDB directory like ``ragpulse up`` does (schema + read-only
facade), print the facade URL, and hold the directory until stdin closes.

``owner_proc.py PATH DATABASE [ROWS.json]``: ROWS.json, if given, is a list of
``{"trace_id", "ts" (ISO), "service", "environment", "metric", "value"}`` (and optionally
``"prompt_version"``) written as scores
before the facade starts (the facade takes no writes, as in ``ragpulse up``, where the scorer
writes in process).
"""

from __future__ import annotations

import json
import sys
from datetime import datetime

from ragpulse.deploy.facade import FacadeSettings, build_facade
from ragpulse.scorer.model import Score
from ragpulse.scorer.store import (
    SchemaSettings,
    ScoredTraceMeta,
    ScoreWriter,
    init_schema,
    open_store,
    rows_from_scores,
)


def main() -> None:
    path, database = sys.argv[1], sys.argv[2]
    client = open_store(f"chdb://{path}")
    init_schema(client, SchemaSettings(database=database))
    if len(sys.argv) > 3:
        with open(sys.argv[3], encoding="utf-8") as f:
            specs = json.load(f)
        rows = []
        for r in specs:
            ts = datetime.fromisoformat(r["ts"])
            meta = ScoredTraceMeta(trace_id=r["trace_id"], ts=ts, service=r["service"],
                                   environment=r["environment"],
                                   prompt_version=r.get("prompt_version", ""))
            rows += rows_from_scores([Score(metric=r["metric"], value=r["value"], judge="local")],
                                     meta, scored_at=ts)
        writer = ScoreWriter(client, database)
        writer.start()
        writer.write(rows, timeout_s=60)
        writer.shutdown()
    facade = build_facade(path, FacadeSettings(database=database, advertise=True))
    facade.start()
    print(facade.url, flush=True)
    sys.stdin.read()  # until the test closes our stdin
    facade.shutdown()
    client.close()


if __name__ == "__main__":
    main()
