"""Issue 42 item 10: every measured figure README.md and docs/ state is quoted from the table a
bench wrote in docs/benchmarks.md (``<!-- fig SOURCE; ROW; COLUMN -->VALUE<!-- /fig -->``,
bench/figures.py), so the pages cannot contradict each other or the tables: a quote retyped by
hand that drifts from its table fails here, and so does a measured figure typed without a quote
into README.md or any page of docs/ but the generated tables (benchmarks.md) and the metric
definitions' worked examples (metrics.md). The dated histories under docs/history/ keep the
figures of their day as typed, and so do the sections of a page that say they are dated records."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from bench import figures
from ragpulse.scorer.judges.registry import FAITHFULNESS_LEVELS, JUDGE_NAMES, SAMPLES_PER_S

REPO = Path(__file__).resolve().parents[1]


def test_every_quoted_figure_agrees_with_its_table() -> None:
    assert figures.check(REPO) == []
    readme = figures.quotes(REPO / "README.md")
    # the first screen quotes the default judge's quality and speed (issue 39 item 6)
    addressed = {(q.source, q.row, q.column) for q in readme}
    assert ("bench/judge_speed.py", ("model",), "2 free cores (est.)") in addressed
    assert ("blend_faithfulness.py", ("dev",), "judge (LODO)") in addressed
    assert len(readme) >= 10


def _copy(tmp_path: Path) -> Path:
    (tmp_path / "docs").mkdir()
    shutil.copy(REPO / "README.md", tmp_path / "README.md")
    for page in (REPO / "docs").glob("*.md"):
        shutil.copy(page, tmp_path / "docs" / page.name)
    return tmp_path


def test_a_retyped_figure_that_drifts_fails_and_write_restores_it(tmp_path) -> None:
    repo = _copy(tmp_path)
    readme = repo / "README.md"
    text = readme.read_text(encoding="utf-8")
    q = figures.quotes(readme)[0]
    drifted = text.replace(f"-->{q.value}<!-- /fig -->", "-->0.999<!-- /fig -->", 1)
    readme.write_text(drifted, encoding="utf-8")
    problems = figures.check(repo)
    assert len(problems) == 1 and problems[0].startswith("README.md:") and "0.999" in problems[0]
    assert figures.write(repo) == []
    assert figures.check(repo) == [] and readme.read_text(encoding="utf-8") == text


def test_a_table_a_bench_rewrites_moves_every_quote_of_it(tmp_path) -> None:
    repo = _copy(tmp_path)
    bench_page = repo / "docs" / "benchmarks.md"
    text = bench_page.read_text(encoding="utf-8")
    old = figures.resolve("bench/judge_speed.py", ("model",), "2 free cores (est.)", text)
    row = next(ln for ln in text.splitlines() if ln.startswith("| model | 3 x 60 |"))
    bench_page.write_text(text.replace(row, row.replace(f"| {old} |", "| 7.1 |", 1)), encoding="utf-8")
    stale = figures.check(repo)
    assert stale and all("7.1" in p for p in stale), stale
    assert figures.write(repo) == []
    assert "-->7.1<!-- /fig --> typical" in (repo / "README.md").read_text(encoding="utf-8")


def test_unresolvable_and_malformed_quotes_are_reported(tmp_path) -> None:
    repo = _copy(tmp_path)
    readme = repo / "README.md"
    readme.write_text(readme.read_text(encoding="utf-8")
                      + "\n<!-- fig bench/judge_speed.py; no-such-judge; samples/s -->1<!-- /fig -->\n",
                      encoding="utf-8")
    assert any("no row 'no-such-judge'" in p for p in figures.check(repo))
    readme.write_text("<!-- fig bench/judge_speed.py; model -->1<!-- /fig -->\n", encoding="utf-8")
    with pytest.raises(ValueError, match="SOURCE; ROW; COLUMN"):
        figures.check(repo)


def test_rows_written_with_old_judge_names_match_the_new_names() -> None:
    """A table a bench wrote before the rename (``local``, ``local-model``) still answers a quote
    that names the judge by its new name (``fast``, ``model``), and the other way round."""
    text = ("<!-- bench/x.py -->\n| judge | set | mean |\n|---|---|---|\n"
            "| local-model | dev | 0.604 |\n| local | dev | 0.498 |\n<!-- bench/x.py -->\n")
    assert figures.resolve("bench/x.py", ("model", "dev"), "mean", text) == "0.604"
    assert figures.resolve("bench/x.py", ("fast", "dev"), "mean", text) == "0.498"
    assert figures.resolve("bench/x.py", ("local-model", "dev"), "mean", text) == "0.604"
    with pytest.raises(KeyError, match="no row"):
        figures.resolve("bench/x.py", ("nli", "dev"), "mean", text)


def test_the_constants_benches_write_agree_with_their_tables() -> None:
    """registry.py's SAMPLES_PER_S and FAITHFULNESS_LEVELS are the figures of the tables the same
    benches wrote (judge_speed's 2-core estimate, the distributions' alert level X)."""
    text = (REPO / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    for judge in ("model", "fast"):
        assert judge in JUDGE_NAMES
        est = figures.resolve("bench/judge_speed.py", (judge,), "2 free cores (est.)", text)
        assert SAMPLES_PER_S[judge] == float(est), judge
        level = figures.resolve("bench/faithfulness_distributions.py", (judge,), "X", text)
        assert FAITHFULNESS_LEVELS[judge] == float(level), judge


# Pages and parts of pages where no measured figure may be typed without a quote, with the
# decimals allowed there: versions, settings, protocol numbers and example values (not
# measurements), and figures no bench writes a table for, each said so on the page.
GUARDED = {
    "README.md": (None, None, {"3.11"}),
    # the whole user page (its dated history is docs/history/judges.md): the multi-passage sets'
    # figures recorded by hand (the page says so), licence and model versions, a paper's number
    # (and evidence_cut's settings 0.7, and 0.9 until 2026-11-30)
    "docs/judges.md": (None, None, {"0.817", "0.639", "0.758", "0.756", "0.647", "0.677",
                                    "0.9", "0.7", "0.588", "2.0", "2.1", "2404.10774"}),
    # the fast judge's detector's user page (its notebook is docs/history/local-faithfulness.md)
    "docs/local-faithfulness.md": (None, None, set()),
    # the training data's user page (its notebook is docs/history/faithfulness-data.md): licence
    # and data set versions only
    "docs/faithfulness-data.md": (None, None, {"1.0", "2.0", "3.0", "4.0"}),
    "docs/architecture.md": (None, None, set()),
    # outside its dated hostile-testing rounds (DATED): the durable minimum free space (a
    # setting) and the error message and tmpfs run of the day the check was added, a judged
    # score in an example, the name recogniser's hostile-text timing of 2026-11-26 (both dated
    # on the page, by hand, no bench)
    "docs/reliability.md": (None, None, {"1.25", "699.29", "7.5", "1.0", "1.4", "0.9"}),
    # an example `status` line and the example `--why` output's values, alert settings
    # (faithfulness_min, null rate, the levels' rounding step, min_effect, alpha and its z), the
    # drift tests' generated data (levels, cycle, model's fall), and the drift query's cost
    # measured by hand on 2026-11-22 (dated on the page, no bench)
    "docs/dashboards.md": (None, None, {"17.4", "0.756", "0.807", "0.7", "0.2", "0.05", "0.03",
                                        "3.09", "0.001", "0.86", "0.74", "0.08", "0.95",
                                        "0.1", "0.93", "0.83"}),
    # OTel GenAI semantic-convention and package versions, the feedback cut, a sample rate
    "docs/instrumentation.md": (None, None, {"1.37", "1.45", "1.8", "0.5", "1.0"}),
    # the durable minimum free space, the Compose version, sampling rates in the sizing table
    "docs/deploy.md": (None, None, {"1.25", "2.24", "1.0", "0.2", "0.05"}),
    # the self-telemetry table (generated from the declarations): no figure at all
    "docs/telemetry.md": (None, None, set()),
    # server versions (vLLM, Ollama) and the vote temperature setting
    "docs/llm-judge.md": (None, None, {"0.6", "0.8", "0.3", "0.12", "0.7"}),
    # an example value, a section number of INFRA, the flush interval setting
    "docs/schema.md": (None, None, {"0.7", "2.1", "0.5"}),
}
# Sections (a heading up to the next heading of its level or above) that are dated records of
# their day, said so on the page: figures measured once by hand, that no bench writes a table for.
DATED = {
    "docs/reliability.md": ("## Hostile testing, round", "## Exposure and smaller findings"),
}
# The pages of docs/ that are not guarded, and why; every other page of docs/ must be in GUARDED
# (docs/history/ is the dated record, not a page of the current state).
UNGUARDED = {
    "docs/benchmarks.md": "the generated tables themselves, each with the command that wrote it",
    "docs/metrics.md": "metric definitions with worked examples: every decimal there is an "
                       "example's input or its computed result, none a measurement",
}
_DECIMAL = re.compile(r"(?<![\w.])\d+\.\d+(?![\w.])")


def _unquoted_decimals(text: str) -> list[str]:
    text = re.sub(r"```.*?```", " ", text, flags=re.DOTALL)       # code blocks
    text = figures.QUOTE.sub(" ", text)                              # quotes
    text = re.sub(r"`[^`\n]*`", " ", text)                            # code spans
    text = re.sub(r"\]\([^)]*\)", "]", text)                         # link targets
    text = re.sub(r"\b\d+\.\d+\.\d+\.\d+\b", " ", text)              # addresses
    return _DECIMAL.findall(text)


def _without_dated(text: str, headings: tuple[str, ...]) -> str:
    """``text`` without the sections whose heading line starts with one of ``headings``."""
    out: list[str] = []
    skip_level = 0
    for line in text.splitlines():
        level = len(line) - len(line.lstrip("#")) if line.startswith("#") else 0
        if skip_level and level and level <= skip_level:
            skip_level = 0
        if not skip_level and level and line.startswith(headings):
            skip_level = level
        if not skip_level:
            out.append(line)
    return "\n".join(out)


def test_every_page_of_docs_is_guarded_or_says_why_not() -> None:
    on_disk = {f"docs/{p.name}" for p in (REPO / "docs").glob("*.md")}
    assert not set(GUARDED) & set(UNGUARDED)
    assert on_disk - set(UNGUARDED) - set(GUARDED) == set(), "a page of docs/ nobody guards"
    assert set(GUARDED) | set(UNGUARDED) <= on_disk | {"README.md"}, "a guarded page is gone"


@pytest.mark.parametrize("page", sorted(GUARDED))
def test_guarded_pages_type_no_measured_figure(page: str) -> None:
    start, end, allowed = GUARDED[page]
    text = (REPO / page).read_text(encoding="utf-8")
    if start is not None:
        assert start in text, start
        text = text[text.index(start):]
    if end is not None:
        assert end in text, end
        text = text[:text.index(end)]
    if page in DATED:
        kept = _without_dated(text, DATED[page])
        for heading in DATED[page]:
            assert f"\n{heading}" in text and f"\n{heading}" not in kept, heading
        text = kept
    typed = [d for d in _unquoted_decimals(text) if d not in allowed]
    assert typed == [], f"{page}: figures typed without a quote of their table: {typed}"


def test_a_dated_section_ends_at_the_next_heading_of_its_level() -> None:
    text = "# P\n1.5\n## Round 1 (2026-11-27)\n2.5\n### detail\n3.5\n## Now\n4.5\n"
    assert _unquoted_decimals(_without_dated(text, ("## Round",))) == ["1.5", "4.5"]


def test_the_guard_sees_a_typed_figure() -> None:
    assert _unquoted_decimals("scores 8.7 samples/s (`0.5` in code) <!-- fig a; b; c -->1.2<!-- /fig -->") == ["8.7"]


def test_a_bench_writing_its_section_refreshes_the_quotes(tmp_path, monkeypatch) -> None:
    from bench import docs_section

    page = tmp_path / "benchmarks.md"
    page.write_text("# Benchmarks\n", encoding="utf-8")
    calls: list[int] = []
    monkeypatch.setattr(docs_section, "_PAGE", page.resolve())
    monkeypatch.setattr(figures, "write", lambda: calls.append(1) or [])
    docs_section.write_section("<!-- bench/x.py -->", "| a | b |\n|---|---|\n| 1 | 2 |", "## X", docs=page)
    assert calls == [1] and "| 1 | 2 |" in page.read_text(encoding="utf-8")
    other = tmp_path / "copy.md"
    other.write_text("# Benchmarks\n", encoding="utf-8")
    docs_section.write_section("<!-- bench/x.py -->", "body", "## X", docs=other)
    assert calls == [1]  # a copy of the page (as tests write) leaves the quotes alone
