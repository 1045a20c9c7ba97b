"""Polarity pairs (EN/JA/ZH): opposite states said with opposite words, not with "not".

Why: @4 reads "the museum is open on Mondays" as supported by "the museum is closed on Mondays"
(P 0.88 with float activations), and a "Yes,"/"No," in front of a statement moves its P by up
to 0.6. The template data says opposite states with "not" almost only, and its particle rows
swap values rather than states. Here every fact is one of two opposite states of an invented
entity (open/closed, allowed/prohibited, included/extra, required/not needed, free/paid,
rose/fell, only one/several), in a premise with the opposite state of another entity as a
distractor. Hypotheses:

* ``pol-same`` (1): the premise's state in other words;
* ``pol-not-opposite`` (1): "not <the opposite state>";
* ``pol-opposite`` (0): the opposite state, in its own words (no "not" to cue it);
* ``pol-not-same`` (0): "not <the premise's state>";
* ``pol-other`` (0): the distractor entity's state given to the target (attribution);
* ``pol-yes`` / ``pol-yes-wrong`` (1 / 0): a "Yes," in front of a true / false statement;
* ``pol-no`` / ``pol-no-wrong`` (1 / 0): a "No," in front of a true negative / a false statement.

So neither an antonym, nor "not", nor a particle decides the label. Every name is invented here
(no licence to track).
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from .templates import CITIES, COMPANIES, FEATURES, PLACES, PLANS, collect

DAYS = {"en": ["Mondays", "Tuesdays", "Sundays", "public holidays", "weekends"],
        "ja": ["月曜日", "火曜日", "日曜日", "祝日", "週末"],
        "zh": ["周一", "周二", "周日", "法定节假日", "周末"]}
ITEMS = {"en": ["pets", "smoking", "photography", "outside food", "bicycles", "drones"],
         "ja": ["ペットの同伴", "喫煙", "写真撮影", "飲食物の持ち込み", "自転車の乗り入れ", "ドローンの使用"],
         "zh": ["携带宠物", "吸烟", "拍照", "自带食品", "骑自行车", "使用无人机"]}
SERVICES = {"en": ["the passport photo service", "the eye test", "the bike repair", "the tax consultation", "the hearing check"],
            "ja": ["証明写真サービス", "視力検査", "自転車修理", "税務相談", "聴力検査"],
            "zh": ["证件照服务", "视力检查", "自行车维修", "税务咨询", "听力检查"]}
GROUPS = {"en": ["students", "residents", "members", "children under 12", "seniors"],
          "ja": ["学生", "市民", "会員", "12歳未満の子ども", "高齢者"],
          "zh": ["学生", "本市居民", "会员", "12岁以下儿童", "老年人"]}
YEARS = ["2019", "2020", "2021", "2022", "2023"]

# frame: entities, a second slot, and per language the wordings of state A, state B (its
# opposite), "not A" and "not B"; several wordings each, so a paraphrase is never the premise's
# own sentence. {e}: the entity, {x}: the slot.
FRAMES = {
    "open": {
        "ents": PLACES, "slot": DAYS,
        "en": {"A": ["The {e} is open on {x}.", "On {x} the {e} opens as usual."],
               "B": ["The {e} is closed on {x}.", "On {x} the {e} stays shut."],
               "notA": ["The {e} does not open on {x}."], "notB": ["The {e} is not closed on {x}."]},
        "ja": {"A": ["{e}は{x}も開いています。", "{x}も{e}は通常どおり営業しています。"],
               "B": ["{e}は{x}は休みです。", "{x}は{e}が閉まっています。"],
               "notA": ["{e}は{x}は開いていません。"], "notB": ["{e}は{x}も休みではありません。"]},
        "zh": {"A": ["{e}{x}照常开放。", "{x}{e}也开门。"],
               "B": ["{e}{x}闭馆。", "{x}{e}关门。"],
               "notA": ["{e}{x}不开放。"], "notB": ["{e}{x}不关门。"]},
    },
    "allowed": {
        "ents": CITIES, "slot": ITEMS,
        "en": {"A": ["In the {e} hall, {x} is allowed.", "{X} is permitted in the {e} hall."],
               "B": ["In the {e} hall, {x} is prohibited.", "{X} is banned in the {e} hall."],
               "notA": ["{X} is not allowed in the {e} hall."], "notB": ["{X} is not prohibited in the {e} hall."]},
        "ja": {"A": ["{e}ホールでは{x}が認められています。", "{e}ホールは{x}が可能です。"],
               "B": ["{e}ホールでは{x}は禁止されています。", "{e}ホールでは{x}はできません。"],
               "notA": ["{e}ホールでは{x}は認められていません。"], "notB": ["{e}ホールでは{x}は禁止されていません。"]},
        "zh": {"A": ["{e}会馆允许{x}。", "在{e}会馆可以{x}。"],
               "B": ["{e}会馆禁止{x}。", "在{e}会馆严禁{x}。"],
               "notA": ["{e}会馆不允许{x}。"], "notB": ["{e}会馆并不禁止{x}。"]},
    },
    "included": {
        "ents": PLANS, "slot": FEATURES,
        "en": {"A": ["{X} is included in the {e} plan.", "The {e} plan comes with {x} at no extra cost."],
               "B": ["{X} costs extra on the {e} plan.", "On the {e} plan, {x} is a paid add-on."],
               "notA": ["{X} is not included in the {e} plan."], "notB": ["{X} does not cost extra on the {e} plan."]},
        "ja": {"A": ["{e}プランには{x}が含まれています。", "{e}プランなら{x}を追加料金なしで使えます。"],
               "B": ["{e}プランでは{x}は別料金です。", "{e}プランの{x}は有料オプションです。"],
               "notA": ["{e}プランには{x}は含まれていません。"], "notB": ["{e}プランでは{x}に追加料金はかかりません。"]},
        "zh": {"A": ["{e}包含{x}。", "{e}用户可免费使用{x}。"],
               "B": ["{e}的{x}需要另外付费。", "{e}的{x}是付费附加项。"],
               "notA": ["{e}不包含{x}。"], "notB": ["{e}的{x}不需要额外付费。"]},
    },
    "required": {
        "ents": CITIES, "slot": SERVICES,
        "en": {"A": ["At the {e} branch, {x} needs an appointment.", "You must book ahead for {x} at the {e} branch."],
               "B": ["At the {e} branch, {x} is walk-in.", "No booking is needed for {x} at the {e} branch."],
               "notA": ["At the {e} branch, {x} does not need an appointment."], "notB": ["At the {e} branch, {x} is not walk-in."]},
        "ja": {"A": ["{e}店の{x}は予約が必要です。", "{e}店で{x}を受けるには事前予約が要ります。"],
               "B": ["{e}店の{x}は予約なしで受けられます。", "{e}店の{x}は予約不要です。"],
               "notA": ["{e}店の{x}は予約が要りません。"], "notB": ["{e}店の{x}は予約なしでは受けられません。"]},
        "zh": {"A": ["{e}分店的{x}需要预约。", "在{e}分店办理{x}须提前预约。"],
               "B": ["{e}分店的{x}无需预约。", "{e}分店的{x}可以直接到店办理。"],
               "notA": ["{e}分店的{x}不需要预约。"], "notB": ["{e}分店的{x}不能直接到店办理。"]},
    },
    "free": {
        "ents": PLACES, "slot": GROUPS,
        "en": {"A": ["Entry to the {e} is free for {x}.", "{X} get into the {e} without paying."],
               "B": ["{X} pay full price at the {e}.", "Entry to the {e} is charged for {x}."],
               "notA": ["Entry to the {e} is not free for {x}."], "notB": ["{X} do not pay at the {e}."]},
        "ja": {"A": ["{x}は{e}に無料で入れます。", "{e}の入場料は{x}なら無料です。"],
               "B": ["{x}も{e}の入場料を払う必要があります。", "{e}は{x}も有料です。"],
               "notA": ["{x}は{e}に無料では入れません。"], "notB": ["{x}は{e}の入場料を払う必要がありません。"]},
        "zh": {"A": ["{x}可免费进入{e}。", "{e}对{x}免收门票。"],
               "B": ["{x}进入{e}需要买票。", "{e}对{x}照常收费。"],
               "notA": ["{x}不能免费进入{e}。"], "notB": ["{x}进入{e}不用买票。"]},
    },
    "rose": {
        "ents": COMPANIES, "slot": {"en": YEARS, "ja": YEARS, "zh": YEARS},
        "en": {"A": ["{e}'s revenue rose in {x}.", "In {x}, {e} grew its revenue."],
               "B": ["{e}'s revenue fell in {x}.", "In {x}, {e} saw its revenue shrink."],
               "notA": ["{e}'s revenue did not rise in {x}."], "notB": ["{e}'s revenue did not fall in {x}."]},
        "ja": {"A": ["{e}の{x}年の売上高は増加しました。", "{x}年、{e}は増収でした。"],
               "B": ["{e}の{x}年の売上高は減少しました。", "{x}年、{e}は減収でした。"],
               "notA": ["{e}の{x}年の売上高は増えませんでした。"], "notB": ["{e}の{x}年の売上高は減りませんでした。"]},
        "zh": {"A": ["{e}{x}年营收增长。", "{x}年{e}的收入上升了。"],
               "B": ["{e}{x}年营收下降。", "{x}年{e}的收入减少了。"],
               "notA": ["{e}{x}年营收没有增长。"], "notB": ["{e}{x}年营收没有下降。"]},
    },
    "only": {
        "ents": PLANS, "slot": FEATURES,  # {x}: the one included, {y}: another one
        "en": {"A": ["The {e} plan includes {x} only.", "{X} is the only extra in the {e} plan."],
               "B": ["The {e} plan includes both {x} and {y}.", "The {e} plan comes with {x} as well as {y}."],
               "notA": ["The {e} plan does not include just {x}."], "notB": ["The {e} plan does not include {y}."]},
        "ja": {"A": ["{e}プランに含まれるのは{x}だけです。", "{e}プランの特典は{x}のみです。"],
               "B": ["{e}プランには{x}と{y}の両方が含まれます。", "{e}プランでは{x}に加えて{y}も使えます。"],
               "notA": ["{e}プランに含まれるのは{x}だけではありません。"], "notB": ["{e}プランには{y}は含まれません。"]},
        "zh": {"A": ["{e}只包含{x}。", "{e}仅提供{x}这一项。"],
               "B": ["{e}同时包含{x}和{y}。", "{e}除了{x}还提供{y}。"],
               "notA": ["{e}不只包含{x}。"], "notB": ["{e}不包含{y}。"]},
    },
}
YES = {"en": "Yes, ", "ja": "はい、", "zh": "是的，"}
NO = {"en": "No, ", "ja": "いいえ、", "zh": "不，"}


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:]


def _fill(t: str, e: str, x: str, y: str) -> str:
    return _cap(t.format(e=e, x=x, X=_cap(x), y=y))


def _lower_first(s: str, lang: str) -> str:
    return s[:1].lower() + s[1:] if lang == "en" and not s[:2].isupper() else s


def _sample(lang: str, rng: random.Random) -> Iterator[tuple[str, str, str, int]]:
    name = rng.choice(list(FRAMES))
    fr = FRAMES[name]
    w = fr[lang]
    e1, e2 = rng.sample(fr["ents"][lang], 2)
    x, y = rng.sample(fr["slot"][lang], 2)
    state = rng.choice(["A", "B"])
    other = "B" if state == "A" else "A"
    if name == "only":  # the "only" state (A) and its opposite (B) are not symmetric: keep A
        state, other = "A", "B"
    f = lambda key, e=e1: _fill(rng.choice(w[key]), e, x, y)  # noqa: E731
    said = rng.choice(w[state])
    sents = [_fill(said, e1, x, y), _fill(rng.choice(w[other]), e2, x, y)]
    rng.shuffle(sents)
    premise = (" " if lang == "en" else "").join(sents)
    same = _fill(rng.choice([t for t in w[state] if t != said] or w[state]), e1, x, y)
    neg_other, opp, neg_same = f("not" + other), f(other), f("not" + state)
    pos = [("pol-same", same), ("pol-not-opposite", neg_other),
           ("pol-yes", YES[lang] + _lower_first(same, lang)),
           ("pol-no", NO[lang] + _lower_first(neg_other, lang))]
    negs = [("pol-opposite", opp), ("pol-not-same", neg_same),
            ("pol-other", _fill(rng.choice(w[other]), e1, x, y) if name != "only" else f("B")),
            ("pol-yes-wrong", YES[lang] + _lower_first(opp, lang)),
            ("pol-no-wrong", NO[lang] + _lower_first(rng.choice([opp, neg_same]), lang))]
    for kind, h in rng.sample(pos, 2):
        yield kind, premise, h, 1
    for kind, h in rng.sample(negs, 2):
        yield kind, premise, h, 0


def build(lang: str, n: int, seed: int = 0) -> Iterator[dict]:
    """About ``n`` pairs in ``lang``, half supported."""
    rng = random.Random(f"polarity-{seed}-{lang}")
    return collect(lambda: _sample(lang, rng), n, "synth_polarity", lang, max_draws=50 * n)


# Exceptions (data v5): a list of members and one named exception, as a roaming zone, a delivery
# area or accepted payment methods are written. Written after a dev-set failure: @4 scores an
# answer that puts the named exception in the list (P 0.99) as supported, since every word of it
# is in the context. The dev guard drops rows sharing 27 characters with the dev sets, the names
# and wordings here are not the dev case's, and the confirmation set (never read) checks it.
# {L}: the members as a list, {d}: the exception, {m}: one member.
COUNTRIES = {"en": ["France", "Spain", "Italy", "Norway", "Iceland", "Austria", "Greece", "Portugal", "Croatia", "Turkey", "Serbia"],
             "ja": ["フランス", "スペイン", "イタリア", "ノルウェー", "アイスランド", "オーストリア", "ギリシャ", "ポルトガル", "クロアチア", "トルコ", "セルビア"],
             "zh": ["法国", "西班牙", "意大利", "挪威", "冰岛", "奥地利", "希腊", "葡萄牙", "克罗地亚", "土耳其", "塞尔维亚"]}
METHODS = {"en": ["Visa", "Mastercard", "PayPal", "bank transfer", "Apple Pay", "American Express", "cash on delivery"],
           "ja": ["Visa", "Mastercard", "PayPay", "銀行振込", "Apple Pay", "アメリカン・エキスプレス", "代金引換"],
           "zh": ["Visa", "万事达卡", "支付宝", "银行转账", "微信支付", "美国运通", "现金"]}
EXCEPTIONS = {
    "roaming": {
        "ents": COUNTRIES,
        "en": {"list": ["Roaming at no extra cost covers {L}.", "Your plan works in {L} at home prices."],
               "out": ["{D} is outside the free roaming area.", "Calls and data in {D} are charged separately."],
               "in": ["You can use your plan in {M} without extra charges.", "{M} is inside the free roaming area."],
               "notin": ["{D} is not covered by the included roaming.", "Using your phone in {D} costs extra."]},
        "ja": {"list": ["追加料金なしのローミング対象国は{L}です。", "{L}では国内と同じ料金で使えます。"],
               "out": ["{D}はローミング対象外です。", "{D}での通話とデータ通信は別料金です。"],
               "in": ["{M}では追加料金なしで使えます。", "{M}はローミングの対象に含まれます。"],
               "notin": ["{D}は対象に含まれていません。", "{D}で使うと別料金がかかります。"]},
        "zh": {"list": ["免费漫游覆盖{L}。", "在{L}使用按国内资费计费。"],
               "out": ["{D}不在免费漫游范围内。", "在{D}的通话和流量另行收费。"],
               "in": ["在{M}使用不收额外费用。", "{M}属于免费漫游范围。"],
               "notin": ["{D}不包括在免费漫游内。", "在{D}使用需要额外付费。"]},
    },
    "delivery": {
        "ents": CITIES,
        "en": {"list": ["Same-day delivery is available in {L}.", "We deliver on the day of the order in {L}."],
               "out": ["{D} is not served same-day.", "Orders to {D} take two to three days."],
               "in": ["You can get same-day delivery in {M}.", "Orders in {M} arrive the same day."],
               "notin": ["Same-day delivery does not reach {D}.", "There is no same-day delivery in {D}."]},
        "ja": {"list": ["当日配送の対象地域は{L}です。", "{L}では注文当日にお届けします。"],
               "out": ["{D}は当日配送の対象外です。", "{D}へのお届けには2〜3日かかります。"],
               "in": ["{M}なら当日に届きます。", "{M}は当日配送を利用できます。"],
               "notin": ["{D}には当日配送がありません。", "{D}では当日配送は使えません。"]},
        "zh": {"list": ["当日达服务覆盖{L}。", "在{L}下单当天即可送达。"],
               "out": ["{D}不支持当日达。", "寄往{D}的订单需要两到三天。"],
               "in": ["在{M}可以当天送到。", "{M}的订单当天就能送达。"],
               "notin": ["{D}没有当日达服务。", "在{D}下单不能当天送到。"]},
    },
    "payment": {
        "ents": METHODS,
        "en": {"list": ["We accept {L}.", "You can pay by {L}."],
               "out": ["{D} is not accepted.", "We do not take {D}."],
               "in": ["Paying with {M} is possible.", "{M} is one of the accepted payment methods."],
               "notin": ["You cannot pay with {D}.", "{D} is not one of the payment options."]},
        "ja": {"list": ["お支払いには{L}をご利用いただけます。", "利用できる支払い方法は{L}です。"],
               "out": ["{D}はご利用いただけません。", "{D}には対応していません。"],
               "in": ["{M}で支払えます。", "{M}は利用できる支払い方法の一つです。"],
               "notin": ["{D}では支払えません。", "{D}は支払い方法に含まれていません。"]},
        "zh": {"list": ["支持{L}付款。", "可以使用{L}支付。"],
               "out": ["不支持{D}。", "{D}暂不可用。"],
               "in": ["可以用{M}付款。", "{M}是支持的付款方式之一。"],
               "notin": ["不能用{D}付款。", "{D}不在支持的付款方式中。"]},
    },
}
ALONG = {"en": "Yes, {D} is covered too, just like {L}.", "ja": "はい、{L}と同じく{D}も対象です。",
         "zh": "是的，{D}和{L}一样都包括在内。"}


def _join(items: list[str], lang: str) -> str:
    if lang == "en":
        return ", ".join(items[:-1]) + " and " + items[-1]
    if lang == "ja":
        return "、".join(items)
    return "、".join(items[:-1]) + "和" + items[-1]


def _exception_sample(lang: str, rng: random.Random) -> Iterator[tuple[str, str, str, int]]:
    fr = EXCEPTIONS[rng.choice(list(EXCEPTIONS))]
    w = fr[lang]
    names = rng.sample(fr["ents"][lang], rng.randint(4, 6))
    d, members = names[0], names[1:]
    m, m2 = rng.sample(members, 2)
    li, lo = rng.randrange(len(w["list"])), rng.randrange(len(w["out"]))
    sep = " " if lang == "en" else ""
    premise = sep.join([w["list"][li].format(L=_join(members, lang)),
                        _cap(w["out"][lo].format(D=d))])
    pick = lambda key, **kw: _cap(rng.choice(w[key]).format(**kw))  # noqa: E731
    some = _join(rng.sample([x for x in members if x != m], min(2, len(members) - 1)), lang)
    pos = [("exc-in", pick("in", M=m)), ("exc-notin", pick("notin", D=d)),
           ("exc-yes", YES[lang] + _lower_first(pick("in", M=m), lang)),
           ("exc-no", NO[lang] + _lower_first(pick("notin", D=d), lang)),
           ("exc-both", pick("in", M=m) + sep + pick("notin", D=d))]
    negs = [("exc-in-wrong", pick("in", M=d)), ("exc-notin-wrong", pick("notin", D=m)),
            ("exc-along", ALONG[lang].format(D=d, L=some)),
            ("exc-no-wrong", NO[lang] + _lower_first(pick("notin", D=m2), lang)),
            ("exc-both-wrong", pick("in", M=m) + sep + pick("in", M=d))]
    for kind, h in rng.sample(pos, 2):
        yield kind, premise, h, 1
    for kind, h in rng.sample(negs, 2):
        yield kind, premise, h, 0


def build_exceptions(lang: str, n: int, seed: int = 0) -> Iterator[dict]:
    """About ``n`` list-with-an-exception pairs in ``lang``, half supported."""
    rng = random.Random(f"exceptions-{seed}-{lang}")
    return collect(lambda: _exception_sample(lang, rng), n, "synth_polarity", lang,
                   max_draws=50 * n)
