"""Which segment drove a drop (issue 42, item 1): the decomposition's SQL on chDB over traffic
stored through the real ScoreWriter (``why_data``: prompt v2 turns unfaithful while faq-ja only
grows), the panel, the report section, ``ragpulse status --why`` directly and through the facade
of the process that owns the chDB directory, and the demo's own story."""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ragpulse.dashboards.frames import context, run_panel
from ragpulse.dashboards.queries import panels
from ragpulse.dashboards.report import build_report
from ragpulse.dashboards.settings import DashboardsSettings, WhySettings
from ragpulse.dashboards.why import WhyResult, explain_change, result_from_frame, why_windows
from ragpulse.deploy.cli import _register, app
from ragpulse.deploy.demo import SERVICES, plan_scenario
from ragpulse.scorer.store import init_schema

from .data import fixed_date_schema, write_score_rows
from .why_data import END, MID, START, route_rows, why_rows

REPO = Path(__file__).resolve().parents[2]

_register()


def _scores_db(client: Any, prefix: str, rows: list) -> Iterator[str]:
    """A database of its own holding ``rows``, dropped afterwards."""
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    init_schema(client, fixed_date_schema(name))
    write_score_rows(client, name, rows)
    yield name
    client.command(f"DROP DATABASE IF EXISTS `{name}` SYNC")


@pytest.fixture(scope="module")
def why_db(chdb_client: Any) -> Iterator[str]:
    yield from _scores_db(chdb_client, "rag_why", why_rows())


def _explain(client: Any, database: str, **why: Any) -> WhyResult:
    s = DashboardsSettings(database=database, why=WhySettings(**why))
    return explain_change(client, s, "faithfulness", (START, MID), (MID, END))


def _seg(r: WhyResult, dimension: str, segment: str):
    return next(x for x in r.segments if (x.dimension, x.segment) == (dimension, segment))


def test_the_prompt_version_that_turned_is_named_first(chdb_client: Any, why_db: str) -> None:
    r = _explain(chdb_client, why_db)
    assert r.error is None
    o = r.overall
    assert o is not None and o.n_baseline == 600 + 3 and o.n_now == 600 + 3
    assert r.significant and o.contribution < -0.05
    top = r.first
    assert top is not None and (top.dimension, top.segment) == ("prompt_version", "v2")
    assert top.rank == 1 and r.sure(top) and top.what == "got worse"
    assert top.rate_share > 0.5 and abs(top.mix_share) < 0.1
    # the services v2 runs in share its drop, each less of it and less surely
    for svc in ("support-bot", "docs-search"):
        assert _seg(r, "service", svc).share < top.share
    assert "First: prompt_version = v2" in r.summary()


def test_the_growing_segment_gets_a_mix_share_not_a_rate_share(chdb_client: Any,
                                                               why_db: str) -> None:
    r = _explain(chdb_client, why_db)
    faq = _seg(r, "service", "faq-ja")
    assert faq.traffic_baseline < 0.4 < 0.45 < faq.traffic_now
    assert faq.mix < 0 and faq.mix_share > 0.05  # it scores below the average and grew
    assert faq.rate_low <= 0 <= faq.rate_high and not faq.rate_certain
    assert abs(faq.mix) > abs(faq.rate) and faq.what == "more traffic"
    # its own prompt version tells the same
    assert _seg(r, "prompt_version", "ja-v1").what == "more traffic"


def test_rates_and_mixes_of_each_dimension_add_up_to_the_change(chdb_client: Any,
                                                                why_db: str) -> None:
    r = _explain(chdb_client, why_db, limit=1000)
    o = r.overall
    assert o is not None
    dims = {s.dimension for s in r.segments}
    # environment has one value: it explains nothing and is left out
    assert dims == {"service", "model", "prompt_version", "retriever_version"}
    for d in dims:
        segs = [s for s in r.segments if s.dimension == d]
        assert sum(s.rate + s.mix for s in segs) == pytest.approx(o.contribution, abs=1e-3), d
        assert sum(s.share for s in segs) == pytest.approx(1.0, abs=1e-2), d
        for s in segs:
            assert s.rate + s.mix == pytest.approx(s.contribution, abs=1e-4)
            assert s.low <= s.contribution <= s.high


