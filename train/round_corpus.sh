#!/bin/bash
# The RAG corpus continuation on a GPU machine (issue 40): the shipped model continued on the
# corpus's training-domain pairs plus replayed data v6 rows, two runs side by side, each
# returned as its change from the shipped model (train.pack --base), judged back here.
#
# Here, first (about 2 min; train/README.md, "The RAG corpus continuation"):
#   python -m train.device --dest .devrun/faith4 --vocab-from scorer/ragpulse/scorer/judges/nli/faith_e5/tokenizer.json
#   python -m train.data.continuation --base DATA_V6 --out .devrun/c2 --replay 8000 --polarity 0 --corpus 2
#   python -m train.handoff --model-dir scorer/ragpulse/scorer/judges/nli/faith_e5 \
#       --bundle .devrun/faith4/bundle --data .devrun/c2 --out .devrun/handoff
#   mv scorer/ragpulse/scorer/judges/nli/faith_e5/model.onnx /tmp/   # 53 MB: the tree must fit
# then one device call with carry [".devrun/handoff"] and this command:
#   OUT=$OUT bash train/round_corpus.sh
# and put model.onnx back. $OUT gets each run's pack (2 files) and logs.txt.
# Back here, per run R: python -m train.from_onnx --model-dir .../faith_e5 --out W4;
#   python -m train.pack --unpack FILES/R --weights W/R --base W4; export (--format block8, so
#   that the change survives), calibrate and evaluate under the ship rule (train/README.md).
#
# RUNS="name:lr:seed[:aw] ..." (default "a:1e-5:0 b:2e-5:0"), BUDGET seconds each (default 300),
# EPOCHS (default 3), BATCH (default 32); EXTRA adds train.train options ("--limit 64
# --valid-limit 64 --device cpu" and BUDGET=0 for a dry run here). A fourth field aw trains the
# answerability head jointly (train.train --answerability on the hand-off's
# data/answerability.jsonl.xz, --answerability-weight aw, --answer-head-lr ANSWER_HEAD_LR,
# default 1e-4): train/round_multitask.sh. Exits non-zero when a run failed (its log in
# $OUT/logs.txt says where).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/round_corpus}; mkdir -p "$OUT"
H=${HANDOFF:-.devrun/handoff}; RUNS=${RUNS:-a:1e-5:0 b:2e-5:0}; BUDGET=${BUDGET:-300}
W=${WORK:-/tmp/round_corpus_work}; mkdir -p "$W"
for f in bundle/base.npz bundle/tokenizer.json init.onnx data/train.jsonl.xz data/valid.jsonl.gz; do
  [ -f "$H/$f" ] || { echo "no $H/$f: write the hand-off with python -m train.handoff (see this script's header)" >&2; exit 1; }
done
for r in $RUNS; do  # a joint run needs the answerability rows
  IFS=: read -r name lr seed aw <<< "$r"
  [ -z "$aw" ] || [ -f "$H/data/answerability.jsonl.xz" ] || { echo "run $name trains answerability: no $H/data/answerability.jsonl.xz: write the hand-off with python -m train.handoff --answerability (train/round_multitask.sh's header)" >&2; exit 1; }
done
export PYTHONUNBUFFERED=1
uptime; nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv 2>&1 | tail -2
cat "$H/data/STATS.txt" 2>/dev/null
python3 - "$H/data/train.jsonl.xz" "$W/train.jsonl" <<'PY' || { echo "unpacking the data failed" >&2; exit 1; }
import lzma, shutil, sys
with lzma.open(sys.argv[1]) as f, open(sys.argv[2], "wb") as g:
    shutil.copyfileobj(f, g, 1 << 20)
PY
python3 -m train.from_onnx --onnx "$H/init.onnx" --out "$W/init" > "$W/init.log" 2>&1 \
  || { cat "$W/init.log"; echo "reading the model back failed" >&2; exit 1; }
run() {  # name lr seed [answerability weight]
  local joint=""
  [ -n "${4:-}" ] && joint="--answerability $H/data/answerability.jsonl.xz --answerability-weight $4 --answer-head-lr ${ANSWER_HEAD_LR:-1e-4}"
  python3 -m train.train --bundle "$H/bundle" --train "$W/train.jsonl" \
    --valid "$H/data/valid.jsonl.gz" --out "$W/run-$1" --ckpt "$W/ck-$1" --init "$W/init" \
    --max-len 256 --batch "${BATCH:-32}" --lr "$2" --head-lr "$2" --epochs "${EPOCHS:-3}" \
    --seed "$3" --time-budget "$BUDGET" $joint ${EXTRA:-} > "$W/log-$1.txt" 2>&1 \
    && python3 -m train.pack --weights "$W/run-$1" --dest "$OUT/$1" --base "$W/init" \
    >> "$W/log-$1.txt" 2>&1
  echo "run $1 rc $?" >> "$W/log-$1.txt"
}
NAMES=""
for r in $RUNS; do
  IFS=: read -r name lr seed aw <<< "$r"
  NAMES="$NAMES $name"; run "$name" "$lr" "$seed" "$aw" &
done
wait
for n in $NAMES; do echo "== $n"; grep -v 'step [0-9]*00/\|"n":\|"auroc"\|pos_mean_p\|^ *}\|^ *{' "$W/log-$n.txt" | tail -12; done
python3 - $(for n in $NAMES; do echo "$W/run-$n/metrics.json"; done) <<'PY'  # one line a run
import json, sys
for p in sys.argv[1:]:
    try:
        m = json.load(open(p))
    except OSError:
        continue
    a = m.get("answerability") or {}
    print(p.split("/")[-2], f"steps {m['steps']} epochs {m['epochs']:.2f} faithfulness AUROC {m['auroc']:.4f}",
          f"answerability AUROC {a['auroc']:.4f} accuracy {a['accuracy']:.4f} cuts {a['thresholds']}" if a else "")
PY
for n in $NAMES; do cat "$W/log-$n.txt"; done > "$OUT/logs.txt"
ls -la "$OUT"; uptime
failed=""
for n in $NAMES; do grep -qx "run $n rc 0" "$W/log-$n.txt" || failed="$failed $n"; done
[ -z "$failed" ] || { echo "failed:$failed"; exit 1; }
