#!/bin/bash
# Data v6 on the GPU machine (issue 22's next device round): three seeds of the shipped recipe
# side by side on data v6 (data v4's sources plus JNLI-Neg train, PAWS-X zh, BEGIN, CMRC 2018
# train and JaQuAD; docs/history/faithfulness-data.md, "Data v6 sources"), each packed for the trip back.
#
# Here, once (59 s + 1 min): build data v6 with every hand-written set guarded, then xz its
# training file, so that it travels with the bundle (gzip: 32 MB, xz: 11 MB). On a fresh
# machine first fetch the 11 source snapshots that `python -m train.data.sources` lists as
# MISSING (the library's fetch github:OWNER/NAME; seconds each), and build the bundle with the
# train extra installed (train/README.md). Rebuilt on 2026-11-27 in a fresh checkout: 215,016
# training rows, byte-identical to the earlier build, 43 s.
#
#   python -m train.data.build --out .devrun/data8 --wiki-passes 6 --more-sources
#   mkdir -p .devrun/data8x && zcat .devrun/data8/train.jsonl.gz | xz -9 -T2 \
#       > .devrun/data8x/train.jsonl.xz && cp .devrun/data8/{valid.jsonl.gz,STATS.txt} .devrun/data8x/
#
# On the GPU machine, from the repository root, with .devrun/faith3/bundle and .devrun/data8x
# carried (about 44 MB; move the tracked model.onnx aside so that the tree fits):
#
#   OUT=$OUT bash train/round_v6.sh
#
# Seeds 0-2 side by side, BUDGET 400 s each (three runs share an H100 at about 56 ms a step: two
# epochs of data v6's 215k pairs are 6,720 steps, about 380 s). $OUT gets two packed files a run
# (about 18 MB: 9.5 + 8.9 in the dry run) and logs.txt: 7 files. Exits non-zero when a seed
# failed (train/gpu_runs.sh). Back here: python -m train.pack --unpack FILES/s0
# --weights W/s0 for each seed, python -m train.soup --runs W/s0 W/s1 W/s2 --out W/soup
# --bundle .devrun/faith3/bundle --valid .devrun/data8x/valid.jsonl.gz, then calibrate, export
# and evaluate as in train/README.md ("Data v5: five seeds and a soup").
# A dry run here: PATH=/work/trainenv/bin:$PATH SEEDS=0 EXTRA="--limit 64 --valid-limit 64
# --device cpu" BUDGET=0 OUT=/tmp/v6dry bash train/round_v6.sh
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/round_v6}; mkdir -p "$OUT"
SRC=${DATA:-.devrun/data8x}; SEEDS=${SEEDS:-0 1 2}; BUDGET=${BUDGET:-400}
D=${WORK:-/tmp/data-v6}; mkdir -p "$D"  # the unpacked data
python3 - "$SRC" "$D" <<'PY' || exit 1
import lzma, shutil, sys
from pathlib import Path

src, dst = Path(sys.argv[1]), Path(sys.argv[2])
xz = src / "train.jsonl.xz"
if not xz.is_file() or not (src / "valid.jsonl.gz").is_file():
    sys.exit(f"{src}: needs train.jsonl.xz and valid.jsonl.gz (see this script's header)")
with lzma.open(xz) as f, open(dst / "train.jsonl", "wb") as g:
    shutil.copyfileobj(f, g, 1 << 20)
shutil.copy(src / "valid.jsonl.gz", dst / "valid.jsonl.gz")
print(f"data v6: {sum(1 for _ in open(dst / 'train.jsonl', 'rb'))} training pairs")
PY
OUT=$OUT SEEDS=$SEEDS DATA=$D TRAIN_FILE=train.jsonl BUDGET=$BUDGET bash train/gpu_runs.sh
