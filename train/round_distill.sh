#!/bin/bash
# The distillation round on a GPU machine (issue 39, item 4): students of the shipped model's
# first N encoder layers, every layer trained on the shipped model's own P (train/distill.py),
# side by side, each returned as its change from the teacher's read-back weights (train.pack
# --base). 10 samples/s on 2 cores needs the cross-encoder at about a third of its CPU (a
# 4-layer student; docs/history/judges.md, "Speed levers that did not ship"); on 2 CPU cores a
# 4-layer student trained for an hour followed the teacher far less closely than the gate asks
# (docs/history/judges.md, "A trained 4-layer student on the CPU").
#
# Here, first (train/README.md, "The distillation round"):
#   python -m train.truncate pairs --out .devrun/dpairs --corpus 60000 --judge-answers 6000 --nli-per-source 6000
#   python -m train.device --dest .devrun/dh --vocab-from scorer/ragpulse/scorer/judges/nli/faith_e5/tokenizer.json
#   python -m train.handoff --model-dir scorer/ragpulse/scorer/judges/nli/faith_e5 --bundle .devrun/dh/bundle \
#       --pairs .devrun/dpairs/pairs.jsonl.gz --out .devrun/handoff-distill --limit-mib 54
#   mv scorer/ragpulse/scorer/judges/nli/faith_e5/{model.onnx,tokenizer.json} /tmp/   # the tree must fit
# then ONE device call with carry [".devrun/handoff-distill"] and this command:
#   HANDOFF=.devrun/handoff-distill OUT=$OUT bash train/round_distill.sh
# and put model.onnx and tokenizer.json back. $OUT gets each student's pack (2 files), its
# agreement with the teacher on the pairs' validation split (NAME.report.json) and logs.txt.
#
# Back here, per student S:
#   python -m train.from_onnx --model-dir scorer/ragpulse/scorer/judges/nli/faith_e5 --out W51
#   python -m train.pack --unpack FILES/S --weights W/S --base W51
#   python -m train.export --bundle .devrun/dh/bundle --weights W/S --calibration IDENTITY \
#       --format gptq8 --calibration-pairs .devrun/dpairs/pairs.jsonl.gz --dest M/S
#   (IDENTITY: {"a": 1, "b": 0}: a student learns the teacher's calibrated P; train.distill rows
#   writes it as identity.json)
# and judge it under the rule written before the run (docs/history/judges.md): the gate on the
# validation split (correlation with the teacher's logit >= 0.991), then the truncation
# students' rule on the evaluation sets, model alone, then the blend refitted.
#
# STUDENTS (default "s3:0,1,2 s4:0,1,2,3", name:layers: the goal needs 4 layers or fewer),
# LR (1e-4, encoder; HEAD_LR 2e-4), BUDGET seconds each (default 300), EPOCHS (default 20: the
# budget decides), BATCH (64), EXTRA (more train.train arguments), PAIRS_LIMIT (score only the
# first N pairs: dry runs). CPU dry run: PAIRS_LIMIT=400 DEVICE=cpu BUDGET=0 EPOCHS=1 BATCH=8
# STUDENTS=s2:0,1 (train/README.md).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/round_distill}; mkdir -p "$OUT"
H=${HANDOFF:-.devrun/handoff-distill}; STUDENTS=${STUDENTS:-s3:0,1,2 s4:0,1,2,3}
BUDGET=${BUDGET:-300}; DEVICE=${DEVICE:-auto}
W=${WORK:-/tmp/round_distill_work}; mkdir -p "$W"
for f in bundle/base.npz bundle/tokenizer.json init.onnx data/pairs.jsonl.xz; do
  [ -f "$H/$f" ] || { echo "no $H/$f: write the hand-off with python -m train.handoff --pairs (see this script's header)" >&2; exit 1; }
done
for s in $STUDENTS; do
  case "$s" in *:[0-9]*) ;; *) echo "student $s: name:layers, e.g. s4:0,1,2,3" >&2; exit 1;; esac
done
export PYTHONUNBUFFERED=1
uptime; nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv 2>&1 | tail -2
python3 -m train.from_onnx --onnx "$H/init.onnx" --out "$W/init" > "$W/init.log" 2>&1 \
  || { cat "$W/init.log"; echo "reading the teacher back failed" >&2; exit 1; }
python3 -m train.distill targets --pairs "$H/data/pairs.jsonl.xz" --bundle "$H/bundle" \
  --weights "$W/init" --dir "$W/targets" --device "$DEVICE" ${PAIRS_LIMIT:+--limit "$PAIRS_LIMIT"} \
  && python3 -m train.distill rows --dir "$W/targets" --out "$W/rows" \
  || { echo "scoring the pairs with the teacher failed" >&2; exit 1; }
run() {  # name layers
  python3 -m train.train --bundle "$H/bundle" --train "$W/rows/train.jsonl.gz" \
    --valid "$W/rows/valid.jsonl.gz" --out "$W/run-$1" --ckpt "$W/ck-$1" --init "$W/init" \
    --student-layers "$2" --max-len 256 --batch "${BATCH:-64}" --lr "${LR:-1e-4}" \
    --head-lr "${HEAD_LR:-2e-4}" --epochs "${EPOCHS:-20}" --time-budget "$BUDGET" \
    --device "$DEVICE" ${EXTRA:-} > "$W/log-$1.txt" 2>&1 \
    && python3 -m train.distill report --rows "$W/rows" --run "$W/run-$1" \
       --json "$OUT/$1.report.json" > /dev/null 2>> "$W/log-$1.txt" \
    && python3 -m train.pack --weights "$W/run-$1" --dest "$OUT/$1" --base "$W/init" \
       >> "$W/log-$1.txt" 2>&1
  echo "run $1 rc $?" >> "$W/log-$1.txt"
}
NAMES=""
for s in $STUDENTS; do
  IFS=: read -r name layers <<< "$s"
  NAMES="$NAMES $name"; run "$name" "$layers" &
done
wait
for n in $NAMES; do
  echo "== $n"; grep -v 'step [0-9]*00/\|"n":\|"auroc"\|pos_mean_p\|^ *}\|^ *{' "$W/log-$n.txt" | tail -8
  python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['all']; print('$n agreement:', {k: round(v, 4) for k, v in r.items()})" "$OUT/$n.report.json" 2>/dev/null
done
for n in $NAMES; do cat "$W/log-$n.txt"; done > "$OUT/logs.txt"
ls -la "$OUT"; uptime
failed=""
for n in $NAMES; do grep -qx "run $n rc 0" "$W/log-$n.txt" || failed="$failed $n"; done
[ -z "$failed" ] || { echo "failed:$failed"; exit 1; }
