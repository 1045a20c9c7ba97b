"""`ragpulse report` and `ragpulse status` read right (issue 42, item 8), on data sets of 1, 2, 7
and 180 minutes and the generated day, written through the real writers into chDB."""

from __future__ import annotations

import random
import re
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ragpulse.deploy.cli import _register, app
from ragpulse.scorer import Interval, Score
from ragpulse.scorer.model import Cost
from ragpulse.scorer.store import PipelineHealthRow, ScoredTraceMeta, init_schema, rows_from_scores

from .data import NOW, fixed_date_schema, write_score_rows

_register()
UNTIL = NOW.strftime("%Y-%m-%dT%H:%M:%SZ")
METRICS = ("faithfulness", "answer_relevancy", "context_precision", "context_utilization",
           "context_relevance")
LENGTHS = (1, 2, 7, 180)  # minutes of data, ending at NOW


def _rows(minutes: int) -> tuple[list, list[PipelineHealthRow]]:
    """A trace every 10 s over the last ``minutes`` before NOW, scored by the fast judge (stored
    as ``local``, its old name); the 7-minute set's faithfulness is also scored by the LLM judge,
    so its chart has two judges' levels."""
    rng = random.Random(minutes)
    start = NOW - timedelta(minutes=minutes)
    rows: list = []
    for i in range(minutes * 6):
        t = start + timedelta(seconds=3 + 10 * i)
        scores = [Score(metric=m, value=round(rng.uniform(0.4, 0.95), 3), judge="local",
                        model="use", prompt_version="v1", interval=Interval(low=0.3, high=1.0),
                        cost=Cost(latency_ms=rng.uniform(20, 90))) for m in METRICS]
        judges = ["local", "llm"] if minutes == 7 else ["local"]
        meta = ScoredTraceMeta(trace_id=f"{minutes:04x}{i:028x}", ts=t, service="demo-rag",
                               environment="demo", model="m", prompt_version="p1",
                               retriever_version="r1", sampling_rate=1.0, span_id=f"{i + 1:016x}")
        rows += rows_from_scores(scores, meta, scored_at=t + timedelta(seconds=1))
        if "llm" in judges:
            llm = Score(metric="faithfulness", value=0.9, judge="llm", model="gpt-x",
                        prompt_version="v1", cost=Cost(llm_calls=1, prompt_tokens=500,
                                                       completion_tokens=40, latency_ms=800))
            rows += rows_from_scores([llm], ScoredTraceMeta(
                trace_id=f"{minutes:04x}{i:027x}f", ts=t, service="demo-rag", environment="demo",
                model="m", prompt_version="p1", retriever_version="r1", sampling_rate=1.0,
                span_id=f"{i + 1:015x}f"), scored_at=t + timedelta(seconds=1))
    health = [PipelineHealthRow(start + timedelta(minutes=m), "scorer", "host:1", name, "",
                                "counter", v, NOW)
              for m in range(minutes) for name, v in (("traces_assembled", 6.0),
                                                      ("traces_scored", 6.0))]
    return rows, health


@pytest.fixture(scope="module")
def dbs(chdb_client: Any) -> Iterator[dict[int, str]]:
    from ragpulse.scorer.store.writer import WriterSettings, build_pipeline_health_writer

    out = {}
    for minutes in LENGTHS:
        name = f"rag_len{minutes}_{uuid.uuid4().hex[:6]}"
        init_schema(chdb_client, fixed_date_schema(name))
        rows, health = _rows(minutes)
        write_score_rows(chdb_client, name, rows)
        hw = build_pipeline_health_writer(chdb_client, name, WriterSettings())
        hw.start()
        try:
            hw.write(health, timeout_s=60)
        finally:
            hw.shutdown()
        out[minutes] = name
    yield out
    for name in out.values():
        chdb_client.command(f"DROP DATABASE IF EXISTS `{name}` SYNC")


