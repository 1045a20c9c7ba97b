"""Bare person names in running text, without a marker (``privacy.unmarked_names``, off by default).

The built-in ``person`` recogniser of :mod:`ragpulse.scorer.privacy` only replaces names the text
marks (``Mr.``, ``さん``, ``先生``, ``Name:``). This one adds the common unmarked patterns, by name
lists rather than a model, so it is fast, deterministic and predictable, and it misses what is
not on the lists:

* English and romanised names: a common given name (English, Japanese) followed by a
  capitalised surname (``Taro Yamada``, ``Jane Doe``, ``John F. Kennedy``); a common Japanese
  surname followed by a common Japanese given name (``Yamada Taro``); a common Chinese surname
  next to a pinyin given name, either order (``Wang Xiaoming``, ``Xiaoming Wang``).
* Japanese: one of about 100 common two-character surnames followed by a one- to three-kanji
  given name and then a particle, punctuation or the end (``山田太郎は``, ``佐藤花子、``).
* Chinese: one of about 50 common surnames (those that rarely start an ordinary word) followed
  by a two-character given name, between a sentence boundary or a verb that takes a person
  (``叫``, ``和``, ``给``...) and punctuation or a verb of speech (``王小明说``, ``，李明华表示``).

Words that merely look like names are excluded where a list would take them: place and
organisation words after a given name (``Grace Church``), given-name characters that belong to
places and institutions (``山口県``, ``千葉大学``), fixed phrases (``Feng Shui``, ``Yin Yang``).
The false-positive rate on name-free text is measured by ``bench/name_false_positives.py``
(docs/reliability.md). Every pattern is linear in the text (bounded repetitions, one anchor).
Thread-safe: module-level compiled patterns only.
"""

from __future__ import annotations

import re

__all__ = ["unmarked_name_spans"]

# -- lists ------------------------------------------------------------------------------------

# Common English given names, without those that are also ordinary words, months or places
# (Will, Grace, May, June, Georgia, Jordan, Paris, Victoria, Hope, Mark, Bill, Rose...).
_EN_GIVEN = """
James John Robert Michael David Richard Joseph Thomas Charles Christopher Daniel Matthew Anthony
Donald Steven Paul Andrew Joshua Kenneth Kevin Brian George Timothy Ronald Edward Jason Jeffrey
Ryan Jacob Gary Nicholas Eric Jonathan Stephen Larry Justin Scott Brandon Benjamin Samuel Gregory
Alexander Patrick Jack Dennis Jerry Tyler Aaron Jose Adam Nathan Henry Douglas Zachary Peter Kyle
Walter Ethan Jeremy Harold Keith Christian Roger Noah Gerald Carl Terry Sean Austin Arthur
Lawrence Jesse Dylan Bryan Joe Jordan Billy Bruce Albert Willie Gabriel Logan Alan Juan Wayne
Roy Ralph Randy Eugene Vincent Russell Elijah Louis Bobby Philip Johnny Mary Patricia Jennifer
Linda Elizabeth Barbara Susan Jessica Sarah Karen Nancy Lisa Betty Margaret Sandra Ashley
Kimberly Emily Donna Michelle Dorothy Carol Amanda Melissa Deborah Stephanie Rebecca Sharon
Laura Cynthia Kathleen Amy Shirley Angela Helen Anna Brenda Pamela Nicole Emma Samantha
Katherine Christine Debra Rachel Catherine Carolyn Janet Ruth Maria Heather Diane Virginia Julie
Joyce Evelyn Joan Kelly Christina Lauren Judith Olivia Martha Cheryl Megan Andrea Hannah Jacqueline
Ann Jean Alice Kathryn Gloria Teresa Doris Sara Janice Julia Marie Madison Grace Judy Theresa
Beverly Denise Marilyn Amber Danielle Abigail Brittany Diana Natalie Sophia Alexis Lori Kayla
Jane Jim Tom Bob Mike Dave Steve Chris Dan Tony Matt Andy Ben Sam Nick Alex Jeff Greg Pete Ted
Fred Harry Oliver Charlotte Amelia Isabella Mia Ava Lucy Sophie Chloe Ella Liam Lucas Mason Leo
""".split()
_EN_GIVEN = [n for n in _EN_GIVEN if n not in {"Jordan", "Virginia", "Grace", "Christian"}]

