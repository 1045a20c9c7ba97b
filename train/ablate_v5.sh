#!/bin/bash
# Which of data v5's new kinds costs FaithBench (issue 22): data v5 rebuilt from data v4 three
# times, each without one of its kinds, and one run of each side by side on one GPU.
#
#   no-pol     without the polarity pairs (pol-*)
#   no-exc     without the list-with-an-exception pairs (exc-*)
#   no-shapes  without the value-format and two-passage pairs (format-*, profile-*)
#
# Run from the repository root on the GPU machine, with the bundle and data v4 carried
# (about 50 MB; move the tracked model.onnx aside so that the carry fits):
#
#   OUT=$OUT BUNDLE=.devrun/faith3/bundle BASE=.devrun/data4 bash train/ablate_v5.sh
#
# The builds take about 6 s each (stdlib and numpy only); the runs are data v5 seed 2's
# conditions (seed 2, three side by side, BUDGET 330: 1.87-1.89 epochs), so each pairs with that
# seed's run. $OUT gets two packed files a run (about 18 MB) and logs.txt: 7 files.
# Here: python -m train.pack --unpack FILES/no-pol --weights W/no-pol, then calibrate, export
# and evaluate as in train/README.md ("Data v5: five seeds and a soup").
# A dry run here: PATH=/work/trainenv/bin:$PATH EXTRA="--limit 64 --valid-limit 64 --device cpu"
# BUDGET=0 OUT=/tmp/abl bash train/ablate_v5.sh
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/ablate}; mkdir -p "$OUT"
BASE=${BASE:-.devrun/data4}; SEED=${SEED:-2}; BUDGET=${BUDGET:-330}
VARIANTS=${VARIANTS:-no-pol no-exc no-shapes}
kinds() {
  case $1 in
    no-pol) echo "--polarity 0 --exceptions 1000 --shapes 3000" ;;
    no-exc) echo "--polarity 2000 --exceptions 0 --shapes 3000" ;;
    no-shapes) echo "--polarity 2000 --exceptions 1000 --shapes 0" ;;
    *) return 1 ;;
  esac
}
for v in $VARIANTS; do
  kinds "$v" > /dev/null || { echo "unknown variant $v (no-pol, no-exc, no-shapes)"; exit 2; }
done
DATAS=""
for v in $VARIANTS; do
  a=$(kinds "$v")
  python3 -m train.data.continuation --base "$BASE" --out "/tmp/data-$v" --replay 1000000 $a \
    > "/tmp/build-$v.txt" 2>&1 &
  DATAS="$DATAS $v=/tmp/data-$v"
done
wait
for v in $VARIANTS; do
  echo "== build $v: $(tail -1 "/tmp/build-$v.txt")"
  test -s "/tmp/data-$v/train.jsonl.gz" || { cat "/tmp/build-$v.txt"; exit 1; }
done
OUT=$OUT SEEDS=$SEED DATAS="$DATAS" BUDGET=$BUDGET bash train/gpu_runs.sh
