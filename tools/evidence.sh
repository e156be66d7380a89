#!/usr/bin/env bash
# The toy evidence grid (issue 9), both frameworks: tables and plots into docs/results/.
#
#   make evidence                 # in the background; log: output/evidence/evidence.log
#   bash tools/evidence.sh        # in the foreground
#
# The grid was fixed before any of its results were seen:
#   MMSegmentation toy PSPNet: linear, step, poly x budgets 5, 10, 25 % (of 3200 iterations)
#     x base LR 0.03, 0.1, 0.3 x seeds 0, 1, 2, on a toy set of 200 train and 40 val images;
#   Detectron2 toy Mask R-CNN: linear, step x budgets 10, 25, 50 % (of 400 iterations)
#     x base LR 0.003, 0.01, 0.03 x seeds 0, 1, 2, on a toy set of 200 train and 50 val images.
# Then extended by the rule "a best LR at the edge of the grid: widen it for every schedule":
#   MMSeg + 0.01 (poly's best at 5 % was 0.03, the lowest), Detectron2 + 0.1 (linear's best at
#   10 % and 25 % and step's at 10 % were 0.03, the highest): 108 + 72 runs. Those were
#   rerun from scratch with one thread per sweep (2026-11-26), and the same rule then widened
#   MMSeg once more: + 1.0 (poly's best at 5 % was 0.3, the highest): 135 + 72 runs.
#   Then Detectron2 once more: + 0.3 (linear's mask AP at 10 % was best at 0.1, the highest):
#   135 + 90 runs.
# The LR and loss are logged every 5 iterations (for the report's curves).
# The MMSeg and Detectron2 sweeps run side by side, one thread each (EVIDENCE_THREADS).
# Resumable: run it again and finished runs are skipped, interrupted ones resumed. Ctrl-C or
# SIGTERM stop it cleanly (the running cell saves a checkpoint).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
PY=${PYTHON:-.venv/bin/python}
OUT=${EVIDENCE_OUT:-output/evidence}
RESULTS=${EVIDENCE_RESULTS:-docs/results}
mkdir -p "$OUT/data" "$RESULTS"
start=$(date +%s)

if [ ! -d "$OUT/data/toy_cityscapes/gtFine" ]; then
    "$PY" tools/make_toy_cityscapes.py "$OUT/data/toy_cityscapes" \
        --train-per-city 100 --val-per-city 40 || exit 1
fi
if [ ! -f "$OUT/data/coco/toy_coco/annotations/instances_val.json" ]; then
    "$PY" tools/make_toy_coco.py --root "$OUT/data/coco" --num-train 200 --num-val 50 || exit 1
fi

status=0
# The two sweeps run side by side, one thread each: on 2 cores that trains about twice as fast
# as one sweep after the other with two threads (tiny models keep a second thread idle).
export OMP_NUM_THREADS=${EVIDENCE_THREADS:-1} MKL_NUM_THREADS=${EVIDENCE_THREADS:-1}
pids=()
# shellcheck disable=SC2329  # called from the traps
stop() {  # forward Ctrl-C / SIGTERM to both sweeps: each saves its running cell and exits
    echo "[evidence] $1: stopping the sweeps (each saves its running cell)"
    kill -TERM "${pids[@]}" 2> /dev/null
}
trap 'stop SIGINT' INT
trap 'stop SIGTERM' TERM
"$PY" -m budgeted.sweep --keep-going mmseg --toy --schedules linear step poly \
    --budgets 0.05 0.1 0.25 --lrs 0.01 0.03 0.1 0.3 1.0 --seeds 0 1 2 \
    --data "$OUT/data/toy_cityscapes" --out "$OUT/mmseg" \
    -- default_hooks.logger.interval=5 > "$OUT/mmseg.log" 2>&1 &
pids+=($!)
"$PY" -m budgeted.sweep --keep-going detectron2 --toy --schedules linear step \
    --budgets 0.1 0.25 0.5 --lrs 0.003 0.01 0.03 0.1 0.3 --seeds 0 1 2 \
    --data "$OUT/data/coco" --out "$OUT/detectron2" \
    -- SOLVER.BUDGET.WRITER_PERIOD 5 > "$OUT/detectron2.log" 2>&1 &
pids+=($!)
echo "[evidence] sweeps running (pids ${pids[*]}); logs: $OUT/mmseg.log, $OUT/detectron2.log"
for pid in "${pids[@]}"; do
    while kill -0 "$pid" 2> /dev/null; do
        wait "$pid"  # returns early when a trapped signal arrives: wait again
    done
    wait "$pid"
    code=$?
    case $code in
        0) ;;
        75 | 130) status=$code ;;
        *) [ "$status" = 0 ] && status=$code ;;
    esac
done
trap - INT TERM
case $status in
    75 | 130)
        echo "[evidence] stopped (exit $status); run it again to resume"
        exit "$status"
        ;;
esac
echo "[evidence] sweeps done in $(( $(date +%s) - start )) s (this invocation)"

# shellcheck source=tools/results.sh
source tools/results.sh
for name in mmseg detectron2; do
    write_results "$OUT/$name" "$RESULTS/${name}_toy" "# Toy evidence grid: $name" "" \
        "Made by \`bash tools/evidence.sh\` (\`make evidence\`); the grid and toy sets are" \
        "listed at the top of that script. Values: final metric after the last iteration," \
        "mean ± std over seeds (n)." || status=1
done
echo "[evidence] tables and plots in $RESULTS/ (exit $status)"
exit "$status"