_JA_GIVEN_ROMAJI = """
Taro Jiro Ichiro Saburo Hanako Kenji Hiroshi Takeshi Akira Haruto Yuto Sota Kenta Daisuke
Shota Naoki Kazuki Yusuke Satoshi Makoto Minoru Tomoko Yoko Keiko Akiko Yumi Sakura Yui Hina
Misaki Kaori Emi Ayumi Haruka Nanami Kenichi Shinji Takumi Ryota Yoshiko Michiko Hiroko Kazuko
Noriko Masato Takashi Tetsuya Koji Yuichi Shunsuke Hideki Hiroki Yuka Mayumi Naoko Junko
Kumiko Masako Sachiko Yukiko Rie Ayaka Miyu Riko Kohei Sho Tsubasa Yuya Ryo Hayato Daiki
""".split()
_JA_SURNAME_ROMAJI = """
Sato Suzuki Takahashi Tanaka Watanabe Ito Yamamoto Nakamura Kobayashi Kato Yoshida Yamada
Sasaki Yamaguchi Matsumoto Inoue Kimura Hayashi Saito Shimizu Yamazaki Ikeda Hashimoto
Yamashita Ishikawa Nakajima Maeda Fujita Ogawa Goto Okada Hasegawa Murakami Kondo Ishii
Sakamoto Endo Aoki Fujii Nishimura Fukuda Ota Miura Fujiwara Okamoto Matsuda Nakagawa Nakano
Harada Ono Tamura Takeuchi Kaneko Wada Nakayama Ishida Ueda Morita Shibata Sakai Kudo
Yokoyama Miyazaki Miyamoto Uchida Takagi Ando Shimada Taniguchi Ohno Takada Maruyama Imai
""".split()
# Chinese surnames in pinyin. Not Kong (Hong Kong), Ming, Hong: they start place names.
_ZH_SURNAME_PINYIN = """
Wang Li Zhang Liu Chen Yang Huang Zhao Wu Zhou Xu Sun Ma Zhu Hu Guo He Gao Lin Luo Zheng Liang
Xie Song Tang Han Feng Deng Cao Peng Zeng Xiao Tian Dong Pan Yuan Cai Jiang Yu Du Ye Cheng Wei
Su Lu Ding Ren Shen Yao Cui Zhong Tan Fan Liao Jia Xia Fu Fang Zou Meng Xiong Qin Qiu Xue Yan
Duan Lei Hou Shi Tao Gu Mao Hao Gong Shao Qian Dai
""".split()
# Two-word phrases of Chinese origin that are not names.
_PINYIN_PHRASES = frozenset({"feng shui", "yin yang", "tai chi", "kung fu", "dim sum", "wu xing",
                             "mao tai", "qi gong", "chow mein", "lo mein", "bok choy"})
# Capitalised words that follow a given name in place and organisation names (Grace Church,
# Albert Hall, George Street): the pair is then not a person.
_NOT_SURNAMES = frozenset("""
Street St Road Avenue Ave Boulevard Lane Drive Square Place Park Bridge River Lake Bay Beach
Island Islands Mountain Mount Valley Hill Hills County City Town Village Station Airport Port
Harbour Harbor Hall Center Centre Church Cathedral Chapel School College University Academy
Institute Hospital Museum Library Theatre Theater Stadium Arena Hotel Tower House Palace Castle
Court Company Corporation Corp Inc Ltd Group Foundation Trust Fund Bank Award Awards Prize
Cup Trophy Medal Day Festival Memorial Monument Building Gardens Garden Zoo Fort Field Forest
Dam Canal Highway Motorway Line Railway Prison Reservoir Temple Shrine Mosque Society Club
Records Studios Pictures Press News Times Post Journal Magazine Review Show Series Band
Orchestra Choir Party Act Law Treaty Plan Program Programme Project Mission Crater Glacier
Peninsula Falls Creek Canyon Desert Sea Ocean Strait Channel Gulf Cove Point Cape Head
Publishing Publishers Books Media Entertainment Productions Films Music Software Systems
Technologies Airlines Motors Tree
The A An And But Or If When While After Before Since Then In On At Of For To From By With As He
She It They We This That These Those His Her Its Their There Here
""".split())

