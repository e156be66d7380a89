#!/usr/bin/env bash
# The toy architecture-ranking grid (issue 11, the paper's appendix A): docs/results/rank_toy.md.
#
#   bash tools/rank_toy.sh        # resumable: run it again to go on
#
# The grid was fixed before any of its results were seen:
#   six toy PSPNet backbones (ResNetV1c depth 18 or 34 x base width 8, 12, 16 or 24:
#   r18w8 r18w12 r18w16 r18w24 r34w8 r34w16) x linear, step x budgets 5 % and 25 % (of 3200
#   iterations; 25 % is the "full" budget: the toy's mIoU is within 1 % of its best there,
#   docs/results/mmseg_toy.md) x base LR 0.1 (linear's best at 5 % and 25 % in that grid)
#   x seeds 0, 1, on the evidence grid's toy set (200 train, 40 val images).
# Two sweeps run side by side (three architectures each, about equal in cost), one thread each.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
PY=${PYTHON:-.venv/bin/python}
OUT=${RANK_OUT:-output/rank}
DATA=${RANK_DATA:-output/evidence/data/toy_cityscapes}
RESULTS=${RANK_RESULTS:-docs/results}
mkdir -p "$OUT" "$RESULTS"
if [ ! -d "$DATA/gtFine" ]; then
    "$PY" tools/make_toy_cityscapes.py "$DATA" --train-per-city 100 --val-per-city 40 || exit 1
fi
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
ARCHS=(r18w8 r18w12 r18w16 r18w24 r34w8 r34w16)
sweep_arch() {  # NAME: one architecture's sweep (run with &: exec makes the job the sweep itself)
    local name=$1 depth=${1:1:2} width=${1#*w}
    exec "$PY" -m budgeted.experiments.sweep --keep-going mmseg --toy --schedules linear step \
        --budgets 0.05 0.25 --lrs 0.1 --seeds 0 1 --data "$DATA" --out "$OUT/$name" -- \
        "model.backbone.depth=$depth" "model.backbone.base_channels=$width" \
        "model.backbone.stem_channels=$width" "model.decode_head.in_channels=$((8 * width))" \
        "model.auxiliary_head.in_channels=$((4 * width))" >> "$OUT/$name.log" 2>&1
}
run_group() {  # NAME...: the architectures in turn; SIGTERM stops the running sweep (which saves
    local child=""  # its running cell) and the rest of the group
    trap 'kill -TERM "$child" 2> /dev/null; wait "$child"; exit 75' TERM
    for name in "$@"; do
        sweep_arch "$name" &
        child=$!
        wait "$child"
    done
}
start=$(date +%s)
run_group r18w8 r18w24 r34w8 &
first=$!
run_group r18w12 r18w16 r34w16 &
second=$!
stopped=""
trap 'stopped=yes; kill -TERM $first $second 2> /dev/null' INT TERM
for pid in $first $second; do
    while kill -0 "$pid" 2> /dev/null; do
        wait "$pid"  # returns early when a trapped signal arrives: wait again
    done
done
if [ -n "$stopped" ]; then  # the committed table is left as it was
    echo "[rank] stopped; run it again to resume"
    exit 75
fi
echo "[rank] sweeps done in $(( $(date +%s) - start )) s"
named=()
for name in "${ARCHS[@]}"; do named+=("$name=$OUT/$name"); done
{
    echo "# Toy architecture ranking (the paper's appendix A)"
    echo
    echo "Made by \`bash tools/rank_toy.sh\`; the grid is listed at the top of that script."
    echo
    "$PY" -m budgeted.experiments.rank "${named[@]}"
} > "$RESULTS/rank_toy.md"
status=$?
echo "[rank] $RESULTS/rank_toy.md (exit $status)"
exit "$status"
