"""The worst-traces table (issue 42): faithfulness first, a row per unsupported statement with
the passage that came closest, hostile stored text cleaned and escaped, rows stored before the
``unsupported`` column existed still shown. Through ``ragpulse report`` on real chDB, over a
database migrated from schema version 6 with rows written by both writers."""

from __future__ import annotations

import html as htmllib
import re
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ragpulse.common.schema import SCORE_COLUMNS
from ragpulse.dashboards.queries import panels
from ragpulse.dashboards.report import TEXT_CELL_CHARS
from ragpulse.dashboards.settings import DashboardsSettings
from ragpulse.deploy.cli import _register, app
from ragpulse.scorer import Score, Unsupported
from ragpulse.scorer.store import (
    DEFAULT_EVIDENCE_CHARS,
    ScoredTraceMeta,
    columns_of,
    init_schema,
    rows_from_scores,
)

from .data import NOW, fixed_date_schema, write_score_rows

_register()
UNTIL = NOW.strftime("%Y-%m-%dT%H:%M:%SZ")
HOSTILE = Unsupported(
    statement="<script>alert('statement')</script> \x1b]8;;https://evil.example\x07click\x1b]8;;"
              "\x07 \u202etset \udcff" + " and more" * 200_000,
    context=2,
    passage="<img src=x onerror=alert(1)>\nThe Premium plan\tcosts 25 dollars.\x00",
    support=0.03)


def _meta(i: int, minutes_ago: float, **kw: Any) -> ScoredTraceMeta:
    return ScoredTraceMeta(trace_id=f"{0xBAD000 + i:032x}", ts=NOW - timedelta(minutes=minutes_ago),
                           service="shop", environment="prod", model="gpt-4o-mini",
                           prompt_version=kw.pop("prompt_version", "v2"), retriever_version="r1",
                           span_id=f"{i + 1:016x}", **kw)


def _faith(value: float, *unsupported: Unsupported) -> Score:
    return Score(metric="faithfulness", value=value, judge="model", model="faith-e5",
                 counts={"statements": 3, "supported": 3 - len(unsupported)},
                 explanation=f"expected share {value}", unsupported=unsupported)


@pytest.fixture(scope="module")
def worst_db(chdb_client: Any) -> Iterator[str]:
    name = f"rag_worst_{uuid.uuid4().hex[:8]}"
    settings = fixed_date_schema(name)
    init_schema(chdb_client, settings, target=6)
    # Rows a version-6 scorer wrote: faithfulness without statements, and many context
    # precision 0.0 rows (what the table showed before: 50 of those and no faithfulness).
    old = rows_from_scores([_faith(0.1)], _meta(0, 30, prompt_version="v1"))
    for i in range(60):
        old += rows_from_scores([Score(metric="context_precision", value=0.0, judge="model")],
                                _meta(100 + i, 20 + i / 10))
    cols = columns_of(old)
    keep = [i for i, c in enumerate(SCORE_COLUMNS) if c.name not in ("unsupported", "segments")]
    chdb_client.insert("scores", [cols[i] for i in keep], database=name,
                       column_names=[SCORE_COLUMNS[i].name for i in keep], column_oriented=True)
    init_schema(chdb_client, settings)  # migration 7: the column, and the view that shows it
    new = rows_from_scores([_faith(0.2, HOSTILE, Unsupported(
        "The plan includes a free laptop.", 1, "The Premium plan costs 25 dollars a month.",
        0.11))], _meta(1, 5))
    new += rows_from_scores([_faith(0.6, Unsupported("Refunds take 90 days.", -1, "", None))],
                            _meta(2, 4))
    new += rows_from_scores([_faith(0.95)], _meta(3, 3))
    write_score_rows(chdb_client, name, new)
    # A row that did not come through the row builder (another writer): an unbounded statement.
    raw = rows_from_scores([_faith(0.3)], _meta(4, 2))[0]._replace(
        unsupported=[("x" * 5000, 0, "y" * 5000, 0.2)])
    write_score_rows(chdb_client, name, [raw])
    yield name
    chdb_client.command(f"DROP DATABASE IF EXISTS `{name}` SYNC")


def _report(out: Path, chdb_dir: Path, database: str, *extra: str) -> str:
    res = CliRunner().invoke(app, ["report", "--since", "1h", "--until", UNTIL, "--out", str(out),
                                   "--clickhouse", f"chdb://{chdb_dir}", "--database", database,
                                   *extra])
    assert res.exit_code == 0, res.output
    return out.read_text(encoding="utf-8")


def _table(page: str) -> tuple[list[str], list[list[str]]]:
    m = re.search(r'data-panel="worst_traces">(.*?)</section>', page, re.S)
    assert m, "no worst-traces panel"
    panel = m.group(1)
    head = re.findall(r"<th>(.*?)</th>", panel)
    rows = [re.findall(r"<td[^>]*>(.*?)</td>", r, re.S)
            for r in re.findall(r"<tr>(<td.*?)</tr>", panel, re.S)]
    return head, rows


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory, chdb_dir: Path, worst_db: str) -> str:
    return _report(tmp_path_factory.mktemp("worst") / "r.html", chdb_dir, worst_db)


