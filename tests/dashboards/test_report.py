"""`ragpulse report` and `ragpulse status`: the report is one self-contained HTML file whose
charts are drawn (checked in headless Chromium and on its screenshot), status summarises per
metric; both read through the facade of the process that owns the chDB directory."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragpulse.dashboards.queries import panels
from ragpulse.deploy.cli import _register, app

from .data import NOW

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
UNTIL = NOW.strftime("%Y-%m-%dT%H:%M:%SZ")

_register()


@pytest.fixture(scope="module")
def report_html(tmp_path_factory: pytest.TempPathFactory, chdb_dir: Path, filled_db: str) -> Path:
    out = tmp_path_factory.mktemp("report") / "report.html"
    res = CliRunner().invoke(app, [
        "report", "--since", "24h", "--until", UNTIL, "--out", str(out),
        "--clickhouse", f"chdb://{chdb_dir}", "--database", filled_db,
        "--settings", str(_settings_file(out.parent))])
    assert res.exit_code == 0, res.output
    return out


def _settings_file(d: Path) -> Path:
    p = d / "settings.yaml"
    p.write_text("trace_url_template: https://jaeger.example/trace/{trace_id}\n"
                 "alerts: {null_rate_min_rows: 10}\n")
    return p


def test_report_is_self_contained_with_drawn_charts(report_html: Path, settings) -> None:
    html = report_html.read_text(encoding="utf-8")
    # No script, stylesheet, image or font fetched from anywhere: it opens offline.
    assert not re.search(r"<script|<link|<img|<iframe|@import|url\(|src=", html, re.IGNORECASE)
    assert "query failed" not in html
    # One section per panel, in dashboard order, each with a chart or a table.
    keys = re.findall(r'data-panel="([^"]+)"', html)
    assert keys == [p.key for p in panels(settings)]
    assert html.count('<svg class="chart"') == sum(p.kind in ("timeseries", "histogram")
                                                   for p in panels(settings))
    assert len(re.findall(r'<path class="series" d="M[\d.]+,[\d.]+ L', html)) > 30
    assert html.count('class="band"') >= 5 and html.count('class="samples"') > 100
    assert html.count('class="bar"') >= 5 * 20 and 'class="threshold"' in html
    assert html.count('href="https://jaeger.example/trace/') == settings.worst_traces_limit
    # The alert summary runs the rules.
    assert re.search(r'<tr class="firing"><td>firing</td><td>Faithfulness 10% below its baseline</td>'
                     r'<td>service=drop', html)
    assert '<tr class="ok"><td>ok</td><td>No scores for 15 minutes' in html
    # The faithfulness chart's red line is the level of the judge that scored the range (the
    # local judge's, from its measured distributions), not the general 0.7 no rule applies to.
    from ragpulse.dashboards.levels import FAITHFULNESS_LEVELS

    level = FAITHFULNESS_LEVELS["fast"]  # the rows say local, the fast judge's old name
    assert (f"The red line is {level:g}, the alert level of the fast judge, which scored this "
            "range: its rule fires when a service&#x27;s 60-min mean is below it with at least 20 "
            "samples.") in html
    faith = html[html.index('data-panel="quality_faithfulness"'):]
    faith = faith[:faith.index("</section>")]
    assert faith.count('class="threshold"') == 1


def test_report_renders_in_headless_chromium(report_html: Path, tmp_path: Path) -> None:
    if not CHROMIUM.exists():
        pytest.fail("headless Chromium is required at /usr/bin/chromium for this test: install "
                    "Debian's `chromium` package (`apt-get install -y chromium`; .ci/run does it)")
    from PIL import Image

    png = tmp_path / "report.png"
    res = subprocess.run(
        [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
         "--no-first-run", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={png}",
         "--window-size=1400,1800", "--hide-scrollbars", report_html.as_uri()],
        check=False, capture_output=True, text=True, timeout=120)
    assert png.exists() and png.stat().st_size > 10_000, res.stderr[-2000:]
    import numpy as np

    img = np.asarray(Image.open(io.BytesIO(png.read_bytes())).convert("RGB"), dtype=np.int32)
    assert img.shape == (1800, 1400, 3)
    var = float(img.var())
    assert var > 100, f"screenshot looks blank (pixel variance {var:.1f})"

    def near(c: tuple[int, int, int], tol: int = 40) -> int:
        return int((np.abs(img - np.array(c)).sum(axis=2) < tol).sum())

    # Chart ink, not just text: series lines and histogram bars in the palette's blue, the drop
    # series in orange, firing alert cells in red, sample-count bars in grey.
    assert near((0x32, 0x74, 0xD9)) > 5_000
    assert near((0xE0, 0x75, 0x2D)) > 500
    assert near((0xD4, 0x4A, 0x3A)) > 500
    assert near((0x8E, 0x9A, 0xA6)) > 2_000


def test_status_summarises_per_metric(chdb_dir: Path, filled_db: str, tmp_path: Path) -> None:
    res = CliRunner().invoke(app, [
        "status", "--since", "24h", "--until", UNTIL, "--clickhouse", f"chdb://{chdb_dir}",
        "--database", filled_db, "--settings", str(_settings_file(tmp_path))])
    assert res.exit_code == 3, res.output  # alerts are firing
    out = res.output
    line = next(ln for ln in out.splitlines() if "faithfulness" in ln and " drop " in ln)
    assert re.search(r"0\.5\d\d", line) and "drift" in line and re.search(r"[▁▂▃▄▅▆▇█]{10}", line)
    few = next(ln for ln in out.splitlines() if "faithfulness" in ln and " few " in ln)
    assert " ok " in few or few.rstrip().endswith("ok │")  # two samples: no alert
    assert "FIRING" in out and "Quality drift" in out
    quiet = CliRunner().invoke(app, [
        "status", "--since", "24h", "--until", (NOW - timedelta(hours=4)).isoformat(),
        "--clickhouse", f"chdb://{chdb_dir}", "--database", filled_db])
    assert "Faithfulness below 0.7" in quiet.output
    assert not re.search(r"FIRING.*Faithfulness below", quiet.output)


def test_report_and_status_follow_the_owner_of_the_chdb_directory(tmp_path: Path) -> None:
    """While `ragpulse up` (here: a process doing what it does) owns DATA_DIR/chdb, both commands
    read through its ClickHouse-HTTP facade."""
    data = tmp_path / "chdb"
    specs = tmp_path / "rows.json"
    specs.write_text(json.dumps([
        {"trace_id": f"{i + 1:032x}", "ts": (NOW - timedelta(minutes=40 - i)).isoformat(),
         "service": "owned", "environment": "prod", "metric": "faithfulness",
         "value": 0.9 if i % 2 else 0.8} for i in range(40)]))
    owner = subprocess.Popen(
        [sys.executable, str(REPO / "tests/scorer/store/owner_proc.py"), str(data), "rag",
         str(specs)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        url = owner.stdout.readline().strip()  # type: ignore[union-attr]
        assert url.startswith("http://127.0.0.1:"), url
        st = CliRunner().invoke(app, ["status", "--data-dir", str(tmp_path), "--since", "1h",
                                      "--until", UNTIL])
        assert st.exit_code == 0, st.output
        assert f"via {url}" in re.sub(r"\s+", " ", st.output)
        assert re.search(r"faithfulness\s*│\s*owned\s*│\s*0\.8[0-9]{2}", st.output), st.output
        out = tmp_path / "r.html"
        rep = CliRunner().invoke(app, ["report", "--data-dir", str(tmp_path), "--since", "1h",
                                       "--until", UNTIL, "--out", str(out)])
        assert rep.exit_code == 0, rep.output
        assert '<path class="series"' in out.read_text() and "owned" in out.read_text()
    finally:
        owner.stdin.close()  # type: ignore[union-attr]
        owner.wait(60)
    assert owner.returncode == 0


def test_bad_range_is_a_clear_error(chdb_dir: Path, filled_db: str) -> None:
    res = CliRunner().invoke(app, ["status", "--since", "yesterday", "--clickhouse",
                                   f"chdb://{chdb_dir}", "--database", filled_db])
    assert res.exit_code == 2 and "--since" in res.output


def test_missing_schema_is_a_clear_error(chdb_dir: Path, tmp_path: Path) -> None:
    for cmd in (["status"], ["report", "--out", str(tmp_path / "r.html")]):
        res = CliRunner().invoke(app, [*cmd, "--clickhouse", f"chdb://{chdb_dir}",
                                       "--database", "rag_does_not_exist"])
        assert res.exit_code == 1 and "has no ragpulse schema" in res.output, res.output
    assert not (tmp_path / "r.html").exists()


def test_report_into_a_directory_and_no_stray_temp_file(chdb_dir: Path, filled_db: str,
                                                         tmp_path: Path) -> None:
    """`--out DIR` wrote DIR.tmp, failed to rename it onto the directory and left it behind."""
    base = ["report", "--since", "24h", "--until", UNTIL, "--clickhouse", f"chdb://{chdb_dir}",
            "--database", filled_db]
    into = tmp_path / "reports"
    into.mkdir()
    res = CliRunner().invoke(app, [*base, "--out", str(into)])
    assert res.exit_code == 0, res.output
    assert [p.name for p in into.iterdir()] == ["report.html"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["reports"]  # no reports.tmp
    # A write that fails (the parent is a file: even root cannot) says so and leaves nothing.
    (tmp_path / "afile").write_text("x")
    res = CliRunner().invoke(app, [*base, "--out", str(tmp_path / "afile" / "r.html")])
    assert res.exit_code == 1 and "cannot write" in res.output, res.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile", "reports"]


def test_report_never_writes_through_a_planted_temp_symlink(chdb_dir: Path, filled_db: str,
                                                            tmp_path: Path) -> None:
    """The temp file had a fixed name (report.html.tmp) and was opened following symlinks: in a
    shared directory another user's `report.html.tmp -> victim` made `report` overwrite the
    victim. A path ending in / wrote a file of that name instead of DIR/report.html."""
    import os
    import stat

    base = ["report", "--since", "24h", "--until", UNTIL, "--clickhouse", f"chdb://{chdb_dir}",
            "--database", filled_db]
    shared = tmp_path / "shared"
    shared.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    (shared / "report.html.tmp").symlink_to(victim)
    res = CliRunner().invoke(app, [*base, "--out", str(shared / "report.html")])
    assert res.exit_code == 0, res.output
    assert victim.read_text() == "keep me"
    out = shared / "report.html"
    assert not out.is_symlink() and "<html" in out.read_text(encoding="utf-8").lower()
    assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~_umask()
    assert sorted(p.name for p in shared.iterdir()) == ["report.html", "report.html.tmp"]
    # a directory named with a trailing slash that does not exist yet
    res = CliRunner().invoke(app, [*base, "--out", str(tmp_path / "new") + os.sep])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "new").is_dir() and [p.name for p in (tmp_path / "new").iterdir()] == ["report.html"]


def _umask() -> int:
    import os

    mask = os.umask(0)
    os.umask(mask)
    return mask