def test_a_segment_of_three_traces_does_not_top_the_list(chdb_client: Any, why_db: str) -> None:
    r = _explain(chdb_client, why_db, limit=1000)
    tiny = _seg(r, "model", "tiny-llm")
    # its own mean fell the most of any segment: a ranking by the segment's change would put it
    # first
    assert tiny.mean_baseline is not None and tiny.mean_now is not None
    fall = tiny.mean_now - tiny.mean_baseline
    assert fall < -0.9
    assert all(fall < (s.mean_now or 0) - (s.mean_baseline or 0) for s in r.segments
               if s is not tiny and s.n_baseline and s.n_now)
    # under the minimum count: not ranked, after every ranked segment
    assert not tiny.ranked
    ranked = [s.rank for s in r.segments if s.ranked]
    assert ranked and tiny.rank > max(ranked)
    # and with the minimum lowered to 2, its contribution (its 3-in-603 share of the traffic)
    # still puts it far from the top
    low = _explain(chdb_client, why_db, min_samples=2, limit=1000)
    tiny = _seg(low, "model", "tiny-llm")
    assert tiny.ranked and low.first is not None and low.first.segment == "v2"
    assert tiny.rank > 5 and abs(tiny.share) < 0.1


def test_windows_default_to_the_window_before_now() -> None:
    five = timedelta(minutes=5)
    assert why_windows(END, five) == ((END - 2 * five, END - five), (END - five, END))
    assert why_windows(END, five, timedelta(hours=1)) == (
        (END - five - timedelta(hours=1), END - five), (END - five, END))


def test_no_scores_in_a_window_is_said(chdb_client: Any, why_db: str) -> None:
    s = DashboardsSettings(database=why_db)
    hour = timedelta(hours=1)
    r = explain_change(chdb_client, s, "faithfulness", (START - 2 * hour, START - hour),
                       (START - hour, START - timedelta(seconds=1)))
    assert r.error is None and r.overall is None and not r.segments
    assert "the baseline has 0 scores and now has 0" in r.summary()
    # scores in one window only: the overall row counts them, no segment is listed
    r = explain_change(chdb_client, s, "faithfulness", (START - hour, START),
                       (START, START + timedelta(minutes=1)))
    assert r.overall is not None and (r.overall.n_baseline, r.overall.n_now) == (0, 121)
    assert not r.segments and "both windows need scores" in r.summary()
    with pytest.raises(ValueError, match="metric name"):
        explain_change(chdb_client, s, "x'; DROP", (START, MID), (MID, END))
    with pytest.raises(ValueError, match="must end before"):
        explain_change(chdb_client, s, "faithfulness", (MID, END), (START, MID))


def test_the_panel_sql_names_the_version_first(chdb_client: Any, why_db: str) -> None:
    """The dashboard's panel (Grafana's SQL, macros expanded as the plugin does) compares the
    two halves of the time range: here the same windows as above."""
    s = DashboardsSettings(database=why_db)
    panel = next(p for p in panels(s) if p.key == "why_faithfulness")
    frame = run_panel(chdb_client, panel, context(START, END))
    assert frame.error is None, frame.error
    assert frame.columns[:3] == ["rank", "dimension", "segment"]
    assert [r[1] for r in frame.rows[:2]] == ["all", "prompt_version"]
    assert frame.rows[1][2] == "v2"
    r = result_from_frame(frame, s, START, END)
    assert r.baseline == (START, MID) and r.now == (MID, END)
    assert r.first is not None and r.first.segment == "v2"
    # a drill-down selection narrows it: within faq-ja nothing got surely worse
    sel = context(START, END, selection={"service": ["faq-ja"]})
    narrowed = result_from_frame(run_panel(chdb_client, panel, sel), s, START, END)
    assert narrowed.overall is not None and narrowed.overall.n_now < 400
    assert not any(x.dimension == "service" for x in narrowed.segments)


def test_the_report_section_names_the_version_first(chdb_client: Any, why_db: str) -> None:
    s = DashboardsSettings(database=why_db)
    html = build_report(chdb_client, s, END - timedelta(hours=24), END)
    section = re.search(r'<section class="panel wide" data-panel="why_faithfulness">.*?</section>',
                        html, re.S)
    assert section is not None
    text = section.group(0)
    assert "First: prompt_version = v2" in text
    first = re.search(r'<tr class="first">(.*?)</tr>', text)
    assert first is not None and "prompt_version = v2" in first.group(1)
    assert "got worse" in first.group(1)
    assert re.search(r"<tr><td>\d+</td><td>service = faq-ja</td>.*?more traffic", text)
    assert '<tr class="unranked">' in text and "model = tiny-llm" in text


