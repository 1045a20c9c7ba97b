"""``terse_claims="with-question"``: how a terse statement becomes a hypothesis."""

from __future__ import annotations

from ragpulse.scorer.judges.nli.judge import claims


def test_terse_statements_become_claims() -> None:
    hyps, owner = claims("Does the Basic plan include phone support?",
                         ["No.", "The Basic plan only includes email support.",
                          "Phone support comes with the Business plan."])
    assert hyps == ["No. The Basic plan only includes email support.",
                    "Phone support comes with the Business plan."]
    assert owner == [0, 0, 1]
    assert claims("Which magazine was started first?", ["Arthur's Magazine"]) == (
        ["Which magazine was started first? Arthur's Magazine"], [0])
    assert claims("", ["Arthur's Magazine"]) == (["Arthur's Magazine"], [0])
    assert claims("会员卡有效期多久？", ["两年。"])[0] == ["会员卡有效期多久？ 两年。"]
