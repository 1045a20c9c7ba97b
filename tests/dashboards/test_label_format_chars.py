"""Labels and what ``status`` and ``report`` print hold no Unicode format or separator characters
(issue 38).

A service name with a bidi override (U+202E) prints reversed in a bidi terminal or a browser:
``"\\u202etset-pohs"`` reads "shop-test", so one service can pass for another; zero-width
characters and U+2028 hide or break text the same way. Labels were cleaned of control characters
only (round 5). Now the scorer's row builder drops categories Cf, Zl and Zp from every stored
label, and ``status`` and ``report`` drop them from every text they print (rows written before,
or by another writer, may hold them). Real rows on chDB, the real status renderer and report.
"""

from __future__ import annotations

import io
import unicodedata
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from rich.console import Console

from ragpulse.dashboards import build_report
from ragpulse.dashboards.settings import DashboardsSettings
from ragpulse.dashboards.status import collect_status, render_status
from ragpulse.scorer.store import SchemaSettings, init_schema, safe_label

from .data import labelled_rows, write_score_rows

# service as sent -> as stored and printed
SPOOFED = {
    "\u202etset-pohs": "tset-pohs",  # right-to-left override: "shop-test" on screen
    "pay\u200bments": "payments",  # zero-width space
    "check\u2028out": "checkout",  # line separator
    "\ufeffbilling\u2066x\u2069": "billingx",  # BOM, left-to-right isolate and its end
    "店舗\u200dA\u2029": "店舗A",  # zero-width joiner, paragraph separator
}
FORMAT = {"Cf", "Zl", "Zp"}


def _hidden(text: str) -> list[str]:
    return [f"U+{ord(ch):04X}" for ch in text if unicodedata.category(ch) in FORMAT]


@pytest.fixture
def database(chdb_client: Any) -> Iterator[str]:
    name = f"rag_bidi_{uuid.uuid4().hex[:8]}"
    init_schema(chdb_client, SchemaSettings(database=name))
    yield name
    chdb_client.command(f"DROP DATABASE IF EXISTS `{name}` SYNC")


def test_safe_label_drops_format_and_separator_characters() -> None:
    for sent, stored in SPOOFED.items():
        assert safe_label(sent) == stored
    assert safe_label("店舗\u3000A") == "店舗\u3000A"  # an ideographic space is a space: kept
    assert safe_label("a\x1b[2J\u202eb") == "a\ufffd[2Jb"


def test_stored_labels_hold_no_format_characters(chdb_client: Any, database: str) -> None:
    write_score_rows(chdb_client, database, labelled_rows(list(SPOOFED), 50, 0.9))
    stored = {r[0] for r in chdb_client.query(
        f"SELECT DISTINCT service FROM `{database}`.scores").result_rows}
    assert stored == set(SPOOFED.values())
    assert [s for s in stored if _hidden(s)] == []


def _status_text(client: Any, database: str) -> str:
    t1 = datetime.now(UTC) + timedelta(minutes=1)
    settings = DashboardsSettings(database=database)
    lines, results, errors = collect_status(client, settings, t1 - timedelta(hours=2), t1)
    assert any(r.firing for r in results)  # the alert table prints the labels too
    out = io.StringIO()
    render_status(Console(file=out, force_terminal=True, width=400, color_system="truecolor"),
                  lines, results, errors, title="t")
    return out.getvalue()


def test_status_and_report_print_no_format_characters(chdb_client: Any, database: str) -> None:
    """Rows written past the ingest cleaning, as an older scorer or another writer left them."""
    spoofed = list(SPOOFED)
    rows = [row._replace(service=spoofed[i % len(spoofed)])
            for i, row in enumerate(labelled_rows(["s"], 250, 0.1))]
    write_score_rows(chdb_client, database, rows)
    stored = {r[0] for r in chdb_client.query(
        f"SELECT DISTINCT service FROM `{database}`.scores").result_rows}
    assert stored == set(SPOOFED)  # the hostile names are in the table as sent
    text = _status_text(chdb_client, database)
    assert _hidden(text) == []
    for shown in SPOOFED.values():
        assert shown in text, shown
    t1 = datetime.now(UTC) + timedelta(minutes=1)
    html = build_report(chdb_client, DashboardsSettings(database=database),
                        t1 - timedelta(hours=2), t1)
    assert _hidden(html) == []
    assert "tset-pohs" in html and "payments" in html
