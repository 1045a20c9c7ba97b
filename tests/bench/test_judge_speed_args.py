"""bench/judge_speed.py --nli: a non-default nli/local-model setting for one measurement, checked
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
    assert got.model_fields_set >= {"premise", "candidates"}  # local-model keeps them
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