def test_status_why_names_the_version_first(chdb_dir: Path, why_db: str) -> None:
    res = CliRunner().invoke(app, [
        "status", "--why", "faithfulness", "--until", END.isoformat(), "--now", "5m",
        "--clickhouse", f"chdb://{chdb_dir}", "--database", why_db])
    assert res.exit_code == 0, res.output
    out = res.output
    flat = re.sub(r"\s+", " ", out)  # the summary wraps at the console's width
    assert "faithfulness fell by" in flat and "11:50–11:55 against 11:55–12:00 UTC" in flat
    rows = [ln for ln in out.splitlines() if re.match(r"│\s+\d+\s+│", ln)]
    assert "prompt_version = v2" in rows[0] and "got worse" in rows[0]
    faq = next(ln for ln in rows if "service = faq-ja" in ln)
    assert "more traffic" in faq
    assert any("model = tiny-llm" in ln and "│  – │" in ln for ln in out.splitlines())
    # a baseline of another length, and a service selection
    res = CliRunner().invoke(app, [
        "status", "--why", "faithfulness", "--until", END.isoformat(), "--now", "5m",
        "--baseline", "2m", "--service", "faq-ja",
        "--clickhouse", f"chdb://{chdb_dir}", "--database", why_db])
    assert res.exit_code == 0, res.output
    assert "11:53–11:55 against 11:55–12:00 UTC" in re.sub(r"\s+", " ", res.output)
    assert "service =" not in res.output


@pytest.fixture(scope="module")
def route_db(chdb_client: Any) -> Iterator[str]:
    yield from _scores_db(chdb_client, "rag_why_routes", route_rows())


def test_status_why_names_the_route_that_turned_first(chdb_dir: Path, route_db: str,
                                                      chdb_client: Any) -> None:
    """Span attributes the scorer stores as segments rank like the built-in dimensions."""
    res = CliRunner().invoke(app, [
        "status", "--why", "faithfulness", "--until", END.isoformat(), "--now", "5m",
        "--clickhouse", f"chdb://{chdb_dir}", "--database", route_db])
    assert res.exit_code == 0, res.output
    rows = [ln for ln in res.output.splitlines() if re.match(r"│\s+\d+\s+│", ln)]
    assert "http.route = /v1/search" in rows[0] and "got worse" in rows[0]
    assert "more traffic" in next(ln for ln in rows if "http.route = /v1/faq" in ln)
    # the panel's SQL (the report's too) reads the same dimensions
    s = DashboardsSettings(database=route_db)
    panel = next(p for p in panels(s) if p.key == "why_faithfulness")
    frame = run_panel(chdb_client, panel, context(START, END))
    assert frame.error is None, frame.error
    assert [tuple(r[1:3]) for r in frame.rows[:2]] == [("all", ""), ("http.route", "/v1/search")]
    dims = {r[1] for r in frame.rows}
    assert {"language", "app.doc_source"} <= dims and "prompt_version" not in dims


@pytest.mark.parametrize("args, message", [
    (["--now", "soon"], "--now/--baseline"),
    (["--baseline", "30s"], "shorter than 1m"),
    (["--why", "bad name!"], "metric name"),
])
def test_status_why_errors(chdb_dir: Path, why_db: str, args: list[str], message: str) -> None:
    base = ["status", "--why", "faithfulness", "--clickhouse", f"chdb://{chdb_dir}",
            "--database", why_db]
    res = CliRunner().invoke(app, base + args)
    assert res.exit_code == 2 and message in res.output, res.output


