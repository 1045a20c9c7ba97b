"""bench/paraphrase_probe.py: the probe's items are well formed, its summary counts what it says,
it runs on the bundled model, and --write-docs keeps one table per judge."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import docs_section
from bench import paraphrase_probe as pp

BEFORE = "## Faithfulness score distributions (local judges)"


def test_items_are_complete_and_balanced() -> None:
    items = pp.load()
    assert len(items) == 36 and len({it["id"] for it in items}) == 36
    assert {lang: sum(it["lang"] == lang for it in items) for lang in ("en", "ja", "zh")} == \
        {"en": 12, "ja": 12, "zh": 12}
    for it in items:
        # three different statements, none the premise itself
        assert len({it["copy"], it["paraphrase"], it["wrong"], it["premise"]}) == 4, it["id"]
        assert it["wrong_kind"] in {"value", "role", "polarity", "entity"}


def test_load_refuses_a_broken_item(tmp_path: Path) -> None:
    bad = tmp_path / "p.jsonl"
    row = {"id": "x", "lang": "en", "premise": "P.", "copy": "P.", "paraphrase": "Q.",
           "wrong": "Q.", "wrong_kind": "value"}
    bad.write_text(json.dumps(row) + "\n")
    with pytest.raises(ValueError, match="paraphrase and wrong are the same"):
        pp.load(bad)
    del row["copy"]
    bad.write_text(json.dumps(row) + "\n")
    with pytest.raises(ValueError, match=r"lacks \['copy'\]"):
        pp.load(bad)


def test_summary() -> None:
    rows = [{"lang": "en", "copy": 0.9, "paraphrase": 0.8, "wrong": 0.1},
            {"lang": "en", "copy": 0.9, "paraphrase": 0.2, "wrong": 0.3},
            {"lang": "ja", "copy": 0.5, "paraphrase": 0.4, "wrong": 0.4}]
    s = pp.summarize(rows)
    assert s["en"]["paraphrase_above_wrong"] == 0.5 and s["en"]["auroc_paraphrase_vs_wrong"] == 0.75
    assert s["ja"]["paraphrase_above_wrong"] == 0.0 and s["ja"]["auroc_paraphrase_vs_wrong"] == 0.5
    assert s["all"]["n"] == 3 and s["all"]["copy_mean"] == pytest.approx(0.767, abs=1e-3)


def test_runs_on_the_bundled_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "probe.json"
    assert pp.main(["--judge", "model", "--json", str(out), "--threads", "1"]) == 0
    got = json.loads(out.read_text(encoding="utf-8"))
    assert len(got["rows"]) == 36 and set(got["summary"]) == {"en", "ja", "zh", "all"}
    for r in got["rows"]:
        assert all(0.0 <= r[k] <= 1.0 for k in pp.KINDS)
    assert "| all | 36 |" in capsys.readouterr().out


def test_write_docs_keeps_one_table_per_judge(monkeypatch: pytest.MonkeyPatch,
                                              tmp_path: Path) -> None:
    docs = tmp_path / "benchmarks.md"
    docs.write_text(f"# Benchmarks\n\n{BEFORE}\n\nrest\n", encoding="utf-8")
    monkeypatch.setattr(docs_section, "DOCS", docs)
    summary = pp.summarize([{"lang": "en", "copy": 0.9, "paraphrase": 0.5, "wrong": 0.4}])
    pp._write_docs("fast", pp.table(summary, "fast"))
    pp._write_docs("model", pp.table(summary, "model"))
    changed = pp.summarize([{"lang": "en", "copy": 0.9, "paraphrase": 0.1, "wrong": 0.4}])
    pp._write_docs("model", pp.table(changed, "model"))
    text = docs.read_text(encoding="utf-8")
    assert text.count(pp.MARK) == 2 and text.index(pp.MARK) < text.index(BEFORE)
    assert text.count("`model`, each statement") == 1 and text.count("`fast`, each statement") == 1
    assert "| en | 1 | 0.90 | 0.10 | 0.40 | 0% | 0.00 |" in text  # the re-run replaced its own
    assert "| en | 1 | 0.90 | 0.50 | 0.40 | 100% | 1.00 |" in text  # fast's table kept
    assert text.index("`model`, each") < text.index("`fast`, each") and "rest" in text


def test_a_judge_rerun_replaces_its_table_of_the_old_name(monkeypatch: pytest.MonkeyPatch,
                                                           tmp_path: Path) -> None:
    """The tables written before issue 39's rename are headed `local-model` and `local`: a
    re-run of ``model`` replaces the first and keeps the second, whose name it does not
    change until ``fast`` is run again."""
    docs = tmp_path / "benchmarks.md"
    summary = pp.summarize([{"lang": "en", "copy": 0.9, "paraphrase": 0.5, "wrong": 0.4}])
    old = "\n\n\n".join(pp.table(summary, name) for name in ("local-model", "local"))
    docs.write_text(f"# Benchmarks\n\n{pp.MARK}\nhead\n\n\n{old}\n{pp.MARK}\n\n{BEFORE}\n",
                    encoding="utf-8")  # as the bench wrote it then
    monkeypatch.setattr(docs_section, "DOCS", docs)
    changed = pp.summarize([{"lang": "en", "copy": 0.9, "paraphrase": 0.1, "wrong": 0.4}])
    pp._write_docs("model", pp.table(changed, "model"))
    text = docs.read_text(encoding="utf-8")
    assert "`local-model`, each" not in text and text.count("`model`, each statement") == 1
    assert text.count("`local`, each statement") == 1
    assert text.index("`model`, each") < text.index("`local`, each")


def test_a_judge_the_probe_does_not_run_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        pp.main(["--judge", "llm"])
    assert "this command runs model, nli, fast" in capsys.readouterr().err
