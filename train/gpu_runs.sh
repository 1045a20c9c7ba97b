#!/bin/bash
# Several seeds of the shipped recipe side by side on one GPU, each packed for the trip back
# (train/pack.py: two files of ~10 MB a run; a device call returns at most 8 files, 64 MiB).
# Run from the repository root on the GPU machine, with BUNDLE and DATA carried:
#
#   OUT=$OUT SEEDS="0 1" BUNDLE=.devrun/faith3/bundle DATA=.devrun/data6 BUDGET=470 bash train/gpu_runs.sh
#
# Two runs share an H100 at 39 ms a step each (one alone: 48 ms on an H200), three at about
# 56 ms (then 2 epochs of data v5 need ~300 s: BUDGET 330 gave 1.87-1.89 epochs).
# BUDGET is each run's --time-budget in seconds (the schedule shrinks to fit it); EXTRA adds
# train.train options ("--limit 64 --valid-limit 64 --device cpu BUDGET=0" for a dry run here).
# TRAIN_FILE: the training file in each folder (train.jsonl.gz; train/round_v6.sh: train.jsonl).
# DATAS="name=DIR name2=DIR2 ..." runs one run per training folder instead, each with the first
# of SEEDS, named after it (train/ablate_v5.sh). RUNS: where runs, checkpoints and logs go (/tmp).
# Exits non-zero when a run failed (its log in $OUT/logs.txt says where).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu_runs}; mkdir -p "$OUT"
BUNDLE=${BUNDLE:-.devrun/faith3/bundle}; DATA=${DATA:-.devrun/data6}
BUDGET=${BUDGET:-470}; SEEDS=${SEEDS:-0 1}; RUNS=${RUNS:-/tmp}
[ -f "$BUNDLE/base.npz" ] || { echo "no bundle at $BUNDLE (base.npz): carry it"; exit 1; }
export PYTHONUNBUFFERED=1
uptime; nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv 2>&1 | tail -2
run() {  # name seed data-folder
  python3 -m train.train --bundle "$BUNDLE" --train "$3/${TRAIN_FILE:-train.jsonl.gz}" \
    --valid "$3/valid.jsonl.gz" --out "$RUNS/run-$1" --ckpt "$RUNS/ck-$1" --max-len 256 \
    --batch 64 --lr 4e-5 --head-lr 1e-4 --epochs 2 --seed $2 --time-budget "$BUDGET" ${EXTRA:-} \
    > "$RUNS/log-$1.txt" 2>&1 && python3 -m train.pack --weights "$RUNS/run-$1" --dest "$OUT/$1" \
    >> "$RUNS/log-$1.txt" 2>&1
  echo "run $1 rc $?" >> "$RUNS/log-$1.txt"
}
NAMES=""
if [ -n "${DATAS:-}" ]; then
  set -- $SEEDS
  for nd in $DATAS; do NAMES="$NAMES ${nd%%=*}"; run "${nd%%=*}" "$1" "${nd#*=}" & done
else
  for s in $SEEDS; do NAMES="$NAMES s$s"; run s$s $s "$DATA" & done
fi
wait
for n in $NAMES; do echo "== $n"; grep -v 'step [0-9]*00/\|"n":\|"auroc"\|pos_mean_p\|^ *}\|^ *{' "$RUNS/log-$n.txt" | tail -20; done
for n in $NAMES; do cat "$RUNS/log-$n.txt"; done > "$OUT/logs.txt"
ls -la "$OUT"; uptime
failed=""
for n in $NAMES; do grep -qx "run $n rc 0" "$RUNS/log-$n.txt" || failed="$failed $n"; done
[ -z "$failed" ] || { echo "failed:$failed"; exit 1; }
