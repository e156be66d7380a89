#!/usr/bin/env bash
# The toy grids of the MMEngine families added for the paper's other experiments (issue 11):
# docs/results/{mmdet,mmpretrain_cifar10,mmpretrain_imagenet,mmaction}_toy.md, .csv and plots.
#
#   bash tools/families_toy.sh        # resumable: run it again to go on
#
# The grid was fixed before any of its results were seen, the same for every family:
#   linear vs step (the family's baseline) x budgets 10 %, 25 %, 100 % of the toy's full
#   schedule x the config's own base LR x seeds 0, 1, 2, on each toy's default toy set
#   (written by the sweep when missing). One LR only: these grids show that the families train
#   and how far apart the schedules land at one LR, not the paper's tuned-LR comparison.
# Two sweeps run side by side (MMDetection alone; the three others in turn), one thread each.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
PY=${PYTHON:-.venv/bin/python}
OUT=${FAMILIES_OUT:-output/families}
RESULTS=${FAMILIES_RESULTS:-docs/results}
# shellcheck source=tools/results.sh
source tools/results.sh
mkdir -p "$OUT" "$RESULTS"
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
GRID=(--schedules linear step --budgets 0.1 0.25 1.0 --seeds 0 1 2)
sweep() {  # NAME FRAMEWORK [--task TASK]: one family's sweep (run with &: exec makes it the job)
    local name=$1
    shift
    exec "$PY" -m budgeted.experiments.sweep --keep-going "$@" --toy "${GRID[@]}" --out "$OUT/$name" \
        >> "$OUT/$name.log" 2>&1
}
run_group() {  # "NAME FRAMEWORK [--task TASK]"...: in turn; SIGTERM stops the running sweep (which
    local child=""  # saves its running cell) and the rest of the group
    trap 'kill -TERM "$child" 2> /dev/null; wait "$child"; exit 75' TERM
    for spec in "$@"; do
        # shellcheck disable=SC2086  # each spec is words: name, framework, options
        sweep $spec &
        child=$!
        wait "$child"
    done
}
start=$(date +%s)
run_group "mmdet mmdet" &
first=$!
run_group "mmpretrain_cifar10 mmpretrain --task cifar10" \
    "mmpretrain_imagenet mmpretrain --task imagenet" "mmaction mmaction" &
second=$!
stopped=""
trap 'stopped=yes; kill -TERM $first $second 2> /dev/null' INT TERM
for pid in $first $second; do
    while kill -0 "$pid" 2> /dev/null; do
        wait "$pid"  # returns early when a trapped signal arrives: wait again
    done
done
if [ -n "$stopped" ]; then  # the committed tables are left as they were
    echo "[families] stopped; run it again to resume"
    exit 75
fi
echo "[families] sweeps done in $(($(date +%s) - start)) s"
status=0
for name in mmdet mmpretrain_cifar10 mmpretrain_imagenet mmaction; do
    write_results "$OUT/$name" "$RESULTS/${name}_toy" "# Toy $name grid (issue 11)" "" \
        "Made by \`bash tools/families_toy.sh\`; the grid is listed at the top of that script." \
        || status=1
done
echo "[families] $RESULTS/*_toy.md (exit $status)"
exit "$status"
