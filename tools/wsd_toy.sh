#!/usr/bin/env bash
# The WSD quality and compute table (issue 10): one stable WSD run per seed branched into one
# cooldown per budget, against separate linear runs; docs/results/wsd_{mmseg,detectron2}_toy.md.
#
#   bash tools/wsd_toy.sh         # resumable: run it again to go on
#
# Fixed before any result was seen: budgets 5, 10, 25, 50, 100 %, cooldown c = 0.2, seeds 0, 1, 2,
# one base LR per toy: the evidence grid's best for linear (docs/results/*_toy.md):
#   toy PSPNet (3200 iterations full) at LR 0.1, on the evidence toy set (200 train / 40 val);
#   toy Mask R-CNN (400 iterations full) at LR 0.03, on the evidence toy set (200 / 50).
# The two frameworks run side by side, one thread each.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
PY=${PYTHON:-.venv/bin/python}
OUT=${WSD_OUT:-output/wsd}
DATA=${WSD_DATA:-output/evidence/data}
RESULTS=${WSD_RESULTS:-docs/results}
mkdir -p "$OUT" "$RESULTS"
if [ ! -d "$DATA/toy_cityscapes/gtFine" ]; then
    "$PY" tools/make_toy_cityscapes.py "$DATA/toy_cityscapes" \
        --train-per-city 100 --val-per-city 40 || exit 1
fi
if [ ! -f "$DATA/coco/toy_coco/annotations/instances_val.json" ]; then
    "$PY" tools/make_toy_coco.py --root "$DATA/coco" --num-train 200 --num-val 50 || exit 1
fi
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
BUDGETS=(0.05 0.1 0.25 0.5 1.0)
"$PY" -m budgeted.experiments.branch mmseg --toy --budgets "${BUDGETS[@]}" --lrs 0.1 --seeds 0 1 2 \
    --compare --data "$DATA/toy_cityscapes" --out "$OUT/mmseg" --keep-going \
    >> "$OUT/mmseg.log" 2>&1 &
first=$!
"$PY" -m budgeted.experiments.branch detectron2 --toy --budgets "${BUDGETS[@]}" --lrs 0.03 --seeds 0 1 2 \
    --compare --data "$DATA/coco" --out "$OUT/detectron2" --keep-going \
    >> "$OUT/detectron2.log" 2>&1 &
second=$!
stopped=""
trap 'stopped=yes; kill -TERM $first $second 2> /dev/null' INT TERM
codes=()
for pid in $first $second; do
    while kill -0 "$pid" 2> /dev/null; do
        wait "$pid"  # returns early when a trapped signal arrives: wait again
    done
    wait "$pid"
    codes+=($?)
done
code1=${codes[0]} code2=${codes[1]}
if [ -n "$stopped" ]; then  # the committed tables are left as they were
    echo "[wsd] stopped (exit $code1, $code2); run it again to resume"
    exit 75
fi
status=0
# shellcheck source=tools/results.sh
source tools/results.sh
for name in mmseg detectron2; do
    compute=$(grep '^\[branch\] compute' "$OUT/$name.log" | tail -n 1 | sed 's/; wall .*//')
    write_results "$OUT/$name" "$RESULTS/wsd_${name}_toy" \
        "# WSD branches against separate linear runs: toy $name" "" \
        "Made by \`bash tools/wsd_toy.sh\` (the grid is listed at the top of that script)." \
        "The compute, as budgeted-branch printed it:" "" "    $compute" || status=1
done
echo "[wsd] exit $code1 (mmseg), $code2 (detectron2); tables in $RESULTS/ (exit $status)"
[ "$code1" = 0 ] && [ "$code2" = 0 ] && exit "$status"
exit 1
