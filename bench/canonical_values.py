"""Cost of the NLI judges' value normaliser (``canonical_values``), and what it did to the
faithfulness figures of ``train.evaluate`` runs without and with it.

Speed: :func:`ragpulse.scorer.judges.nli.values.canonical` on a passage of about 900 characters
in English, Japanese and Chinese (written here, values in every sentence, as retrieved passages
of help pages are; a shorter one repeated to 900 characters or more), microseconds per call: the median of ``--repeats`` rounds of ``--calls``
calls, CPU time of one process and thread (a shared machine's wall time says more about the
other processes). The judge calls it once per distinct context and statement of a
sample.

Quality (optional): ``--eval NAME OFF.json ON.json`` (repeatable) reads two ``train.evaluate
--json`` files of the same set, without and with ``--canonical-values``, and tabulates AUROC and
the faithful / unfaithful means, overall and per language.

Probe (optional): ``--probe`` runs the bundled model on :data:`PROBE`, value-centred twins
written here, without and with the normaliser.

    python bench/canonical_values.py [--probe] [--eval NAME OFF.json ON.json ...] [--write-docs]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

from bench.docs_section import write_section
from ragpulse.scorer.judges.nli.values import VALUES_VERSION, canonical

MARK = "<!-- bench/canonical_values.py -->"
HEADING = "## Values in one form before the model (issue 39, `canonical_values`)"

PASSAGES = {
    "en": (
        "The Eastgate Sports Centre is open from 6:30 am to 10 pm, Monday to Friday, and from "
        "8 am to 8 pm on Saturdays and Sundays. Members can book a court up to two weeks in "
        "advance; a booking lasts one hour and must be cancelled at least 48 hours before it "
        "starts, or half the fee is charged. Children aged five to twelve pay 50 per cent of "
        "the adult price, and students get a quarter of the annual fee back after 12 months of "
        "membership. Lockers cost €2 a day. The sauna closes at noon on public holidays and "
        "the café serves hot food until 9.30 p.m. Lost property is kept for three weeks, then "
        "given to charity. Guest passes are valid for 30 days and can be used twice a week. "
        "Parking is free for the first 90 minutes; after that it costs 1.5 euros an hour. "
        "Swimming lessons run for ten weeks, each lesson forty-five minutes long, and new "
        "courses start every fortnight."),
    "ja": (
        "イーストゲート・スポーツセンターの営業時間は、月曜日から金曜日が午前6時30分から午後10時まで、"
        "土曜日と日曜日が午前8時から午後8時までです。会員はコートを二週間先まで予約でき、1回の利用は"
        "1時間です。キャンセルは開始の48時間前までに行ってください。それ以降は料金の半分をいただきます。"
        "5歳から12歳のお子様は大人料金の50パーセントです。学生は会員期間が十二か月を超えると年会費の"
        "2割が返金されます。ロッカーは1日200円です。祝日はサウナが正午に閉まり、カフェは夜9時半まで"
        "温かい食事を提供しています。忘れ物は三週間保管した後、寄付します。ゲストパスの有効期限は"
        "30日間で、週に2回まで使えます。駐車場は最初の90分が無料で、その後は1時間300円です。"
        "水泳教室は十週間のコースで、1回45分、新しいコースは2週間ごとに始まります。"
        "受付は平日の朝9時から夕方5時まで、電話でも予約を受け付けています。"),
    "zh": (
        "东门体育中心的开放时间为周一至周五上午6点半到晚上10点，星期六和星期日上午8点到晚上8点。"
        "会员最多可以提前两周预约场地，每次预约时长为1小时，须在开始前48小时取消，否则收取一半的费用。"
        "5岁到12岁的儿童按成人票价的百分之五十收费，学生在入会满十二个月后可以退还年费的20%。"
        "储物柜每天收费两元。法定节假日桑拿房中午12点关闭，咖啡厅的热食供应到晚上九点半。"
        "遗失物品保管三周，之后捐给慈善机构。访客通行证的有效期为30天，每周最多使用两次。"
        "前90分钟停车免费，之后每小时收费五元。游泳课程共十周，每节课四十五分钟，"
        "每两周开设新的课程。服务台工作日早上9点到下午5点提供电话预约，周末和法定节假日休息。"
        "会员卡遗失补办需要3个工作日，补办费用为二十元。"),
}


# value-centred twins written for this bench: (passage, faithful answer saying a value another
# way, the same answer with that value wrong)
PROBE = [
    ("The ticket office opens at 9:00 and closes at 17:30 every day.",
     "The ticket office is open every day from 9 am to 5:30 pm.",
     "The ticket office is open every day from 9 am to 7:30 pm."),
    ("A standard delivery takes 72 hours.", "Standard delivery takes three days.",
     "Standard delivery takes four days."),
    ("The membership can be paused for up to 14 days per year.",
     "You can pause the membership for up to two weeks a year.",
     "You can pause the membership for up to three weeks a year."),
    ("Seniors pay half the regular entry fee.", "Seniors are charged 50% of the regular entry fee.",
     "Seniors are charged 25% of the regular entry fee."),
    ("The helpdesk answers calls Monday to Friday.", "The helpdesk answers calls on weekdays.",
     "The helpdesk answers calls every day."),
    ("The bike rental costs €15 for a day.", "Renting a bike costs fifteen euros for a day.",
     "Renting a bike costs fifty euros for a day."),
    ("図書館は午前9時から午後8時まで開館しています。", "図書館は9時から20時まで開いています。",
     "図書館は9時から18時まで開いています。"),
    ("返品は購入後二週間以内に受け付けます。", "返品は買ってから14日以内なら受け付けます。",
     "返品は買ってから30日以内なら受け付けます。"),
    ("会員の8割が毎週利用しています。", "会員の80%が毎週使っています。", "会員の50%が毎週使っています。"),
    ("窓口は月曜日から金曜日まで営業しています。", "窓口は平日に営業しています。", "窓口は毎日営業しています。"),
    ("博物馆上午九点开门，下午五点半关门。", "博物馆9:00开门，17:30关门。", "博物馆9:00开门，19:30关门。"),
    ("押金会在七十二小时内退还。", "押金会在3天内退还。", "押金会在5天内退还。"),
    ("会员卡有效期为两年。", "会员卡的有效期是24个月。", "会员卡的有效期是12个月。"),
    ("学生票为成人票价的一半。", "学生票按成人票价的50%收费。", "学生票按成人票价的30%收费。"),
    ("客服星期一到星期五提供服务。", "客服在工作日提供服务。", "客服每天提供服务。"),
]


def probe() -> list[dict[str, object]]:
    """The bundled model's P(supported) of :data:`PROBE`'s answers, as the ``model`` judge
    reads one statement (its premises and claims settings, no blend), without and with
    ``canonical_values``."""
    from ragpulse.scorer.judges.factory import BUNDLED_MODEL_DIR
    from ragpulse.scorer.judges.nli import NliJudgeSettings, NliModel

    rows = []
    for on in (False, True):
        model = NliModel(NliJudgeSettings(
            model_dir=BUNDLED_MODEL_DIR, premise="views", premise_view_sentences=1,
            premise_neighbours=0, candidates=2, canonical_values=on))
        right = [model.predict([a], [c])[0] for c, a, _ in PROBE]
        wrong = [model.predict([b], [c])[0] for c, _, b in PROBE]
        rows.append({"values": "on" if on else "off", "n": len(PROBE),
                     "faithful": statistics.mean(right), "wrong": statistics.mean(wrong),
                     "high": sum(p >= 0.8 for p in right),
                     "apart": sum(p - q >= 0.4 for p, q in zip(right, wrong, strict=True))})
    return rows


def speed(calls: int, repeats: int) -> list[dict[str, object]]:
    rows = []
    for lang, one in PASSAGES.items():
        text = one
        while len(text) < 900:  # a CJK passage says as much in fewer characters
            text += one
        canonical(text)  # warm
        rounds = []
        for _ in range(repeats):
            t0 = time.process_time()  # CPU time: the machine is shared, wall time is not ours
            for _ in range(calls):
                canonical(text)
            rounds.append((time.process_time() - t0) / calls * 1e6)
        out = canonical(text)
        rows.append({"lang": lang, "chars": len(text), "us": statistics.median(rounds),
                     "idempotent": canonical(out) == out})
    return rows


def quality(evals: list[list[str]]) -> list[tuple[str, str, dict[str, object]]]:
    rows = []
    for name, off, on in evals:
        for mode, path in (("off", off), ("on", on)):
            dev = json.loads(Path(path).read_text())["dev"]
            rows.append((name, mode, dev))
    return rows


def render(speed_rows: list[dict[str, object]], quality_rows: list[tuple[str, str, dict]],
           probe_rows: list[dict[str, object]], command: str) -> str:
    """Long because: one table per measurement, each with the sentence that says what it is."""
    load = os.getloadavg()
    lines = [f"Command: `{command}`  ",
             f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average "
             f"{load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} on {os.cpu_count()} cores; rules "
             f"`{VALUES_VERSION}`.", "",
             "| passage | characters | CPU µs per call | CPU µs per 900 characters | idempotent |",
             "|---|---|---|---|---|"]
    lines += [f"| {r['lang']} | {r['chars']} | {r['us']:.0f} | {r['us'] * 900 / r['chars']:.0f} | "
              f"{'yes' if r['idempotent'] else 'NO'} |" for r in speed_rows]
    lines += ["", "The judge rewrites each distinct context and statement of a sample once: a "
              "typical trace (3 statements, 5 contexts) costs 8 calls."]
    if probe_rows:
        lines += ["", f"The bundled model on {len(PROBE)} value-centred twins written for this bench "
                  "(`PROBE`: 6 EN, 4 JA, 5 ZH; a passage, an answer saying one of its values "
                  "another way, the same answer with that value wrong), as the `model` judge "
                  "reads a statement (views premises, no blend):", "",
                  "| values | twins | faithful mean | wrong mean | faithful >= 0.8 | "
                  "faithful - wrong >= 0.4 |", "|---|---|---|---|---|---|"]
        lines += [f"| {r['values']} | {r['n']} | {r['faithful']:.3f} | {r['wrong']:.3f} | "
                  f"{r['high']} | {r['apart']} |" for r in probe_rows]
    if quality_rows:
        lines += ["", "Faithfulness of the `model` judge's model alone (`train.evaluate --judge model "
                  "--premise evidence --premise-view-sentences 1 --premise-neighbours 0 --blend off "
                  "--sets dev --dev SET [--canonical-values]`), without (`off`) and with (`on`) the "
                  "normaliser (many of the sets' faithful answers say a value another way; "
                  "each wrong twin has one part wrong, a value or another part):", "",
                  "| set | values | n | AUROC | faithful mean | unfaithful mean | AUROC en | AUROC ja "
                  "| AUROC zh |", "|---|---|---|---|---|---|---|---|---|"]
        for name, mode, dev in quality_rows:
            per = dev.get("per_lang", {})
            lines.append(f"| {name} | {mode} | {dev['n']} | {dev['auroc']:.3f} | "
                         f"{dev['faithful_mean']:.3f} | {dev['unfaithful_mean']:.3f} | "
                         + " | ".join(f"{per[lg]['auroc']:.3f}" if lg in per else "-"
                                      for lg in ("en", "ja", "zh")) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--eval", nargs=3, action="append", default=[],
                    metavar=("NAME", "OFF_JSON", "ON_JSON"))
    ap.add_argument("--probe", action="store_true",
                    help="also run the bundled model on the value-centred twins (PROBE)")
    ap.add_argument("--write-docs", action="store_true",
                    help="rewrite this bench's section of docs/benchmarks.md")
    args = ap.parse_args(argv)
    body = render(speed(args.calls, args.repeats), quality(args.eval),
                  probe() if args.probe else [],
                  "python bench/canonical_values.py" + (" --probe" if args.probe else "")
                  + "".join(f" --eval {n} OFF.json ON.json" for n, _, _ in args.eval)
                  + " --write-docs")
    print(body)
    if args.write_docs:
        write_section(MARK, body, HEADING, before="## Speed (NLI judge model)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
