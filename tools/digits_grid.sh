#!/usr/bin/env bash
# The digits grid (issue 33, item 4; docs/digits.md, "The grid"), fixed on 2026-11-29 before any
# of its results were seen:
#   examples/digits_budget.py (LeNet-5, the UCI digits: 1,400 train / 397 held out; full
#   schedule 1,720 iterations at batch 32; SGD momentum 0.9, weight decay 1e-4; no warmup)
#   x schedules linear, step (step-BAC: x0.1 at 1/2 and 3/4 of the budget), cosine, poly
#     ((1 - p)^0.9), rex ((1 - p) / (1 - p/2))
#   x budgets 1, 2, 5, 10, 25, 100 % (17, 34, 86, 172, 430, 1,720 iterations)
#   x base LRs 0.01 0.03 0.1 0.3 1 3 (half-decade steps, placed by the pilot in docs/digits.md)
#   x seeds 0-4 (a seed fixes the initialisation and the batch order: seeds pair across schedules)
# = 900 runs. Metric: top-1 accuracy on the 397 held-out images at the end of the budget. For
# each schedule and budget, the base LR with the best mean over the seeds (the paper's protocol);
# the edge rule: where any schedule's best LR is the grid's smallest (largest), the next LR below
# (above) is added for every schedule, budget and seed (0.003 then 0.001; 10 then 30: at most two
# a side), and the best LRs are taken again; paired verdicts at each schedule's best LR, seed k
# against seed k, with a 95 % t-interval: linear - step and rex - linear (budgeted-report).
#
#   bash tools/digits_grid.sh     # output/sweep/digits; resumable: run it again to go on
#
# Wall time (docs/digits.md): 55 min 47 s on 2 cores with two runs at a time (2026-11-29, no
# widening needed), plus about 7 min for each LR the edge rule adds; since 2026-12-02 every cell
# is forked from a sweep that imported torch once (--preload), which cuts the 4 s each cell spent
# starting (docs/sweeps.md, "Start-up").
#
# Exit status: 0 when done; the sweep's own (2: refused, before anything ran; 75 or 130:
# stopped by a signal, run the script again to go on) otherwise.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
PY=${PYTHON:-.venv/bin/python}
OUT=${DIGITS_OUT:-output/sweep/digits}
JOBS=${DIGITS_JOBS:-2}
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1  # one thread a run (the example's --threads 1)
SCHEDULES=(linear step cosine poly rex)
BUDGETS=(0.01 0.02 0.05 0.1 0.25 1)
LRS=(0.01 0.03 0.1 0.3 1 3)
SEEDS=(0 1 2 3 4)
BELOW=(0.003 0.001)  # the edge rule's next LRs, one a round, at most two a side
ABOVE=(10 30)

sweep() {  # [LR...] [SWEEP FLAGS]: the grid at these base LRs (finished cells are skipped)
    "$PY" -m budgeted.experiments.sweep pytorch --task digits --keep-going --jobs "$JOBS" \
        --schedules "${SCHEDULES[@]}" --budgets "${BUDGETS[@]}" --seeds "${SEEDS[@]}" \
        --preload torch torch._dynamo sklearn.datasets budgeted.toys.digits \
        --out "$OUT" --lrs "$@"
}
edge_sides() {  # CSV: "below", "above", both or nothing: where a best LR lies at the grid's edge
    "$PY" - "$1" << 'EOF'
import csv, statistics, sys

rows = list(csv.DictReader(open(sys.argv[1], newline="")))
metric = list(rows[0])[7]  # budgeted.experiments.report.CSV_HEADER's 7 columns, then the metric
grid = sorted({float(r["lr"]) for r in rows})  # every LR searched, diverged ones too
runs = {}
for r in rows:
    if r[metric] != "":
        runs.setdefault((r["schedule"], r["budget"]), {}).setdefault(float(r["lr"]), [])
        runs[r["schedule"], r["budget"]][float(r["lr"])].append(float(r[metric]))
sides = set()
for by_lr in runs.values():
    best = max(by_lr, key=lambda lr: statistics.fmean(by_lr[lr]))
    sides |= {"below"} if best == grid[0] else {"above"} if best == grid[-1] else set()
print(" ".join(sorted(sides)))
EOF
}

if ! sweep "${LRS[@]}" --dry-run > /dev/null; then
    echo "digits_grid: budgeted-sweep refused the grid (its line above); nothing was run" >&2
    exit 2
fi
mkdir -p "$OUT"
start=$(date +%s)
lrs=("${LRS[@]}")
for round in 0 1 2; do
    sweep "${lrs[@]}"
    status=$?
    # 1: a run failed (--keep-going; the next round retries it); 3: a run diverged (a result)
    if [ "$status" -ne 0 ] && [ "$status" -ne 1 ] && [ "$status" -ne 3 ]; then
        echo "[digits] the sweep stopped (exit $status); run the script again to go on" >&2
        exit "$status"
    fi
    "$PY" -m budgeted.experiments.report "$OUT" --csv "$OUT/runs.csv" > /dev/null || exit 1
    sides=$(edge_sides "$OUT/runs.csv") || exit 1
    [ -z "$sides" ] && break
    if [ "$round" -eq 2 ]; then
        echo "[digits] a best LR is still at the edge ($sides) after two widenings: reported" \
            "as (edge)"
        break
    fi
    [[ $sides == *below* ]] && lrs=("${BELOW[$round]}" "${lrs[@]}")
    [[ $sides == *above* ]] && lrs+=("${ABOVE[$round]}")
    echo "[digits] a best LR is at the edge ($sides): the grid widens to ${lrs[*]}"
done
echo "[digits] grid done in $(($(date +%s) - start)) s at base LRs ${lrs[*]}"
"$PY" -m budgeted.experiments.report "$OUT" --csv "$OUT/runs.csv" --plot "$OUT/digits.png" |
    tee "$OUT/report.md"
"$PY" tools/digits_table.py "$OUT" | tee "$OUT/table.md"  # README.md's and docs/digits.md's table
