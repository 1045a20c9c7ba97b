"""`ragpulse status` prints service names from spans: text, never rich markup.

A span's ``service.name`` reaches the ``service`` column unchanged (``safe_text`` keeps
brackets). As markup, ``[/]x`` crashed the command (MarkupError, exit 1 instead of 3 while an
alert fires) and ``[link=...]`` hid a terminal hyperlink in an innocent-looking name."""

from __future__ import annotations

import io
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from rich.console import Console

from ragpulse.dashboards.settings import DashboardsSettings
from ragpulse.dashboards.status import collect_status, render_status
from ragpulse.scorer.store import SchemaSettings, init_schema

from .data import labelled_rows, write_score_rows

HOSTILE = ["[/]evil", "shop[link=https://evil.example]login[/link]", "[bold red]FIRING[/]"]
# Round 5: rich's escape leaves ESC alone; these reached the terminal as real escapes
TERMINAL = ["\x1b]8;;https://evil.example/\x1b\\login-here\x1b]8;;\x1b\\", "\x1b[2J\x1b[Hclear",
            "\x1b]0;title\x1b\\"]


@pytest.fixture
def hostile_db(chdb_client):
    name = f"rag_hostile_{uuid.uuid4().hex[:8]}"
    init_schema(chdb_client, SchemaSettings(database=name))
    # 80 a service in the last 80 minutes: enough rows for the rules
    write_score_rows(chdb_client, name, labelled_rows(HOSTILE, 240, 0.1))
    yield name
    chdb_client.command(f"DROP DATABASE IF EXISTS `{name}` SYNC")


def test_hostile_service_names_print_as_text(chdb_client, hostile_db):
    settings = DashboardsSettings(database=hostile_db)
    t1 = datetime.now(UTC) + timedelta(minutes=1)
    lines, results, errors = collect_status(chdb_client, settings, t1 - timedelta(hours=2), t1)
    assert {m.service for m in lines} == set(HOSTILE)
    assert any(r.firing for r in results)  # faithfulness at 0.1: the label names the service
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=400, color_system="truecolor")
    render_status(console, lines, results, errors, title="t")
    text = out.getvalue()
    assert "\x1b]8;" not in text  # no hidden hyperlink
    plain = Console(file=io.StringIO(), width=400)
    render_status(plain, lines, results, errors, title="t")
    printed = plain.file.getvalue()
    for name in HOSTILE:
        assert name in printed, name


def test_terminal_escapes_in_stored_labels_never_reach_the_terminal(chdb_client):
    """Rows written before labels were cleaned at ingest (or by another writer) may hold ESC:
    status prints a replacement character, not the escape sequence."""
    name = f"rag_term_{uuid.uuid4().hex[:8]}"
    init_schema(chdb_client, SchemaSettings(database=name))
    try:
        # written as they are, past the ingest cleaning (rows_from_scores now replaces ESC)
        rows = [row._replace(service=TERMINAL[i % len(TERMINAL)])
                for i, row in enumerate(labelled_rows(["s"], 90, 0.1))]
        write_score_rows(chdb_client, name, rows)
        settings = DashboardsSettings(database=name)
        t1 = datetime.now(UTC) + timedelta(minutes=1)
        lines, results, errors = collect_status(chdb_client, settings, t1 - timedelta(hours=2), t1)
        assert {m.service for m in lines} == set(TERMINAL)
        out = io.StringIO()
        render_status(Console(file=out, force_terminal=True, width=400, color_system="truecolor"),
                      lines, results, errors, title="t")
        text = out.getvalue()
        assert "\x1b]" not in text and "\x1b[2J" not in text and "\x1b[H" not in text
        assert "\ufffd]8;;https://evil.example/" in text
    finally:
        chdb_client.command(f"DROP DATABASE IF EXISTS `{name}` SYNC")
