"""bench/quality.py's faithfulness report, end to end on a tiny labeled set (real local judge)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

CONTEXT = ("The Eiffel Tower is a wrought-iron lattice tower in Paris. It was completed in 1889 "
           "for the World's Fair. Gustave Eiffel's company designed and built it.")
FAITHFUL = ["The Eiffel Tower is a wrought-iron lattice tower in Paris.",
            "Gustave Eiffel's company designed and built it."]
INVENTED = ["The tower was moved to Berlin in 1999.",
            "The Eiffel Tower is a wrought-iron lattice tower in Paris. It was sold to Japan in 2004."]


@pytest.fixture(scope="module")
def quality():
    from bench import quality

    return quality


def _write(path: Path) -> None:
    rows = [{"id": f"x-{i}", "question": "What is the Eiffel Tower?", "contexts": [CONTEXT],
             "answer": a, "label": {"faithful": y}}
            for i, (a, y) in enumerate([(a, 1) for a in FAITHFUL] + [(a, 0) for a in INVENTED])]
    text = "".join(json.dumps(r) + "\n" for r in rows)
    for name in ("faithfulness_faithbench.jsonl", "faithfulness_qags_cnndm.jsonl",
                 "faithfulness_halueval.jsonl"):
        (path / name).write_text(text, encoding="utf-8")


def test_faithfulness_report_has_value_and_verdict_share(quality, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGPULSE_THREADS", "1")
    _write(tmp_path)
    assert quality.main(["--data", str(tmp_path), "--only", "faithfulness"]) == 0
    out = capsys.readouterr().out
    assert "| set | n | AUROC | AUROC, verdict share | BA |" in out
    rows = [line.split(" | ") for line in out.splitlines()
            if line.startswith("| faithbench |") and len(line.split(" | ")) == 6]
    assert len(rows) == 1
    _, n, value_auroc, share_auroc, ba, _ = rows[0]
    # the copies outrank both inventions on the expected share; the half-copied invention has
    # one supported statement of two, so the verdict share ranks it below the copies too
    assert n == "4" and float(value_auroc) == 1.0 and float(share_auroc) == 1.0
    assert float(ba) == 1.0  # both copies fully supported, no invention fully supported
    assert "### Context relevance" not in out  # --only
    # the per-class distribution of the score: faithful copies far above the inventions
    dist = {line.split(" | ")[1]: line.split(" | ") for line in out.splitlines()
            if line.startswith("| faithbench | ") and len(line.split(" | ")) == 8}
    assert set(dist) == {"faithful", "unfaithful"}
    assert float(dist["faithful"][3]) > 0.7 > float(dist["unfaithful"][3])


def test_jnli_section(quality, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGPULSE_THREADS", "1")
    _write(tmp_path)
    premise = "富士山は静岡県と山梨県にまたがる活火山で、標高は3776メートルである。"
    pairs = [(premise, "富士山の標高は3776メートルです。", "entailment"),
             (premise, "富士山の標高は4200メートルです。", "contradiction"),
             (premise, "富士山には毎年多くの登山者が訪れる。", "neutral")]
    (tmp_path / "jnli_ja_valid.jsonl").write_text("".join(
        json.dumps({"sentence_pair_id": str(i), "sentence1": a, "sentence2": b, "label": y},
                   ensure_ascii=False) + "\n" for i, (a, b, y) in enumerate(pairs)),
        encoding="utf-8")
    assert quality.main(["--data", str(tmp_path), "--only", "faithfulness"]) == 0
    out = capsys.readouterr().out
    assert "| entailment vs contradiction | 1.000 |" in out
    assert "| entailment vs neutral |" in out and "| entailment vs rest |" in out
    assert "| jnli_ja | neutral | 1 |" in out


def test_write_docs_refuses_a_partial_run(quality, tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        quality.main(["--data", str(tmp_path), "--only", "faithfulness", "--write-docs"])
