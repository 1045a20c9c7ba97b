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
    assert js.ratios(results) == pytest.approx([3.0, 4.0])
    s = js.summary(results)
    assert s["model"]["cpu_s_per_sample"] == pytest.approx(0.35)
    assert s["model"]["stages"]["rest"] == pytest.approx(0.25)
    assert s["model"]["peak_rss_mib"] == 101.0 and s["fast"]["rounds"] == 2
    # two cores' worth of CPU, but the embedder runs one USE pass at a time
    assert js.free_cores_estimate(s["model"]) == pytest.approx(2 / 0.35)
    assert js.free_cores_estimate(s["fast"]) == pytest.approx(1 / 0.08)
    # and at each worker pool's threads' worth of its blocking call
    one_worker = {**s["fast"], "pools": {"fast": 0.1}, "workers": {"fast": 1}}
    assert js.free_cores_estimate(one_worker) == pytest.approx(10.0)
    two = {**s["model"], "pools": {"fast": 0.09, "nli": 0.3}, "workers": {"fast": 1, "nli": 2}}
    assert js.free_cores_estimate(two) == pytest.approx(2 / 0.35)
    body = js.table(results, "cmd", ("en", "ja"), 1)
    assert "**3.50**" in body and "| model | 2 x 10 |" in body


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
