"""``ragpulse score`` refuses bad input per line, and scores the other lines.

Issue 17: a lone surrogate escape (``"\\ud800"``) is valid JSON but not text; it reached the
local judge's tokenizer and printed a traceback per metric, and the line came out as
``judge_error`` as if the judge had failed. It is bad input, like invalid UTF-8: the line gets
an error naming it, stderr gets one line and no traceback, the other lines are scored.
The real command in a subprocess, with the local judge.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

CLI = [sys.executable, "-c", "from ragpulse.deploy.cli import main; main()", "score"]


def test_a_lone_surrogate_is_a_per_line_input_error(tmp_path: Path) -> None:
    good = {"question": "How long is the refund window?",
            "contexts": ["Refunds are accepted within 30 days of purchase."],
            "answer": "Refunds are accepted within 30 days."}
    lines = [
        json.dumps({"id": "a", **good}),
        # json.dumps escapes the surrogate as \ud800: exactly what a client's JSON holds.
        json.dumps({"id": "b", **good, "contexts": ["Refunds \ud800 within 30 days."]}),
        json.dumps({"id": "c", **good, "answer": "Thirty days \U0001f600"}),  # a valid pair
    ]
    assert "\\ud800" in lines[1]
    inp = tmp_path / "in.jsonl"
    inp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    proc = subprocess.run([*CLI, "--input", str(inp), "--output", str(out), "--quiet",
                           "--metrics", "faithfulness,answer_relevancy"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr  # a malformed line: exit 1, the rest scored
    assert "Traceback" not in proc.stderr, proc.stderr
    err = " ".join(proc.stderr.split())
    assert "line 2: invalid sample: contexts.0: lone surrogate \\ud800" in err
    rows = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert [r["line"] for r in rows] == [1, 2, 3]
    assert rows[1] == {"line": 2, "id": "b", "error": rows[1]["error"]}
    assert "contexts.0: lone surrogate" in rows[1]["error"]
    for r in (rows[0], rows[2]):
        assert {s["status"] for s in r["scores"].values()} == {"ok"}, r


def test_an_unreachable_llm_endpoint_is_named_and_fails_the_run(tmp_path: Path) -> None:
    """Every score came out `judge_error` with no cause anywhere and exit 0 (a new user's
    walkthrough). Now each error score carries the cause, stderr names the endpoint, and a run
    where every score failed exits 1. The real openai client against a closed local port."""
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    inp = tmp_path / "in.jsonl"
    inp.write_text(json.dumps({"id": "a", "question": "How long is the refund window?",
                               "contexts": ["Refunds are accepted within 30 days."],
                               "answer": "30 days."}) + "\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    proc = subprocess.run(
        [*CLI, "--input", str(inp), "--output", str(out), "--quiet", "--judge", "llm",
         "--model", "gpt-4o-mini", "--base-url", f"http://127.0.0.1:{port}/v1",
         "--metrics", "faithfulness", "--request-timeout", "1", "--deadline", "2"],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "OPENAI_API_KEY": "sk-test", "COLUMNS": "300",
             "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"})  # a proxy would answer instead
    err = " ".join(proc.stderr.split())
    assert proc.returncode == 1, err
    assert f"error score: judge_timeout: APIConnectionError: http://127.0.0.1:{port}/v1/chat/completions" in err \
        or f"error score: judge_error: APIConnectionError: http://127.0.0.1:{port}/v1/chat/completions" in err, err
    assert "no score came out ok" in err and "the judge failed on every sample" in err
    (row,) = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    faith = row["scores"]["faithfulness"]
    assert faith["status"] == "error", faith
    assert (f"APIConnectionError: Connection error. (http://127.0.0.1:{port}/v1/chat/completions)"
            in faith["explanation"]), faith


def test_the_summary_tallies_causes_and_knows_when_nothing_worked() -> None:
    """One cause is one line whatever its attempt count; `null` scores (a sample without
    contexts) do not make a run whose judge never worked look like a success."""
    from ragpulse.deploy.commands.score import _Summary
    from ragpulse.scorer import Score
    from ragpulse.scorer.evaluator import SampleResult

    url = "(http://127.0.0.1:9/v1/chat/completions)"

    def err(text: str) -> Score:
        return Score.missing("faithfulness", "judge_error", explanation=text)

    s = _Summary()
    s.add(SampleResult("a", (err(f"5 attempts; APIConnectionError: Connection error. {url}"),), 1.0))
    s.add(SampleResult("b", (err(f"deadline 2.0s reached after 3 attempts; APIConnectionError: "
                                 f"Connection error. {url}"),), 1.0))
    s.add(SampleResult("c", (Score.missing("faithfulness", "no_contexts"),), 1.0))
    assert s.error_lines() == ["2 error scores: judge_error: APIConnectionError: "
                               "http://127.0.0.1:9/v1/chat/completions"]
    assert s.all_failed
    s.add(SampleResult("d", (Score(metric="faithfulness", value=0.9),), 1.0))
    assert not s.all_failed


def test_the_llm_judge_without_a_key_says_what_to_set(tmp_path: Path) -> None:
    """It said `set OPENAI_API_KEY or LLMJudgeSettings.api_key`: a class attribute, not
    something a user of the command can set."""
    inp = tmp_path / "in.jsonl"
    inp.write_text(json.dumps({"id": "a", "question": "q?", "contexts": ["c."],
                               "answer": "a."}) + "\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "RAGPULSE_"))}
    proc = subprocess.run([*CLI, "--input", str(inp), "--quiet", "--judge", "llm"],
                          capture_output=True, text=True, timeout=120,
                          env={**env, "COLUMNS": "300"})
    err = " ".join(proc.stderr.split())
    assert proc.returncode == 2, err
    assert ("the llm judge has no API key: set OPENAI_API_KEY (or OPENAI_API_KEY_FILE, a file "
            "holding it), or pass --base-url") in err, err
    assert "LLMJudgeSettings" not in err


def test_score_reads_the_nli_settings_from_the_environment_as_the_scorer_does(tmp_path: Path) -> None:
    """docs/judges.md gives RAGPULSE_NLI__* (faithfulness_value, blend, threads, premise) for
    every command, but `score` read only three of them through its flags and ignored the rest."""
    inp = tmp_path / "in.jsonl"
    inp.write_text(json.dumps({
        "id": "a", "question": "How long is the refund window?",
        "contexts": ["Refunds are accepted within 30 days of delivery."],
        "answer": "You can get a refund within 30 days. Refunds also cover shipping."}) + "\n",
        encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGPULSE_")}

    def faithfulness(**extra: str) -> tuple[int, str, dict]:
        proc = subprocess.run([*CLI, "--input", str(inp), "--quiet", "--judge", "local-model",
                               "--metrics", "faithfulness"], capture_output=True, text=True,
                              timeout=300, env={**env, **extra})
        rows = [json.loads(x) for x in proc.stdout.splitlines() if x.strip()]
        return proc.returncode, proc.stderr, rows[0]["scores"]["faithfulness"] if rows else {}

    rc, err, expected = faithfulness()
    assert rc == 0, err
    assert expected["counts"] == {"statements": 2, "supported": 1} and expected["value"] != 0.5
    rc, err, verdicts = faithfulness(RAGPULSE_NLI__FAITHFULNESS_VALUE="verdicts")
    assert rc == 0 and verdicts["value"] == 0.5, (err, verdicts)
    rc, err, _ = faithfulness(RAGPULSE_NLI__THREADS="0")
    assert rc == 2 and "RAGPULSE_NLI__THREADS" in err, err


def test_a_deeply_nested_line_is_a_per_line_input_error(tmp_path: Path) -> None:
    """Issue 38: a 9 KB line nested 3,000 deep raised RecursionError out of ``json.loads``: a
    traceback, exit 1 and not one output line, the good lines around it lost. Now it is its own
    error line, counted like any malformed line, and the good lines are scored."""
    good = {"question": "How long is the refund window?",
            "contexts": ["Refunds are accepted within 30 days of purchase."],
            "answer": "Refunds are accepted within 30 days."}
    deep = '{"id": "deep", "question": "q", "contexts": ' + "[" * 3000 + "]" * 3000 + ', "answer": "a"}'
    assert 6000 < len(deep) < 10_000
    inp = tmp_path / "in.jsonl"
    inp.write_text("\n".join([json.dumps({"id": "a", **good}), deep,
                              json.dumps({"id": "c", **good})]) + "\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    proc = subprocess.run([*CLI, "--input", str(inp), "--output", str(out), "--quiet",
                           "--metrics", "faithfulness"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr  # a malformed line: exit 1, the rest scored
    assert "Traceback" not in proc.stderr and "RecursionError" not in proc.stderr, proc.stderr
    assert "line 2: invalid JSON: nested too deeply" in " ".join(proc.stderr.split())
    rows = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert [r["line"] for r in rows] == [1, 2, 3]
    assert rows[1] == {"line": 2, "error": "invalid JSON: nested too deeply"}
    for r in (rows[0], rows[2]):
        assert {s["status"] for s in r["scores"].values()} == {"ok"}, r