# Japanese: common two-character surnames (single-character ones such as 林, 森, 原 are ordinary
# words too often to be used without a marker).
_JA_SURNAMES = """
佐藤 鈴木 高橋 田中 伊藤 渡辺 渡邊 山本 中村 小林 加藤 吉田 山田 佐々木 山口 松本 井上 木村 斎藤 斉藤
清水 山崎 池田 橋本 阿部 石川 山下 中島 石井 小川 前田 岡田 長谷川 藤田 後藤 近藤 村上 遠藤 青木
坂本 福田 太田 西村 藤井 金子 岡本 藤原 中野 三浦 原田 中川 松田 竹内 小野 田村 中山 和田 石田
森田 上田 柴田 酒井 工藤 横山 宮崎 宮本 内田 高木 安藤 島田 谷口 大野 高田 丸山 今井 河野 藤本
村田 武田 上野 杉山 増田 小山 大塚 平野 菅原 久保 松井 千葉 岩崎 桜井 木下 野口 松尾 菊地 野村 新井
""".split()
# Chinese: common surnames that seldom begin an ordinary word. Left out on purpose: 张 (一张),
# 高, 马 (马上), 周 (周末), 黄 (黄金), 何 (如何), 林, 金, 方, 于, 白, 石, 江, 程, 钱, 万, 向, 田, 谢
# (谢谢), 韩 (韩国), 范 (范围), 曾 (曾经), 夏 (夏天), 钟 (钟表), 陆 (陆续), 段 (段落), 孙 (孙子),
# 罗 (罗马), 宋/唐/秦 (dynasties), 苏 (苏联), 熊 (熊猫), 叶 (叶子), 董 (董事), 胡 (胡说).
_ZH_SURNAMES = "王李刘陈杨赵吴徐朱郭郑梁冯邓曹彭肖袁潘蒋蔡杜魏吕丁沈姚卢姜崔谭汪廖贾韦邹孟邱薛闫雷侯郝龚邵覃戴莫汤"
# Characters that make the "given name" a place, an institution or a common noun instead.
_NOT_GIVEN = ("県市区町村郡都府道州省駅站線港湾社店院校園館局署課学会党軍庁屋城寺宮神社橋川島湖池"
              "山岳谷通丁号番的了在是有和不这那们个上下内外中间时年月日后前里国家人多少会能可要"
              "就也都而及与或被把从对为以于之其所等氏様君殿方部長員側製語版式型性化率法料費"
              "設業商物機銀証券"  # 建設, 工業, 商事, 物産, 電機, 銀行, 証券: companies
              "县乡镇州洲江河岭峰窟庙队团军司厂画权句形酸剂")  # places, bodies, common nouns

# -- patterns ---------------------------------------------------------------------------------

