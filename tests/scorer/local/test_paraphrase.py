"""Minimal pairs for the statement-support detector in English, Japanese and Chinese: a faithful
rewording of a context sentence is supported; the same sentence with a changed number, date,
entity, negation or an added unsupported clause is not.

The sentences are written for this test. Thresholds: a supported statement scores at least the
verdict threshold (0.70, also the demo's alert level), an unsupported one under 0.60, and every
pair is at least 0.20 apart."""

from __future__ import annotations

import pytest

SUPPORTED_MIN = 0.70
UNSUPPORTED_MAX = 0.60
MARGIN = 0.20

REFUND = ("Customers can request a refund within 30 days of purchase if they show the original "
          "receipt. Refunds are paid to the original payment method within 5 business days.")
ANDROID = ("The app supports Android 12 and later. It needs 200 MB of free storage and an "
           "internet connection for the first start.")
SHIPPING = ("Standard shipping takes 3 to 5 business days within the EU. Express shipping "
            "delivers the next business day for orders placed before 2 pm.")
JA_RETURNS = "商品の返品は到着から14日以内であれば受け付けます。返金は元の支払い方法に7営業日以内に行われます。"
JA_TRAIN = "東海道新幹線は1964年10月1日に開業した。東京と新大阪を結び、最速の列車は約2時間半で走る。"
JA_FUJI = "富士山は静岡県と山梨県にまたがる活火山で、標高は3776メートルである。日本最高峰の山として知られる。"
ZH_REFUND = "顾客在购买后30天内可以申请退款，但需要出示收据。退款将在5个工作日内退回原支付方式。"
ZH_APP = "该应用支持安卓12及以上版本，首次启动需要联网。"

# (id, context, supported paraphrase, unsupported counterpart)
PAIRS = [
    # the two paraphrases
    ("en-refund-receipt", REFUND,
     "You can get a refund within 30 days of buying if you show a receipt.",
     "You can get a refund within 60 days of buying if you show a receipt."),
    ("en-android-newer", ANDROID,
     "The app supports Android 12 or newer.",
     "The app supports Android 10 or newer."),
    ("en-android-entity", ANDROID,
     "The app supports Android 12 or newer.",
     "The app supports iOS 12 or newer."),
    ("en-android-negation", ANDROID,
     "The app supports Android 12 or newer.",
     "The app does not support Android 12."),
    ("en-refund-no-receipt", REFUND,
     "A refund can be requested within thirty days of purchase if you show the receipt.",
     "You can get a refund within 30 days of buying even without a receipt."),
    ("en-refund-added-clause", REFUND,
     "A refund can be requested within thirty days of purchase if you show the receipt.",
     "You can get a refund within 30 days of buying if you show a receipt, and shipping back "
     "is free."),
    ("en-refund-passive-to-active", REFUND,
     "Your original payment method receives the refund within five business days.",
     "Your original payment method receives the refund within ten business days."),
    ("en-shipping-reordered", SHIPPING,
     "Within the EU, standard delivery takes three to five business days.",
     "Within the EU, standard delivery takes one to two business days."),
    ("ja-returns-reworded", JA_RETURNS,
     "商品の到着から14日以内なら返品できます。",
     "商品の到着から30日以内なら返品できます。"),
    # the demo's own faithful answer: 可能 (possible) for 受け付けます (accepts) is a common word,
    # not an invented name
    ("ja-returns-kanou", JA_RETURNS,
     "返品は商品到着から14日以内であれば可能です。",
     "返品は商品到着から30日以内であれば可能です。"),
    ("ja-refund-reordered", JA_RETURNS,
     "返金は7営業日以内に元の支払い方法へ行われます。",
     "返金は現金で行われます。"),
    ("ja-train-date", JA_TRAIN,
     "1964年10月1日に東海道新幹線が開業しました。",
     "1966年10月1日に東海道新幹線が開業しました。"),
    ("ja-fuji-height", JA_FUJI,
     "富士山は標高3776メートルの活火山です。",
     "富士山の高さは4200メートルです。"),
    ("zh-refund-numeral", ZH_REFUND,
     "购买后三十天内出示收据就可以退款。",
     "购买后60天内出示收据就可以退款。"),
    ("zh-refund-negation", ZH_REFUND,
     "购买后三十天内出示收据就可以退款。",
     "购买后30天内不需要收据也可以退款。"),
    ("zh-app-range", ZH_APP,
     "该应用支持安卓12或更高版本。",
     "该应用支持安卓10或更高版本。"),
    ("zh-app-negation", ZH_APP,
     "该应用支持安卓12或更高版本。",
     "该应用不支持安卓12。"),
]


@pytest.mark.parametrize(("context", "supported", "unsupported"),
                         [p[1:] for p in PAIRS], ids=[p[0] for p in PAIRS])
def test_paraphrase_supported_counterpart_not(support_detector, context: str, supported: str,
                                              unsupported: str) -> None:
    p_sup, p_uns = support_detector.predict([supported, unsupported], [context])
    assert p_sup >= SUPPORTED_MIN, (supported, p_sup)
    assert p_uns < UNSUPPORTED_MAX, (unsupported, p_uns)
    assert p_sup - p_uns >= MARGIN, (p_sup, p_uns)


def test_verbatim_copy_scores_at_least_a_paraphrase(support_detector) -> None:
    copy, para = support_detector.predict(
        ["Customers can request a refund within 30 days of purchase if they show the original "
         "receipt.", "You can get a refund within 30 days of buying if you show a receipt."],
        [REFUND])
    assert copy >= para >= SUPPORTED_MIN


@pytest.mark.parametrize(("a", "b"), [
    ("Android 12 or newer", "Android 12 and later"),
    ("Android 12 and above", "Android 12 or higher"),
    ("购买后三十天内", "购买后30天内"),
    ("安卓12或更高版本", "安卓12及以上版本"),
    ("十四日以内", "14日以内"),
])
def test_equivalent_forms_normalize_alike(a: str, b: str) -> None:
    from ragpulse.scorer.judges.local.support_detector import _normalize

    assert _normalize(a) == _normalize(b)


@pytest.mark.parametrize(("a", "b"), [
    ("Android 12 or newer", "Android 12 or older"),
    ("30 days", "one month"),  # not an equivalence the detector may assume
    ("一个应用", "1个应用"),  # a lone 一 is an article, not the number 1
])
def test_non_equivalent_forms_stay_apart(a: str, b: str) -> None:
    from ragpulse.scorer.judges.local.support_detector import _normalize

    assert _normalize(a) != _normalize(b)