def test_faithfulness_first_with_each_unsupported_statement_and_its_passage(page: str) -> None:
    head, rows = _table(page)
    assert head[:10] == ["time", "trace_id", "service", "metric", "value",
                         "unsupported_statement", "p_supported", "passage", "closest_text",
                         "prompt_version"]
    col = {h: i for i, h in enumerate(head)}
    metrics = [r[col["metric"]] for r in rows]
    n_faith = metrics.count("faithfulness")
    assert metrics[:n_faith] == ["faithfulness"] * n_faith and n_faith == 6
    assert set(metrics[n_faith:]) == {"context_precision"} and len(rows) == 50
    faith = [(r[col["value"]], htmllib.unescape(r[col["unsupported_statement"]])[:20],
              r[col["p_supported"]], r[col["passage"]],
              htmllib.unescape(r[col["closest_text"]])[:20]) for r in rows[:n_faith]]
    assert faith == [
        ("0.1", "", "", "", ""),  # stored before the column existed: shown, without statements
        # one row per unsupported statement of a trace, lowest P(supported) first
        ("0.2", "<script>alert('state", "0.03", "3", "<img src=x onerror=a"),
        ("0.2", "The plan includes a ", "0.11", "2", "The Premium plan cos"),
        ("0.3", "x" * 20, "0.2", "1", "y" * 20),
        ("0.6", "Refunds take 90 days", "", "", ""),  # the judge named no passage
        ("0.95", "", "", "", ""),  # no unsupported statement
    ]



def test_hostile_text_is_cleaned_bounded_and_escaped(page: str) -> None:
    head, rows = _table(page)
    col = {h: i for i, h in enumerate(head)}
    hostile = next(r for r in rows if r[col["p_supported"]] == "0.03")
    statement, passage = hostile[col["unsupported_statement"]], hostile[col["closest_text"]]
    # Bounded when stored, so shown whole: the stored length, less the bidi override the
    # report drops, escaped.
    assert len(htmllib.unescape(statement)) == DEFAULT_EVIDENCE_CHARS - 1
    assert htmllib.unescape(statement).endswith("…")
    assert "<script" not in page and "<img" not in page and "onerror=alert(1)>" not in page
    assert "&lt;script&gt;" in statement and "&lt;img src=x onerror=alert(1)&gt;" in passage
    # No control character (ESC, BEL, NUL) and no bidi override reaches the page; the invalid
    # UTF-8 became U+FFFD (the page decodes as UTF-8); line breaks and tabs read as spaces.
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f\u202e]", page)
    assert "\ufffd" in statement and "tset" in statement
    assert "&gt; The Premium plan costs 25 dollars." in passage
    # A row another writer stored unbounded is cut in the report.
    raw = next(r for r in rows if r[col["p_supported"]] == "0.2")
    assert len(raw[col["unsupported_statement"]]) == TEXT_CELL_CHARS
    assert raw[col["unsupported_statement"]].endswith("…")


def test_trace_links_only_with_a_trace_url(tmp_path: Path, chdb_dir: Path, worst_db: str,
                                           page: str) -> None:
    assert "<a " not in _table(page)[1][0][1]
    linked = _report(tmp_path / "l.html", chdb_dir, worst_db,
                     "--trace-url", "https://jaeger.example/trace/{trace_id}")
    _, rows = _table(linked)
    assert rows[1][1] == (f'<a href="https://jaeger.example/trace/{0xBAD001:032x}">'
                          f"{0xBAD001:032x}</a>")


def test_the_panel_sql_names_the_alerted_metric_first() -> None:
    s = DashboardsSettings(metrics=("groundedness", "answer_relevancy"),
                           alerts={"faithfulness_metric": "groundedness"})
    sql = next(p for p in panels(s) if p.key == "worst_traces").sql
    assert "ORDER BY metric != 'groundedness', value ASC" in sql
    assert "LEFT ARRAY JOIN unsupported" in sql


def test_a_database_not_yet_migrated_says_how_to_migrate(tmp_path: Path, chdb_dir: Path,
                                                         chdb_client: Any) -> None:
    name = f"rag_v6_{uuid.uuid4().hex[:8]}"
    init_schema(chdb_client, fixed_date_schema(name), target=6)
    try:
        page = _report(tmp_path / "v6.html", chdb_dir, name)
    finally:
        chdb_client.command(f"DROP DATABASE IF EXISTS `{name}` SYNC")
    m = re.search(r'data-panel="worst_traces">.*?<p class="error">(.*?)</p>', page, re.S)
    assert m and "`ragpulse db init` migrates it" in m.group(1), m
