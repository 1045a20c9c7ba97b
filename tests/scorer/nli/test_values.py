"""Values in one canonical form before the model (``NliJudgeSettings.canonical_values``,
``ragpulse.scorer.judges.nli.values.canonical``): the same value said two ways becomes the same
text, different values stay different, words that are not values are left alone, and the judge
stores another version when the setting is on. The sentences are written for these tests (the
obvious-case sets in bench/data are evaluation sets: never copied here)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ragpulse.scorer.judges.base import Needs
from ragpulse.scorer.judges.factory import BUNDLED_MODEL_DIR
from ragpulse.scorer.judges.nli import NliJudge, NliJudgeSettings, NliModel
from ragpulse.scorer.judges.nli.settings import settings_tag
from ragpulse.scorer.judges.nli.values import VALUES_VERSION, canonical
from ragpulse.scorer.model import Fact, Sample

from .tiny import spy

# ------------------------------------------------------------------ the same value, two ways

SAME = [
    # clock times
    ("The lab closes at 19:00.", "The lab closes at 7 pm."),
    ("The lab closes at 19:00.", "The lab closes at 7 p.m."),
    ("Doors open at 07:45.", "Doors open at 7:45am."),
    ("Doors open at 7:45 AM.", "Doors open at 7:45."),
    ("Lunch is served from noon.", "Lunch is served from 12:00."),
    ("The gate shuts at midnight.", "The gate shuts at 12 am."),
    ("Kickoff is at 9.30 p.m. Friday.", "Kickoff is at 21:30 Friday."),
    # numbers and durations
    ("Each rental lasts four weeks.", "Each rental lasts 28 days."),
    ("Invoices are paid within 72 hours.", "Invoices are paid within three days."),
    ("The course takes an hour and a half.", "The course takes 90 minutes."),
    ("The course takes 1.5 hours.", "The course takes ninety minutes."),
    ("We reply within a fortnight.", "We reply within 14 days."),
    ("The lease runs for 36 months.", "The lease runs for three years."),
    ("Boil the eggs for a quarter of an hour.", "Boil the eggs for 15 minutes."),
    ("Guests may bring twenty-two items.", "Guests may bring 22 items."),
    ("There is a 7-day grace period.", "There is a one-week grace period."),
    ("Parking is free for one hour.", "Parking is free for 60 minutes."),
    # fractions, percentages, money
    ("Students pay half the list price.", "Students pay 50% of the list price."),
    ("A quarter of the seats are reserved.", "25 per cent of the seats are reserved."),
    ("Fees rose by 8 percent.", "Fees rose by 8%."),
    ("A coffee costs €3.", "A coffee costs three euros."),
    # weekday ranges
    ("The pharmacy opens Monday to Friday.", "The pharmacy opens weekdays."),
    ("Deliveries run Mon-Fri.", "Deliveries run Monday through Friday."),
    ("Closed on Saturdays and Sundays.", "Closed on weekends."),
    # Japanese
    ("窓口は午後7時に閉まります。", "窓口は19時に閉まります。"),
    ("窓口は午前10時半に開きます。", "窓口は10:30に開きます。"),
    ("窓口は夜8時まで開いています。", "窓口は20時まで開いています。"),
    ("貸出期間は四週間です。", "貸出期間は28日間です。"),
    ("返信は72時間以内です。", "返信は3日以内です。"),
    ("保証は三十六か月です。", "保証は3年間です。"),
    ("会議は1時間半です。", "会議は90分です。"),
    ("参加者の6割が学生です。", "参加者の60%が学生です。"),
    ("受付は月曜日から金曜日までです。", "受付は平日です。"),
    ("土曜日と日曜日は休みです。", "週末は休みです。"),
    ("入場料は五百円です。", "入場料は500円です。"),
    # Chinese
    ("商店晚上七点关门。", "商店19:00关门。"),
    ("商店下午七点半关门。", "商店19点30分关门。"),
    ("借阅期限为四周。", "借阅期限为28天。"),
    ("借阅期限为三个星期。", "借阅期限为21天。"),
    ("退款在七十二小时内到账。", "退款在3天内到账。"),
    ("手机保修两年。", "手机保修24个月。"),
    ("课程时长半小时。", "课程时长30分钟。"),
    ("学生票是成人票价的一半。", "学生票是成人票价的50%。"),
    ("折扣为百分之二十。", "折扣为20%。"),
    ("每张票十五元。", "每张票15块钱。"),
    ("图书馆星期一到星期五开放。", "图书馆周一至周五开放。"),
    ("图书馆星期六和星期日闭馆。", "图书馆周末闭馆。"),
]


@pytest.mark.parametrize(("a", "b"), SAME)
def test_the_same_value_said_two_ways_reads_the_same(a: str, b: str) -> None:
    assert canonical(a) == canonical(b), (canonical(a), canonical(b))


# ------------------------------------------------------------------ different values stay apart

DIFFERENT = [
    ("Doors open at 8 am.", "Doors open at 9 pm."),
    ("Doors open at 8 am.", "Doors open at 8 pm."),
    ("Each rental lasts three weeks.", "Each rental lasts 20 days."),
    ("Invoices are paid within 48 hours.", "Invoices are paid within three days."),
    ("Students pay half the list price.", "Students pay 25% of the list price."),
    ("The trial lasts a month.", "The trial lasts 30 days."),
    ("Refunds take 5 business days.", "Refunds take one week."),
    ("The pharmacy opens Monday to Friday.", "The pharmacy opens Monday to Saturday."),
    ("窓口は午前7時に閉まります。", "窓口は午後7時に閉まります。"),
    ("貸出期間は3週間です。", "貸出期間は20日間です。"),
    ("返金は5営業日以内です。", "返金は1週間以内です。"),
    ("商店上午七点开门。", "商店晚上七点开门。"),
    ("借阅期限为三周。", "借阅期限为二十天。"),
    ("试用期一个月。", "试用期30天。"),
]


@pytest.mark.parametrize(("a", "b"), DIFFERENT)
def test_different_values_stay_different(a: str, b: str) -> None:
    assert canonical(a) != canonical(b), canonical(a)


# ------------------------------------------------------------------ what is not a value

UNTOUCHED = [
    "One of the engineers answered, and no one complained.",
    "One day we will visit the lake.",
    "Ask for a second opinion before you sign.",
    "The two of them arrived together.",
    "He is on call twice a day and paid 4 euros an hour.",
    "They run a 24-hour helpline.",
    "Half past three is too late.",
    "Refunds arrive within 5 business days.",
    "Prices vary from month to month.",
    "I am ready.",
    "Version 2.5 ships in Q3; room 12b is upstairs.",
    "一般的には問題ありません。一部の店舗では使えません。",
    "一時的に停止しています。十分な時間があります。",
    "一人で来てください。第三回の会議です。",
    "一年生の教室です。一石二鳥です。",
    "统一价格，一般来说没有问题，一样好用。",
    "快一点，这是唯一的办法。他是一年级学生。",
    "我有三点建议。考试六十分及格。",
    "每周五穿便服，每周一闭馆。",
    "5个工作日内退款。",
    "24小时营业的便利店。",
]


@pytest.mark.parametrize("text", UNTOUCHED)
def test_words_that_are_not_values_are_left_alone(text: str) -> None:
    assert canonical(text) == text


def test_only_what_it_understands_changes() -> None:
    assert canonical("The store opens at 8 am, one of the best in town.") == \
        "The store opens at 8:00, one of the best in town."
    assert canonical("Closes at 6 p.m. Bring your receipt.") == \
        "Closes at 18:00. Bring your receipt."  # the sentence keeps its full stop
    assert canonical("") == ""


# ------------------------------------------------------------------ idempotent, deterministic


@pytest.mark.parametrize("text", [a for a, _ in SAME] + [b for _, b in SAME] + UNTOUCHED
                         + [a for a, _ in DIFFERENT] + [b for _, b in DIFFERENT])
def test_it_is_idempotent(text: str) -> None:
    once = canonical(text)
    assert canonical(once) == once


def test_the_language_chooses_the_rules() -> None:
    mixed = "Open 8 am to 6 pm. 午後6時まで。"
    assert canonical(mixed, "en") == "Open 8:00 to 18:00. 午後6時まで。"
    assert canonical(mixed, "ja") == "Open 8 am to 6 pm. 18:00まで。"
    assert canonical(mixed) == "Open 8:00 to 18:00. 18:00まで。"
    with pytest.raises(ValueError, match="lang"):
        canonical("x", "fr")


# ------------------------------------------------------------------ the setting


def test_the_setting_changes_the_stored_version_and_only_when_on() -> None:
    base = NliJudgeSettings(premise="evidence", premise_view_sentences=1)
    on = base.model_copy(update={"canonical_values": True})
    assert not base.canonical_values  # off by default
    assert settings_tag(on) == f"{settings_tag(base)}+{VALUES_VERSION}"
    assert VALUES_VERSION not in settings_tag(base)  # rows scored before it keep their version


def test_the_setting_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from ragpulse.scorer.pipeline.settings import ScorerSettings

    monkeypatch.setenv("RAGPULSE_NLI__CANONICAL_VALUES", "true")
    assert ScorerSettings().nli.canonical_values is True


@pytest.mark.parametrize("premise", ["chunks", "sentences", "views", "evidence"])
def test_the_setting_reaches_every_pair(tiny_dir: Path, monkeypatch: pytest.MonkeyPatch,
                                        premise: str) -> None:
    ctx = ["The city is on the river . It opens at 6 pm , Monday to Friday .", "paris evidence"]
    stmts = ["It opens at 18:00 on weekdays .", "paris"]
    off = NliModel(NliJudgeSettings(model_dir=tiny_dir, premise=premise))
    on = NliModel(NliJudgeSettings(model_dir=tiny_dir, premise=premise, canonical_values=True))
    seen_off, seen_on = spy(off, monkeypatch), spy(on, monkeypatch)
    closest: list = []
    off.support_matrix(stmts, ctx)
    on.support_matrix(stmts, ctx, closest=closest)
    assert any("6 pm" in p for p, _ in seen_off) and not any("18:00" in p for p, _ in seen_off)
    assert seen_on and all("6 pm" not in p and "Monday" not in p for p, _ in seen_on)
    assert any("18:00" in p and "weekdays" in p for p, _ in seen_on)
    assert {h for _, h in seen_on} == {"It opens at 18:00 on weekdays .", "paris"}
    assert on.version == off.version + f"+{VALUES_VERSION}"
    # the premise kept as evidence is the text the model read
    assert closest and all("6 pm" not in text for _, text, _ in closest)


def test_each_text_is_rewritten_once_per_call(monkeypatch: pytest.MonkeyPatch) -> None:
    from ragpulse.scorer.judges.nli import onnx_model

    calls: list[str] = []
    monkeypatch.setattr(onnx_model, "canonical", lambda t: calls.append(t) or t.upper())
    stmts, ctxs = NliModel.canonical_texts(["a", "b", "a"], ["c", "a", "c"])
    assert (stmts, ctxs) == (["A", "B", "A"], ["C", "A", "C"])
    assert sorted(calls) == ["a", "b", "c"]


async def test_the_judge_stores_the_values_version(tiny_dir: Path, use_embedder) -> None:
    sample = Sample(id="v1", question="When?", contexts=("paris evidence , from 8 am .",),
                    answer="paris evidence , from 8:00 .")
    versions = []
    for on in (False, True):
        j = NliJudge(NliJudgeSettings(model_dir=tiny_dir, canonical_values=on),
                     embedder=use_embedder)
        try:
            out = await j.gather(sample, Needs(frozenset({Fact.STATEMENT_SUPPORT})))
        finally:
            await j.aclose()
        versions.append(out[Fact.STATEMENT_SUPPORT].prompt_version)
    assert versions[1] == versions[0].replace("/expected", f"+{VALUES_VERSION}/expected")


def test_the_bundled_model_reads_a_value_said_another_way_as_the_same() -> None:
    """With the setting, "6 pm" and "18:00" are one premise-hypothesis pair for the model."""
    ctx = ["The museum shop closes at 18:00 every day except public holidays."]
    # quoted_support off: a quote of the context would be P 1 with or without the values
    on = NliModel(NliJudgeSettings(model_dir=BUNDLED_MODEL_DIR, canonical_values=True,
                                   quoted_support=False))
    off = NliModel(NliJudgeSettings(model_dir=BUNDLED_MODEL_DIR, quoted_support=False))
    said = ["The museum shop closes at 6 pm every day except public holidays."]
    same = ["The museum shop closes at 18:00 every day except public holidays."]
    assert np.array_equal(on.support_matrix(said, ctx)[0], on.support_matrix(same, ctx)[0])
    assert on.predict(said, ctx)[0] == pytest.approx(off.predict(same, ctx)[0])
