"""Template-generated RAG pairs about invented products, policies, drugs and companies (EN/JA/ZH).

Every name and number is invented here, so there is no licence to track. A *frame* is one kind of
fact (a price, a return window, a dose...) with several context wordings and several different
answer wordings, so a faithful answer never repeats the context's sentence. The context holds the
target fact and the same fact about 1-3 other entities (distractors), sometimes split into two
passages; answers are what an LLM writes: reworded, fused, "Yes."/"No." plus a restatement, terse.
Unfaithful answers are mostly right with one wrong part.

Data v2: a "Yes."/"No." particle no longer decides the label (v1 had "No." + statement only as a
positive, so the shipped model scored "No, <anything>" near 1 and the statement alone near 0):
``neg-plain`` is the negative statement without the particle (label 1), ``no-wrong`` "No." + a
false statement (label 0); and ``no-neg`` is made only for frames with exact values
(``THRESHOLD_FRAMES``).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Iterator

PLANS = {"en": ["Basic", "Standard", "Pro", "Business", "Team", "Enterprise", "Starter", "Plus", "Premium", "Lite"],
         "ja": ["ベーシック", "スタンダード", "プロ", "ビジネス", "チーム", "エンタープライズ", "スターター", "プラス", "プレミアム", "ライト"],
         "zh": ["基础版", "标准版", "专业版", "商务版", "团队版", "企业版", "入门版", "增强版", "高级版", "轻量版"]}
GOODS = {"en": ["electronics", "clothing", "furniture", "books", "cosmetics", "shoes", "toys", "kitchenware"],
         "ja": ["家電製品", "衣料品", "家具", "書籍", "化粧品", "靴", "おもちゃ", "キッチン用品"],
         "zh": ["电子产品", "服装", "家具", "图书", "化妆品", "鞋类", "玩具", "厨具"]}
DRUGS = ["Corvexa", "Lumidol", "Nefrazine", "Tavoril", "Ostarel", "Pirexin", "Dalvento", "Sumerol", "Quenatab", "Veltrix"]
DRUGS_ZH = ["科维沙", "卢米朵", "奈法嗪", "塔沃利", "奥斯塔", "皮瑞辛", "达文托", "舒美洛", "昆纳他", "维特瑞"]
DRUGS_JA = ["コルベクサ", "ルミドール", "ネフラジン", "タボリル", "オスタレル", "ピレキシン", "ダルベント", "スメロール", "クエナタブ", "ベルトリクス"]
COMPANIES = {"en": ["Halden Robotics", "Marrow & Finch", "Quillstone Bank", "Northway Foods", "Brightwater Labs",
                    "Kestrel Motors", "Orchid Textiles", "Tamsin Software", "Greyfield Energy", "Alder Pharma"],
             "ja": ["ハルデン工業", "真野精機", "北陽銀行", "青葉食品", "明石化学", "東雲自動車", "若草繊維", "光和ソフト", "灰田電力", "桐生製薬"],
             "zh": ["海登机器人", "明远集团", "青石银行", "北方食品", "碧水实验室", "鹰隼汽车", "兰花纺织", "天骄软件", "灰原能源", "赤杉制药"]}
CITIES = {"en": ["Boston", "Denver", "Osaka", "Lyon", "Toronto", "Seoul", "Munich", "Austin", "Dublin", "Melbourne"],
          "ja": ["大阪", "札幌", "福岡", "名古屋", "仙台", "横浜", "神戸", "京都", "広島", "金沢"],
          "zh": ["上海", "深圳", "杭州", "成都", "武汉", "南京", "西安", "苏州", "天津", "重庆"]}
PLACES = {"en": ["library", "swimming pool", "museum", "pharmacy", "service desk", "gym", "visitor centre", "post office"],
          "ja": ["図書館", "プール", "博物館", "薬局", "サービスカウンター", "ジム", "ビジターセンター", "郵便窓口"],
          "zh": ["图书馆", "游泳馆", "博物馆", "药房", "服务台", "健身房", "游客中心", "邮政窗口"]}
STAFF = {"en": ["full-time employees", "part-time staff", "contractors", "interns", "managers", "new hires"],
         "ja": ["正社員", "パート従業員", "契約社員", "インターン", "管理職", "新入社員"],
         "zh": ["全职员工", "兼职员工", "合同工", "实习生", "管理人员", "新入职员工"]}
FEATURES = {"en": ["screen sharing", "single sign-on", "API access", "audit logs", "priority support", "custom domains", "data export"],
            "ja": ["画面共有", "シングルサインオン", "API連携", "監査ログ", "優先サポート", "独自ドメイン", "データエクスポート"],
            "zh": ["屏幕共享", "单点登录", "API接口", "审计日志", "优先支持", "自定义域名", "数据导出"]}


def _price(lang, rng):
    v = rng.choice([5, 8, 9, 12, 15, 19, 20, 25, 29, 30, 39, 45, 49, 59, 79, 99])
    return {"en": f"${v}", "ja": f"{v * 100:,}円", "zh": f"{v * 6}元"}[lang]


def _days(lang, rng):
    v = rng.choice([7, 10, 14, 15, 21, 30, 45, 60, 90])
    return {"en": f"{v} days", "ja": f"{v}日", "zh": f"{v}天"}[lang]


def _users(lang, rng):
    v = rng.choice([1, 3, 5, 10, 20, 25, 50, 100, 250])
    return {"en": f"{v}", "ja": f"{v}人", "zh": f"{v}人"}[lang]


def _mg(lang, rng):
    v = rng.choice([5, 10, 20, 25, 40, 50, 100, 150, 200, 250, 500])
    return f"{v} mg" if lang == "en" else f"{v}mg"


def _year(lang, rng):
    v = rng.randint(1890, 2018)
    return {"en": f"{v}", "ja": f"{v}年", "zh": f"{v}年"}[lang]


def _time(lang, rng):
    h = rng.choice([6, 7, 8, 9, 10, 11])
    m = rng.choice([0, 30])
    return {"en": f"{h}:{m:02d} a.m.", "ja": f"午前{h}時" + ("半" if m else ""), "zh": f"上午{h}点" + ("半" if m else "")}[lang]


def _leave(lang, rng):
    v = rng.choice([5, 8, 10, 12, 15, 18, 20, 25])
    return {"en": f"{v} days", "ja": f"{v}日", "zh": f"{v}天"}[lang]


def _pick(pool):
    return lambda lang, rng: rng.choice(pool[lang])


# Each frame: ents(lang) list, val(lang, rng), ctx/ans/neg/q templates per language, gen = overgeneralization.
FRAMES = {
    "price": dict(
        ents=PLANS, val=_price,
        ctx={"en": ["The {e} plan costs {v} per month.", "{e}: {v} per user per month, billed monthly.",
                    "Customers on the {e} tier are charged {v} each month."],
             "ja": ["{e}プランの料金は月額{v}です。", "{e}プラン：1ユーザーあたり月額{v}（月払い）。", "{e}プランをご利用の場合、毎月{v}が請求されます。"],
             "zh": ["{e}的价格为每月{v}。", "{e}：每位用户每月{v}，按月计费。", "选择{e}的客户每月需支付{v}。"]},
        ans={"en": ["The {e} plan is priced at {v} a month.", "A subscription to {e} is {v} monthly.", "You pay {v} every month for the {e} plan."],
             "ja": ["{e}プランは毎月{v}かかります。", "月々{v}で{e}プランを利用できます。", "{e}プランの月額は{v}となっています。"],
             "zh": ["{e}每个月收费{v}。", "订阅{e}的话，每月要付{v}。", "{e}的月费是{v}。"]},
        neg={"en": ["The {e} plan does not cost {v} a month."], "ja": ["{e}プランの月額は{v}ではありません。"], "zh": ["{e}的月费不是{v}。"]},
        q={"en": "How much does the {e} plan cost per month?", "ja": "{e}プランの月額はいくらですか？", "zh": "{e}每月多少钱？"},
        gen={"en": "Every plan costs {v} per month.", "ja": "すべてのプランが月額{v}です。", "zh": "所有套餐每月都是{v}。"}),
    "returns": dict(
        ents=GOODS, val=_days,
        ctx={"en": ["Unused {e} can be returned within {v} of delivery.", "Returns of {e} are accepted up to {v} after delivery, provided the item is unused."],
             "ja": ["{e}は、商品到着日を含めて{v}以内に限り、未開封品の返品に応じます。", "{e}の返品期限：受け取りから{v}（未開封品のみ）。"],
             "zh": ["未使用的{e}自签收之日起{v}内可以退货。", "{e}在收货后{v}内、未经使用的情况下可申请退货。"]},
        ans={"en": ["You have {v} after delivery to send back unused {e}.", "If unused, {e} may be returned for up to {v} after they arrive."],
             "ja": ["{e}は、開けていなければ受け取ってから{v}のうちは返品できます。", "未開封の{e}なら、到着後{v}以内に限って返品が可能です。"],
             "zh": ["{e}只要没用过，收到后{v}以内都能退。", "没有使用过的{e}，签收后{v}内可以退回。"]},
        neg={"en": ["Unused {e} cannot be returned within {v} of delivery."], "ja": ["未開封の{e}でも、到着後{v}以内の返品はできません。"], "zh": ["未使用的{e}在收货后{v}内也不能退货。"]},
        q={"en": "How long do I have to return {e}?", "ja": "{e}の返品期限は？", "zh": "{e}多久内可以退货？"},
        gen={"en": "All products, used or not, can be returned within {v}.", "ja": "開封済みも含め、どの商品も{v}以内なら返品できます。", "zh": "所有商品无论是否使用，{v}内都可以退货。"}),
    "seats": dict(
        ents=PLANS, val=_users,
        ctx={"en": ["The {e} plan allows up to {v} team members.", "{e} workspaces are limited to {v} users."],
             "ja": ["{e}プランでは最大{v}までメンバーを追加できます。", "{e}プランのワークスペースは{v}までに制限されています。"],
             "zh": ["{e}最多可添加{v}名成员。", "{e}的工作区最多支持{v}。"]},
        ans={"en": ["A {e} workspace can have at most {v} users.", "Up to {v} people can join a team on the {e} plan."],
             "ja": ["{e}プランは最大で{v}が利用できます。", "{e}プランで使えるのは{v}までです。"],
             "zh": ["{e}的团队上限是{v}。", "用{e}的话，一个团队最多{v}。"]},
        neg={"en": ["The {e} plan does not allow {v} users."], "ja": ["{e}プランでは{v}まで利用することはできません。"], "zh": ["{e}不支持{v}使用。"]},
        q={"en": "How many users can the {e} plan have?", "ja": "{e}プランは何人まで使えますか？", "zh": "{e}最多支持多少人？"},
        gen={"en": "Every plan allows up to {v} users.", "ja": "どのプランでも{v}まで利用できます。", "zh": "所有套餐都最多支持{v}。"}),
    "dose": dict(
        ents={"en": DRUGS, "ja": DRUGS_JA, "zh": DRUGS_ZH}, val=_mg,
        ctx={"en": ["The usual adult dose of {e} is {v} taken once daily.", "For adults, {e} is prescribed at {v} once a day."],
             "ja": ["{e}の通常の成人用量は1日1回{v}です。", "成人には{e}を1日1回{v}投与する。"],
             "zh": ["{e}的成人常用剂量为每日一次，每次{v}。", "成人服用{e}，通常每天一次，每次{v}。"]},
        ans={"en": ["Adults normally take {v} of {e} once a day.", "The standard adult dosage of {e} is {v}, once per day."],
             "ja": ["大人は通常、{e}を1日1回{v}服用します。", "{e}は成人なら1日1回、{v}が標準です。"],
             "zh": ["成年人一般每天吃一次{e}，一次{v}。", "{e}成人标准用量是一天一次、每次{v}。"]},
        neg={"en": ["The adult dose of {e} is not {v} once daily."], "ja": ["{e}の成人用量は1日1回{v}ではありません。"], "zh": ["{e}的成人剂量不是每天一次{v}。"]},
        q={"en": "What is the adult dose of {e}?", "ja": "{e}の大人の用量は？", "zh": "{e}成人用量是多少？"},
        gen={"en": "All of these medicines are taken at {v} once a day.", "ja": "これらの薬はすべて1日1回{v}です。", "zh": "这些药物的剂量都是每天一次{v}。"}),
    "founded": dict(
        ents=COMPANIES, val=_year,
        ctx={"en": ["{e} was founded in {v}.", "Established in {v}, {e} grew from a small workshop into a national firm."],
             "ja": ["{e}は{v}に創業した。", "{v}に設立された{e}は、小さな工房から全国規模の企業に成長した。"],
             "zh": ["{e}成立于{v}。", "{e}创立于{v}，从一家小作坊发展成为全国性企业。"]},
        ans={"en": ["{e} has been around since {v}.", "The company {e} dates back to {v}."],
             "ja": ["{e}の創業は{v}です。", "{e}は{v}から続く会社です。"],
             "zh": ["{e}是{v}创办的。", "{e}的历史可以追溯到{v}。"]},
        neg={"en": ["{e} was not founded in {v}."], "ja": ["{e}は{v}に創業したわけではありません。"], "zh": ["{e}并不是{v}成立的。"]},
        q={"en": "When was {e} founded?", "ja": "{e}はいつ創業しましたか？", "zh": "{e}是哪一年成立的？"},
        gen={"en": "All of these companies were founded in {v}.", "ja": "これらの会社はすべて{v}に創業した。", "zh": "这些公司都成立于{v}。"}),
    "hq": dict(
        ents=COMPANIES, val=_pick(CITIES),
        ctx={"en": ["{e} is headquartered in {v}.", "The head office of {e} is located in {v}."],
             "ja": ["{e}は{v}に本社を置いている。", "{e}の本社所在地は{v}である。"],
             "zh": ["{e}总部设在{v}。", "{e}的总部位于{v}。"]},
        ans={"en": ["{e}'s main office is in {v}.", "{e} runs its business from headquarters in {v}."],
             "ja": ["{e}の本社は{v}にあります。", "{e}は{v}を拠点としています。"],
             "zh": ["{e}的总部在{v}。", "{e}把总部放在了{v}。"]},
        neg={"en": ["{e} is not headquartered in {v}."], "ja": ["{e}の本社は{v}にはありません。"], "zh": ["{e}的总部不在{v}。"]},
        q={"en": "Where is {e} headquartered?", "ja": "{e}の本社はどこですか？", "zh": "{e}的总部在哪里？"},
        gen={"en": "All of the group's companies are based in {v}.", "ja": "グループ会社はすべて{v}に本社がある。", "zh": "集团所有公司的总部都在{v}。"}),
    "hours": dict(
        ents=PLACES, val=_time,
        ctx={"en": ["The {e} opens at {v} on weekdays.", "On weekdays the {e} is open from {v}."],
             "ja": ["{e}は平日{v}に開館します。", "平日の{e}の開始時刻は{v}です。"],
             "zh": ["{e}工作日{v}开门。", "工作日{e}从{v}开始开放。"]},
        ans={"en": ["From Monday to Friday, the {e} opens its doors at {v}.", "On weekdays you can get into the {e} from {v}."],
             "ja": ["平日なら{e}は{v}から利用できます。", "{e}は月曜から金曜まで{v}に開きます。"],
             "zh": ["周一到周五，{e}{v}就开门了。", "工作日的时候，{e}从{v}起可以进入。"]},
        neg={"en": ["The {e} does not open at {v} on weekdays."], "ja": ["{e}は平日{v}には開きません。"], "zh": ["{e}工作日不是{v}开门。"]},
        q={"en": "What time does the {e} open on weekdays?", "ja": "{e}は平日何時に開きますか？", "zh": "{e}工作日几点开门？"},
        gen={"en": "The {e} always opens at {v}, weekends included.", "ja": "{e}は土日も含めて毎日{v}に開きます。", "zh": "{e}包括周末在内每天都是{v}开门。"}),
    "leave": dict(
        ents=STAFF, val=_leave,
        ctx={"en": ["{e} receive {v} of paid leave per year.", "The annual paid-leave allowance for {e} is {v}."],
             "ja": ["{e}には年間{v}の有給休暇が付与される。", "{e}の年次有給休暇は{v}です。"],
             "zh": ["{e}每年享有{v}带薪年假。", "{e}的年度带薪假期为{v}。"]},
        ans={"en": ["Each year, {e} get {v} off with pay.", "{e} are entitled to {v} of paid time off annually."],
             "ja": ["{e}は毎年{v}の有給を取得できます。", "{e}の有休は1年に{v}です。"],
             "zh": ["{e}一年可以休{v}带薪假。", "{e}每年有{v}的带薪休假。"]},
        neg={"en": ["{e} do not receive {v} of paid leave per year."], "ja": ["{e}には年間{v}の有給休暇はありません。"], "zh": ["{e}每年没有{v}带薪年假。"]},
        q={"en": "How much paid leave do {e} get?", "ja": "{e}の有給休暇は何日ですか？", "zh": "{e}有几天带薪年假？"},
        gen={"en": "Every employee, whatever the contract, gets {v} of paid leave.", "ja": "雇用形態に関係なく、全従業員に{v}の有給休暇がある。", "zh": "所有员工不论合同类型，每年都有{v}带薪年假。"}),
}

FEATURE_CTX = {"en": ("The {e} plan includes {v}.", "{v} is not offered on the {e} plan."),
               "ja": ("{e}プランには{v}が含まれます。", "{e}プランでは{v}はご利用いただけません。"),
               "zh": ("{e}包含{v}。", "{e}不提供{v}。")}
FEATURE_ANS = {"en": ("{v} comes with the {e} plan.", "The {e} plan does not include {v}."),
               "ja": ("{e}プランなら{v}も使えます。", "{e}プランには{v}は付いていません。"),
               "zh": ("{e}可以使用{v}。", "{e}里没有{v}。")}
FEATURE_Q = {"en": "Does the {e} plan include {v}?", "ja": "{e}プランで{v}は使えますか？", "zh": "{e}有{v}吗？"}

# frames whose value is a limit ("within 14 days", "up to 10 users", "15 days of leave"), where
# "not <another value>" can be false or unclear: no negative-statement positives for them
THRESHOLD_FRAMES = frozenset({"returns", "seats", "leave"})

YES = {"en": "Yes. ", "ja": "はい。", "zh": "是的。"}
NO = {"en": "No. ", "ja": "いいえ。", "zh": "不是。"}
AND = {"en": " ", "ja": "", "zh": ""}
FUSE = {"en": "{a} and {b}", "ja": "{a}。また、{b}", "zh": "{a}，而{b}"}


def _lc(s: str) -> str:
    return s[0].lower() + s[1:] if s and not s[:2].isupper() else s


def _fuse(a: str, b: str, lang: str) -> str:
    a = a.rstrip("。.")
    if lang == "en":
        return f"{a}, and {_lc(b)}"
    return FUSE[lang].format(a=a, b=b)


def distinct_values(fr: dict, lang: str, rng: random.Random, k: int) -> list[str]:
    """``k`` different values of frame ``fr`` (its ``val`` drawn until ``k`` distinct)."""
    vals: list[str] = []
    while len(vals) < k:
        v = fr["val"](lang, rng)
        if v not in vals:
            vals.append(v)
    return vals


def _sample(lang: str, rng: random.Random) -> Iterator[tuple[str, str, str, int]]:
    """One context and several (kind, premise, hypothesis, label) for it."""
    name = rng.choice(list(FRAMES))
    fr = FRAMES[name]
    ents = rng.sample(fr["ents"][lang], k=rng.randint(2, 4))
    vals = distinct_values(fr, lang, rng, len(ents) + 1)
    spare = vals.pop()          # a value that is nowhere in the context
    facts = list(zip(ents, vals, strict=True))
    sents = [rng.choice(fr["ctx"][lang]).format(e=e, v=v) for e, v in facts]
    # some unrelated facts from another frame about other entities, as in a real retrieved chunk
    other = FRAMES[rng.choice([k for k in FRAMES if k != name])]
    oe = rng.choice(other["ents"][lang])
    sents.append(rng.choice(other["ctx"][lang]).format(e=oe, v=other["val"](lang, rng)))
    rng.shuffle(sents)
    sep = " " if lang == "en" else ""
    if rng.random() < 0.4 and len(sents) >= 3:
        cut = rng.randint(1, len(sents) - 1)
        premise = sep.join(sents[:cut]) + "\n\n" + sep.join(sents[cut:])
    else:
        premise = sep.join(sents)
    (e1, v1), (e2, v2) = facts[0], facts[1]
    ans = fr["ans"][lang]
    a = lambda e, v: rng.choice(ans).format(e=e, v=v)  # noqa: E731
    neg = lambda e, v: rng.choice(fr["neg"][lang]).format(e=e, v=v)  # noqa: E731
    q = fr["q"][lang].format(e=e1)
    pos = [("reword", a(e1, v1)), ("reword", a(e1, v1)), ("fuse", _fuse(a(e1, v1), a(e2, v2), lang)),
           ("yes", YES[lang] + a(e1, v1)), ("terse", f"{q} {v1}"),
           ("restate", (f"{q} " if rng.random() < 0.5 else "") + a(e1, v1))]
    if name not in THRESHOLD_FRAMES:
        # "X is not <another value>" is true only where the value is exact: "cannot be returned
        # within 15 days" is false when the window is 14 days (a threshold, not an exact value)
        wrong = v2 if rng.random() < 0.5 else spare
        pos += [("no-neg", NO[lang] + neg(e1, wrong)), ("neg-plain", neg(e1, wrong))]
    negs = [("swap-distractor", a(e1, v2)), ("swap-value", a(e1, spare)), ("negation", neg(e1, v1)),
            ("attribution", a(e2, v1)), ("fuse-wrong", _fuse(a(e1, v1), a(e2, v1 if rng.random() < 0.5 else spare), lang)),
            ("terse-wrong", f"{q} {v2}"), ("yes-wrong", YES[lang] + a(e1, v2)),
            ("no-wrong", NO[lang] + (neg(e1, v1) if rng.random() < 0.5 else a(e1, v2))),
            ("overgeneralize", fr["gen"][lang].format(e=e1, v=v1)),
            ("addition", _addition(lang, e1, v1, a, name, rng))]
    for kind, h in rng.sample(pos, 2):
        yield kind, premise, h, 1
    for kind, h in rng.sample(negs, 2):
        yield kind, premise, h, 0


def _addition(lang, e1, v1, a, name, rng):
    other = rng.choice([k for k in FRAMES if k != name])
    fr = FRAMES[other]
    extra = rng.choice(fr["ans"][lang]).format(e=rng.choice(fr["ents"][lang]), v=fr["val"](lang, rng))
    return _fuse(a(e1, v1), extra, lang)


def _feature_sample(lang: str, rng: random.Random) -> Iterator[tuple[str, str, str, int]]:
    plans = rng.sample(PLANS[lang], 2)
    feats = rng.sample(FEATURES[lang], 3)
    inc, exc = FEATURE_CTX[lang]
    yes_a, no_a = FEATURE_ANS[lang]
    sep = " " if lang == "en" else ""
    # plan 0 includes f0, excludes f1; plan 1 includes f1
    up = lambda s: s[0].upper() + s[1:]  # noqa: E731
    sents = [up(inc.format(e=plans[0], v=feats[0])), up(exc.format(e=plans[0], v=feats[1])),
             up(inc.format(e=plans[1], v=feats[1]))]
    rng.shuffle(sents)
    premise = sep.join(sents)
    q1 = FEATURE_Q[lang].format(e=plans[0], v=feats[1])
    pos = [("no-answer", NO[lang] + no_a.format(e=plans[0], v=feats[1])),
           ("neg-plain", up(no_a.format(e=plans[0], v=feats[1]))),
           ("fuse", _fuse(NO[lang] + no_a.format(e=plans[0], v=feats[1]), up(yes_a.format(e=plans[1], v=feats[1])), lang)),
           ("yes", YES[lang] + up(yes_a.format(e=plans[0], v=feats[0]))),
           ("terse", f"{q1} " + NO[lang].strip())]
    negs = [("yes-wrong", YES[lang] + up(yes_a.format(e=plans[0], v=feats[1]))),
            ("attribution", up(yes_a.format(e=plans[1], v=feats[0]))),
            ("negation", no_a.format(e=plans[0], v=feats[0])),
            ("addition", _fuse(up(yes_a.format(e=plans[0], v=feats[0])), yes_a.format(e=plans[0], v=feats[2]), lang)),
            ("terse-wrong", f"{q1} " + YES[lang].strip()),
            ("no-wrong", NO[lang] + no_a.format(e=plans[0], v=feats[0]))]
    for kind, h in rng.sample(pos, 2):
        yield kind, premise, h, 1
    for kind, h in rng.sample(negs, 2):
        yield kind, premise, h, 0


def collect(draw: Callable[[], Iterable[tuple[str, str, str, int]]], n: int, source: str,
            lang: str, max_draws: int | None = None) -> Iterator[dict]:
    """Rows from repeated ``draw()`` calls (each a few (kind, premise, hypothesis, label)) until
    ``n`` distinct (premise, hypothesis) pairs, or ``max_draws`` calls."""
    seen: set[tuple[str, str]] = set()
    made = draws = 0
    while made < n and (max_draws is None or draws < max_draws):
        draws += 1
        for kind, p, h, y in draw():
            if (p, h) in seen:
                continue
            seen.add((p, h))
            made += 1
            yield {"premise": p, "hypothesis": h, "label": y, "source": source, "lang": lang, "kind": kind}


def build(lang: str, n: int, seed: int = 0) -> Iterator[dict]:
    """About n pairs in `lang`, half supported."""
    rng = random.Random(f"{seed}-{lang}")
    return collect(lambda: (_feature_sample if rng.random() < 0.15 else _sample)(lang, rng), n,
                   "synth_templates", lang)
