"""Speed of the ``model`` judge (ragpulse's bundled int8 faithfulness cross-encoder) on a
typical trace: 3 answer statements, 5 retrieved contexts of about 900 characters, judged for
faithfulness and context utilization (both from the same statement x chunk pairs) through
``NliJudge.judge``, the blocking core the judge's worker threads run.

    .venv/bin/python bench/local_model_speed.py [--seconds 20] [--threads 2] [--model-dir DIR]

Prints samples/s per configuration (onnxruntime threads x judge workers x batch size) with the
load average before and after: the machine may be shared, read each figure with it. The batch
size counts for a float graph only: the bundled int8 graph's outputs depend on their batch, so
the judge runs its pairs one at a time (``NliModel.batch_invariant``) whatever ``batch`` says.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ragpulse.scorer.judges.factory import BUNDLED_MODEL_DIR
from ragpulse.scorer.judges.nli import NliJudge, NliJudgeSettings
from ragpulse.scorer.model import Fact, Sample

REPO = Path(__file__).resolve().parents[1]

EN = ("The Basic plan includes email support only. Phone support is available on the Business "
      "plan, staffed from 8:00 to 18:00 CET on weekdays. Enterprise customers additionally get a "
      "named technical account manager who joins quarterly reviews. ")
JA = "未使用の商品は、お届けから14日以内であれば返品を受け付けています。送料はお客様のご負担となります。"
ZH = "会员卡自开卡之日起两年内有效，到期前一个月可在线续期。续期后积分将自动转入新卡。"


def _context(seed: str, i: int) -> str:
    text = ""
    while len(text) < 900:
        text += f"{seed} ({i}) "
    return text[:900]


def samples(n: int) -> list[Sample]:
    out = []
    for k in range(n):
        seed = (EN, JA, ZH)[k % 3]
        ctx = [_context(seed, i + k) for i in range(5)]
        answer = {EN: "The Basic plan only includes email support. Phone support comes with the "
                      "Business plan. Enterprise customers also get an account manager.",
                  JA: "未使用であれば14日以内に返品できます。送料はお客様の負担です。返品は無料ではありません。",
                  ZH: "会员卡有效期为两年。到期前一个月可以在线续期。续期后积分会转入新卡。"}[seed]
        out.append(Sample(id=str(k), question="?", contexts=ctx, answer=answer))
    return out


def measure(model_dir: Path, threads: int, workers: int, batch: int, seconds: float,
            candidates: int | None) -> float:
    s = NliJudgeSettings(model_dir=model_dir, threads=threads, batch_size=batch,
                         terse_claims="with-question", candidates=candidates)
    judge = NliJudge(s)
    facts = frozenset({Fact.STATEMENT_SUPPORT, Fact.CONTEXT_USED})
    pool = samples(60)
    judge.judge(pool[0], facts)  # warm
    done = 0
    t0 = time.perf_counter()
    with ThreadPoolExecutor(workers) as ex:
        while time.perf_counter() - t0 < seconds:
            list(ex.map(lambda x: judge.judge(x, facts), pool[: workers * 2]))
            done += workers * 2
    return done / (time.perf_counter() - t0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model-dir", default=str(BUNDLED_MODEL_DIR))
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--configs", default="2x1x16x2,1x2x16x2,2x1x16x0",
                    help="threads x workers x batch x candidates (0: every chunk, as the nli "
                    "judge; the model judge uses 2), comma-separated")
    a = ap.parse_args(argv)
    print("| onnxruntime threads | workers | batch | candidates | samples/s | load before / after |")
    print("|---|---|---|---|---|---|")
    for c in a.configs.split(","):
        t, w, b, k = (int(x) for x in c.split("x"))
        before = os.getloadavg()[0]
        rate = measure(Path(a.model_dir), t, w, b, a.seconds, k or None)
        print(f"| {t} | {w} | {b} | {k or 'all'} | {rate:.2f} | {before:.2f} / "
              f"{os.getloadavg()[0]:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