def test_status_why_through_the_facade_of_the_owner(tmp_path: Path) -> None:
    """While `ragpulse up` owns DATA_DIR/chdb, `status --why` reads through its read-only
    ClickHouse-HTTP facade: the query passes its SQL guard."""
    rng = random.Random(3)
    specs = []
    for i in range(600):
        ts = END - timedelta(minutes=10) + timedelta(seconds=i)
        prompt = ("v1", "v2")[i % 2]
        bad = prompt == "v2" and ts >= MID and rng.random() < 0.5
        specs.append({"trace_id": f"{i + 1:032x}", "ts": ts.isoformat(), "service": "owned",
                      "environment": "prod", "metric": "faithfulness",
                      "prompt_version": prompt,
                      "value": round(rng.uniform(0.0, 0.2) if bad else rng.uniform(0.8, 1.0), 3)})
    rows = tmp_path / "rows.json"
    rows.write_text(json.dumps(specs))
    owner = subprocess.Popen(
        [sys.executable, str(REPO / "tests/scorer/store/owner_proc.py"), str(tmp_path / "chdb"),
         "rag", str(rows)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        url = owner.stdout.readline().strip()  # type: ignore[union-attr]
        assert url.startswith("http://127.0.0.1:"), url
        res = CliRunner().invoke(app, ["status", "--why", "faithfulness", "--data-dir",
                                       str(tmp_path), "--until", END.isoformat()])
        assert res.exit_code == 0, res.output
        assert f"via {url}" in re.sub(r"\s+", " ", res.output)
        assert "First: prompt_version = v2" in re.sub(r"\s+", " ", res.output), res.output
    finally:
        owner.stdin.close()  # type: ignore[union-attr]
        owner.wait(60)
    assert owner.returncode == 0


def test_the_demo_story() -> None:
    """The demo's own plan: before the turn every prompt answers alike and the services share
    the traffic equally; after it prompt v2 hallucinates far more and faq-ja has half of the
    traffic, its answers unchanged (bench/why_demo.py measures how reliably `status --why`
    tells it on judged traffic: docs/benchmarks.md)."""
    rng = random.Random(7)
    before = [plan_scenario(rng, turned=False) for _ in range(4000)]
    after = [plan_scenario(rng, turned=True) for _ in range(4000)]

    def share(plans: list, **kw: str) -> float:
        return sum(all(getattr(p, k) == v for k, v in kw.items()) for p in plans) / len(plans)

    def halluc(plans: list, **kw: str) -> float:
        sel = [p for p in plans if all(getattr(p, k) == v for k, v in kw.items())]
        return sum(p.kind == "hallucinated" for p in sel) / len(sel)

    assert {p.service for p in before} == {s[0] for s in SERVICES}
    assert share(before, service="faq-ja") == pytest.approx(1 / 3, abs=0.03)
    assert share(after, service="faq-ja") == pytest.approx(1 / 2, abs=0.03)
    assert halluc(before, prompt_version="v2") == pytest.approx(halluc(before, prompt_version="v1"), abs=0.03)
    assert halluc(after, prompt_version="v2") > halluc(after, prompt_version="v1") + 0.25
    assert halluc(after, service="faq-ja") == pytest.approx(halluc(before, service="faq-ja"), abs=0.03)
    assert {p.prompt_version for p in before if p.service == "faq-ja"} == {"ja-v1"}


def test_segment_names_are_text_in_the_terminal_and_the_report() -> None:
    """A service called ``[/]x`` or holding an escape sequence prints as text, never as rich
    markup or a terminal control; in HTML it is escaped."""
    import io

    from rich.console import Console

    from ragpulse.dashboards.why import SegmentChange, render_why, why_html

    def seg(rank: int, dimension: str, segment: str, contribution: float) -> SegmentChange:
        return SegmentChange(rank, dimension, segment, 1.0, 1.0, 0.0, contribution,
                             contribution - 0.01, contribution + 0.01, contribution,
                             contribution - 0.01, contribution + 0.01, 0.0, 50, 50, 0.8,
                             0.8 + contribution, 1.0 if dimension == "all" else 0.5,
                             1.0 if dimension == "all" else 0.5, True)

    r = WhyResult("faithfulness", (START, MID), (MID, END), overall=seg(0, "all", "", -0.1),
                  segments=[seg(1, "service", "[/]x\x1b]8;;http://evil\x1b\\<b>", -0.1)])
    out = io.StringIO()
    render_why(Console(file=out, width=200, force_terminal=False), r, "t")
    text = out.getvalue()
    assert "service = [/]x" in text and "\x1b" not in text
    assert "First: service = [/]x" in re.sub(r"\s+", " ", text)
    html = why_html(r)
    assert "&lt;b&gt;" in html and "<b>" not in html
