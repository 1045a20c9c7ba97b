"""bench/judge_speed.py --nli: a non-default nli/model setting for one measurement, checked
before any model loads, and never written into the docs or the sampling constants."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_nli_settings_are_parsed_and_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    from bench import judge_speed as js

    assert js.nli_settings([]) is None
    got = js.nli_settings(["premise=views", "candidates=3"])
    assert got.premise == "views" and got.candidates == 3
    assert got.model_fields_set >= {"premise", "candidates"}  # the model judge keeps them
    for bad, msg in ((["premise"], "FIELD=VALUE"), (["nosuch=1"], "no field 'nosuch'"),
                     (["premise=sideways"], "premise")):
        with pytest.raises(SystemExit, match=msg):
            js.nli_settings(bad)


def test_a_non_default_setting_is_not_written(monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    from bench import judge_speed as js

    monkeypatch.setattr(js, "make_samples", lambda *a: pytest.fail("must stop before samples"))
    for flag in ("--write-docs", "--write-constants"):
        with pytest.raises(SystemExit):
            js.main(["--nli", "premise=views", flag])
        assert "not with --write-docs or --write-constants" in capsys.readouterr().err


def test_rounds_give_same_run_ratios_and_stages_add_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same-run ratio is the model judge's CPU over the fast judge's within each round, and
    the stage table's rest is what the timed stages leave of the total."""
    monkeypatch.syspath_prepend(str(REPO / "bench"))
    from bench import judge_speed as js

    def row(judge: str, k: int, cpu: float, use: float) -> dict:
        return {"judge": judge, "round": k, "samples": 10, "samples_per_s": 1.0,
                "cpu_s_per_sample": cpu, "stages": {"USE embeddings": use}, "load_s": 1.0,
                "load_before": 1.0, "load_after": 2.0, "ok": 50, "scores": 50,
                "peak_rss_mib": 100.0 + k}
    results = [row("fast", 0, 0.1, 0.08), row("model", 0, 0.3, 0.1),
               row("model", 1, 0.4, 0.1), row("fast", 1, 0.1, 0.08)]
    for r in results:
        r["answers"] = "written"
    assert js.ratios(results) == pytest.approx([3.0, 4.0])
    assert js.ratios(results, "verbatim") == []
    # rows measured on the other kind of answers are their own rows and ratios
    other = [{**r, "answers": "verbatim", "cpu_s_per_sample": r["cpu_s_per_sample"] * 2 if
              r["judge"] == "fast" else r["cpu_s_per_sample"]} for r in results]
    assert js.ratios(results + other, "verbatim") == pytest.approx([1.5, 2.0])
    both = js.summary(results + other)
    assert list(both) == ["fast", "model", "fast (verbatim answers)", "model (verbatim answers)"]
    assert both["fast (verbatim answers)"]["judge"] == "fast"
    s = js.summary(results)
    assert s["model"]["cpu_s_per_sample"] == pytest.approx(0.35)
    assert s["model"]["stages"]["rest"] == pytest.approx(0.25)
    assert s["model"]["peak_rss_mib"] == 101.0 and s["fast"]["rounds"] == 2
    # two cores' worth of CPU, but the float embedder runs one USE pass at a time
    assert s["fast"]["embeddings"] == "float"  # rows without the field: written before int8
    assert js.free_cores_estimate(s["model"]) == pytest.approx(2 / 0.35)
    assert js.free_cores_estimate(s["fast"]) == pytest.approx(1 / 0.08)
    # the int8 one runs passes side by side
    assert js.free_cores_estimate({**s["fast"], "embeddings": "int8"}) == pytest.approx(2 / 0.1)
    # and at each worker pool's threads' worth of its blocking call
    one_worker = {**s["fast"], "pools": {"fast": 0.1}, "workers": {"fast": 1}}
    assert js.free_cores_estimate(one_worker) == pytest.approx(10.0)
    two = {**s["model"], "pools": {"fast": 0.09, "nli": 0.3}, "workers": {"fast": 1, "nli": 2}}
    assert js.free_cores_estimate(two) == pytest.approx(2 / 0.35)
    body = js.table(results + other, "cmd", ("en", "ja"), 1)
    assert "written answers: **3.50**" in body and "verbatim answers: **1.75**" in body
    assert "| model | 2 x 10 |" in body and "| model (verbatim answers) | 2 x 10 |" in body


def test_a_stage_inside_another_counts_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(REPO / "bench"))
    from bench import judge_speed as js

    def spin(n: int) -> int:
        return sum(i * i for i in range(n))

    class Work:
        def inner(self) -> int:
            return spin(300_000)

        def outer(self) -> int:
            return self.inner() + spin(300_000)

    clock = js.StageClock()
    clock.wrap(Work, "inner", "inner")
    clock.wrap(Work, "outer", "outer")
    import time
    t0 = time.thread_time()
    Work().outer()
    total = time.thread_time() - t0
    got = clock.seconds
    assert got["inner"] > 0 and got["outer"] > 0
    assert got["inner"] + got["outer"] == pytest.approx(total, rel=0.05, abs=0.01)
    clock.reset()
    assert not clock.seconds


def test_written_answers_are_the_corpus_answers_over_distinct_contexts(
        capsys: pytest.CaptureFixture[str]) -> None:
    """The typical trace's written answers: 3 supported corpus statements each, 5 contexts of
    at least 900 characters that open with the row's own passages, none shared between
    samples (a cold embedding cache); the docs and constants need them."""
    from bench import judge_speed as js

    samples = js.written_samples(12, ("en", "ja", "zh"))
    assert [s.id.split("-")[2] for s in samples[:3]] == ["en", "ja", "zh"]
    seen: set[str] = set()
    for s in samples:
        assert len(s.contexts) == 5 and all(len(c) >= js.CONTEXT_CHARS for c in s.contexts)
        assert not seen.intersection(s.contexts)
        seen.update(s.contexts)
        assert s.answer and s.question
    row = next(r for r in js._corpus_rows("en") if js._written_answer(r))
    first = js.written_samples(1, ("en",))[0]
    assert first.question == row["question"] and first.answer == js._written_answer(row)
    assert first.contexts[0].startswith(row["contexts"][0])
    with pytest.raises(SystemExit):
        js.main(["--answers", "verbatim", "--write-docs"])
    assert "need the written answers" in capsys.readouterr().err