def _report(out: Path, chdb_dir: Path, database: str, since: str = "24h") -> str:
    res = CliRunner().invoke(app, ["report", "--since", since, "--until", UNTIL, "--out", str(out),
                                   "--clickhouse", f"chdb://{chdb_dir}", "--database", database])
    assert res.exit_code == 0, res.output
    return out.read_text(encoding="utf-8")


def _panel(html: str, key: str) -> str:
    m = re.search(rf'<section class="panel[^"]*" data-panel="{re.escape(key)}">(.*?)</section>',
                  html, re.S)
    assert m, key
    return m.group(1)


def _status(chdb_dir: Path, database: str, *args: str) -> Any:
    return CliRunner().invoke(app, ["status", "--clickhouse", f"chdb://{chdb_dir}",
                                    "--database", database, *args])


def _cells(out: str, first: str) -> list[str]:
    row = next(ln for ln in out.splitlines() if ln.lstrip("│ ").startswith(first))
    return [c.strip() for c in row.strip().strip("│").split("│")]


def test_status_trend_has_one_block_per_interval(chdb_dir: Path, dbs: dict[int, str]) -> None:
    """Item 8: two adjacent minutes drew as `▇    ▆   ` with --since 5m (24 slots for 5
    one-minute intervals): gaps that read as missing data."""
    res = _status(chdb_dir, dbs[2], "--since", "5m", "--until", UNTIL)
    assert res.exit_code == 0, res.output
    trend = _cells(res.output, "faithfulness")[7]
    assert re.fullmatch(r"[▁▂▃▄▅▆▇█]{2}", trend.strip()), repr(trend)
    # A day of data in one-hour steps: every hour has scores, so no gap anywhere.
    res = _status(chdb_dir, dbs[180], "--since", "3h", "--until", UNTIL)
    trend = _cells(res.output, "faithfulness")[7]
    assert re.fullmatch(r"[▁▂▃▄▅▆▇█]+", trend.strip()) and " " not in trend.strip(), repr(trend)


def test_status_headers_name_the_interval_without_data(chdb_dir: Path,
                                                        dbs: dict[int, str]) -> None:
    """Item 8: on an empty window the headers said "last interval" and "trend: 1h in interval
    steps"; `--since 1s` (shorter than the rollup's minute) did the same."""
    res = _status(chdb_dir, dbs[2], "--since", "1h", "--until", "2026-10-01T00:00:00Z")
    assert res.exit_code == 3, res.output  # no score for a day: the stalled rule fires
    flat = " ".join(res.output.split())
    assert "interval" not in flat, res.output
    assert "last 3m" in flat and "trend: 1h in 3m steps" in flat, res.output
    assert "whole pipeline: no score for more than 24 h" in flat, res.output
    short = _status(chdb_dir, dbs[2], "--since", "1s", "--until", UNTIL)
    assert short.exit_code == 2, short.output
    assert "--since" in short.output and "1m" in short.output, short.output


def test_firing_alerts_say_where_and_how_much(tmp_path: Path, chdb_dir: Path,
                                              filled_db: str) -> None:
    """Item 8: the status column "firing for" showed `pipeline`, not a duration, and the report
    showed the same alert as `all (49.7)` with no unit. Both now say where it fires and the
    value with its unit, in the same words."""
    res = _status(chdb_dir, filled_db, "--since", "24h", "--until", UNTIL)
    assert res.exit_code == 3, res.output
    flat = " ".join(res.output.replace("│", " ").split())  # cells wrapped over lines, joined
    assert "firing for" not in flat and "│ pipeline" not in res.output, res.output
    lag = "whole pipeline: consumer lag rising by 49.7 records/min"
    assert lag in flat, res.output
    assert "service=drop, judge=fast: -39.1% against the same hours of the previous 7 days" \
        in flat, res.output
    html = _report(tmp_path / "r.html", chdb_dir, filled_db)
    assert "<td>all (" not in html
    assert f"<td>{lag}</td>" in html
    stalled = _status(chdb_dir, filled_db, "--since", "24h", "--until", "2026-11-20T14:00:00Z")
    assert "whole pipeline: no score for 2 h" in " ".join(stalled.output.split()), \
        stalled.output
