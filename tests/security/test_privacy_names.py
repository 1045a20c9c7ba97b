"""PII beyond numbers (issue 10, part 5): names and postal addresses where the text marks them,
one placeholder per value however it is written, and a hook for the user's own redactor.
What is not recognised is pinned too: docs/reliability.md lists it per language."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ragpulse.scorer import Sample
from ragpulse.scorer.privacy import PrivacySettings, Redactor, build_redactor

R = build_redactor()


@pytest.mark.parametrize(("text", "expected"), [
    # Japanese: honorifics and labels; prefecture-to-block addresses and postal codes
    ("山田太郎さんの住所は東京都千代田区丸の内1-1-1です。", "[PERSON_1]さんの住所は[ADDRESS_1]です。"),
    ("氏名：山田太郎　電話：090-1234-5678", "氏名：[PERSON_1]　電話：[PHONE_1]"),
    ("担当は佐藤様です", "担当は[PERSON_1]様です"),
    ("〒100-0005 東京都千代田区丸の内一丁目1番1号", "[ADDRESS_1]"),
    ("実家は鹿児島県鹿児島市山下町11-1にあります", "実家は[ADDRESS_1]にあります"),
    # Chinese
    ("王小明先生住在北京市朝阳区建国路88号。", "[PERSON_1]先生住在[ADDRESS_1]。"),
    ("收件人：王小明，地址：广东省深圳市南山区科技园路1号3栋201室", "收件人：[PERSON_1]，地址：[ADDRESS_1]"),
    ("李女士的电话是13812345678", "[PERSON_1]女士的电话是[PHONE_1]"),
    # English
    ("Please contact Mr. Taro Yamada at 221B Baker Street, London NW1 6XE.",
     "Please contact Mr. [PERSON_1] at [ADDRESS_1]."),
    ("My name is Taro Yamada and I live at 1600 Pennsylvania Avenue NW, Washington, DC 20500.",
     "My name is [PERSON_1] and I live at [ADDRESS_1]."),
    ("Dear Jane Doe, your order ships to 42 Wallaby Way, Sydney.",
     "Dear [PERSON_1], your order ships to [ADDRESS_1], Sydney."),
    ("Customer: John Smith\nTicket: 123", "Customer: [PERSON_1]\nTicket: 123"),
])
def test_marked_names_and_addresses_are_replaced(text, expected):
    assert R.redact(text) == expected


@pytest.mark.parametrize("text", [
    "東京都は日本の首都です。", "静岡県の人口は約360万人。", "北京是中国的首都，建国路很长。",
    "Paris is the capital of France.", "Route 66 runs from Chicago to Santa Monica.",
    "The refund window is 30 days; see section 4 Street Safety.",
    # bare names in running text: recognising these needs a model (the `redactor` hook)
    "山田太郎は会議に出た。", "王小明说他明天来。", "Taro Yamada said the policy changed.",
])
def test_place_names_and_unmarked_names_are_left_alone(text):
    assert R.redact(text) == text


def test_one_placeholder_per_value_however_it_is_written():
    sample = Sample(
        id="s", question="Is my card 4111 1111 1111 1111 on file? Mail TARO@example.jp",
        contexts=("card 4111111111111111 belongs to taro@example.jp, tel 090-1234-5678",),
        answer="Yes, 4111-1111-1111-1111 (Taro@Example.JP) is on file; call 09012345678.")
    out = R.redact_sample(sample)
    assert out.question == "Is my card [CARD_1] on file? Mail [EMAIL_1]"
    assert out.contexts == ("card [CARD_1] belongs to [EMAIL_1], tel [PHONE_1]",)
    assert out.answer == "Yes, [CARD_1] ([EMAIL_1]) is on file; call [PHONE_1]."


def test_the_users_own_redactor_runs_after_the_built_in_ones():
    r = Redactor(PrivacySettings(redactor="tests.security.plugins.upper_redactor:redact"))
    assert r.redact("Acme Corp (a@x.com) and Initech") == "[CUSTOMER] ([EMAIL_1]) and [CUSTOMER]"
    assert r.stats()["redactions_custom"] == 1
    out = r.redact_sample(Sample(id="x", question="Who is Globex?", contexts=("Globex",),
                                 answer="A client."))
    assert out.question == "Who is [CUSTOMER]?" and out.contexts == ("[CUSTOMER]",)
    # Only the hook, no built-in recogniser: still enabled.
    assert Redactor(PrivacySettings(kinds=[], redactor="tests.security.plugins.upper_redactor:redact")).enabled


def test_a_bad_redactor_fails_at_start_up_not_on_the_first_trace():
    with pytest.raises(ValueError, match="cannot be loaded"):
        Redactor(PrivacySettings(redactor="no_such_module:redact"))
    with pytest.raises(ValueError, match="cannot be loaded"):
        Redactor(PrivacySettings(redactor="tests.security.plugins.upper_redactor:missing"))
    with pytest.raises(ValidationError):
        PrivacySettings(redactor="not an import path")
    r = Redactor(PrivacySettings(redactor="tests.security.plugins.upper_redactor:not_text"))
    with pytest.raises(TypeError, match="not str"):
        r.redact("x")


def test_the_scorer_environment_reaches_the_hook(monkeypatch):
    from ragpulse.scorer.pipeline.settings import ScorerSettings

    monkeypatch.setenv("RAGPULSE_PRIVACY__REDACTOR", "tests.security.plugins.upper_redactor:redact")
    assert ScorerSettings().privacy.redactor == "tests.security.plugins.upper_redactor:redact"


UNMARKED = Redactor(PrivacySettings(unmarked_names=True))


@pytest.mark.parametrize(("text", "expected"), [
    # issue 17's three names, and the common shapes around them
    ("Taro Yamada said the policy changed.", "[PERSON_1] said the policy changed."),
    ("山田太郎は会議に出た。", "[PERSON_1]は会議に出た。"),
    ("王小明说他明天来。", "[PERSON_1]说他明天来。"),
    ("Jane Doe met John F. Kennedy and Yamada Taro.", "[PERSON_1] met [PERSON_2] and [PERSON_3]."),
    ("Wang Xiaoming and Xiaoming Wang are one person to us.",
     "[PERSON_1] and [PERSON_2] are one person to us."),
    ("担当の佐藤花子、鈴木一郎が対応します。", "担当の[PERSON_1]、[PERSON_2]が対応します。"),
    ("据悉，李明华表示同意。", "据悉，[PERSON_1]表示同意。"),
    # marked and unmarked together: one placeholder per name
    ("Mr. Taro Yamada wrote; Taro Yamada paid.", "Mr. [PERSON_1] wrote; [PERSON_1] paid."),
])
def test_unmarked_names_are_replaced_when_asked(text, expected):
    assert UNMARKED.redact(text) == expected


@pytest.mark.parametrize("text", [
    "東京都は日本の首都です。", "山口県は本州の西端にある。", "千葉大学の学生が集まった。",
    "清水建設が受注した。", "上野動物園は月曜休園です。", "谢谢你的帮助。", "范围内，曾经说过。",
    "韩国说明天发布。", "王牌军，", "Paris is the capital of France.", "The New York Times reported it.",
    "Hong Kong and Feng Shui; Yin Yang.", "Grace Church on George Street near Albert Hall.",
    "Joshua Tree is a national park.", "Dennis Publishing owns it.",
    "Refunds are accepted within 30 days of purchase.",
])
def test_unmarked_names_leave_places_companies_and_words_alone(text):
    assert UNMARKED.redact(text) == text


def test_unmarked_names_are_off_by_default_and_set_from_the_environment(monkeypatch):
    from ragpulse.scorer.pipeline import ScorerSettings

    assert not PrivacySettings().unmarked_names
    assert R.redact("Taro Yamada said so.") == "Taro Yamada said so."
    monkeypatch.setenv("RAGPULSE_PRIVACY__UNMARKED_NAMES", "true")
    assert ScorerSettings().privacy.unmarked_names