_CAP = r"[A-Z][a-z]+(?:['\-](?!s\b)[A-Z]?[a-z]+)?|Mc[A-Z][a-z]+|O'[A-Z][a-z]+"
_EN_GIVEN_SURNAME = re.compile(
    # (?=[A-Z]): only a capital letter starts the alternation over a few hundred names
    rf"\b(?=[A-Z])(?P<given>{'|'.join(sorted(set(_EN_GIVEN) | set(_JA_GIVEN_ROMAJI), key=len, reverse=True))})"
    rf"(?: [A-Z]\.)? (?P<surname>{_CAP})\b(?!['\-]?[A-Za-z])"
)
_JA_ROMAJI_SURNAME_FIRST = re.compile(
    rf"\b(?:{'|'.join(_JA_SURNAME_ROMAJI)}) (?:{'|'.join(_JA_GIVEN_ROMAJI)})\b"
)
# Pinyin syllables (initial + final), enough to tell "Xiaoming" from "Valley".
_PY_INITIAL = "(?:zh|ch|sh|[bpmfdtnlgkhjqxrzcsyw])?"
_PY_FINAL = ("(?:iang|iong|uang|ang|eng|ing|ong|ian|iao|uai|uan|van|ai|ei|ao|ou|an|en|in|un|ia|ie|"
             "iu|ua|uo|ui|ue|ve|er|a|o|e|i|u|v)")
_PY_SYLLABLE = f"{_PY_INITIAL}{_PY_FINAL}"
_PY_WORD = re.compile(rf"(?i:{_PY_SYLLABLE}){{1,2}}")
_ZH_PINYIN_PAIR = re.compile(r"\b([A-Z][a-z]{1,11})(?:-([a-z]{1,6}))? ([A-Z][a-z]{1,11})\b")
_ZH_SURNAMES_PINYIN = frozenset(_ZH_SURNAME_PINYIN)

_KANJI = "\u3005\u4e00-\u9fff"
_JA_NAME = re.compile(
    rf"(?<![{_KANJI}\u30a1-\u30fa])(?:{'|'.join(_JA_SURNAMES)})[ \u3000]?"
    rf"(?:(?![{_NOT_GIVEN}])[{_KANJI}]){{1,3}}"
    # a particle, punctuation, a space or the end: the name is a word of its own
    r"(?=[はがをにのともへでや、。，．,.「」『』（）()・\s]|$)"
)
_ZH_LEFT = "叫和跟给找请让被对向与由把问诉系电到"  # 叫, 和, 告诉, 联系, 致电, 见到 ...
_ZH_NAME = re.compile(
    rf"(?:^|(?<=[\s，。、！？；：,.;:!?“”\"'（）()《》【】])|(?<=[{_ZH_LEFT}]))"
    rf"[{_ZH_SURNAMES}](?:(?![{_NOT_GIVEN}])[\u4e00-\u9fff]){{2}}"
    r"(?=[，。、！？；,;!?]|说|表示|认为|告诉|指出|回答|问道|笑道|称|同学|老师|经理|教授|医生|博士|主任|$)",
    re.M,
)


def _pinyin_word(word: str) -> bool:
    return _PY_WORD.fullmatch(word) is not None


def _pinyin_spans(text: str) -> list[tuple[int, int]]:
    out = []
    for m in _ZH_PINYIN_PAIR.finditer(text):
        first, tail, second = m.group(1), m.group(2), m.group(3)
        if f"{first} {second}".lower() in _PINYIN_PHRASES:
            continue
        given_first = first + (tail or "")
        if first in _ZH_SURNAMES_PINYIN and _pinyin_word(second):  # Wang Xiaoming
            out.append(m.span())
        elif second in _ZH_SURNAMES_PINYIN and _pinyin_word(given_first.replace("-", "")) \
                and len(given_first) >= 4:  # Xiaoming Wang (a one-syllable "given name" first
            out.append(m.span())          # is too often an English word: "Long Li")
    return out


def unmarked_name_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of every unmarked person name found in ``text``, unsorted, may overlap.
    Never raises for a ``str``; linear in its length."""
    spans: list[tuple[int, int]] = []
    if " " in text:  # every romanised pattern is two words
        for m in _EN_GIVEN_SURNAME.finditer(text):
            if m.group("surname") not in _NOT_SURNAMES:
                spans.append(m.span())
        spans += [m.span() for m in _JA_ROMAJI_SURNAME_FIRST.finditer(text)]
        spans += _pinyin_spans(text)
    if not text.isascii():
        spans += [m.span() for m in _JA_NAME.finditer(text)]
        spans += [m.span() for m in _ZH_NAME.finditer(text)]
    return spans
