#!/usr/bin/env bash
# Detectron2 training on a Slurm cluster that survives preemption and time limits:
#   sbatch --gres=gpu:8 --cpus-per-task=40 --time=24:00:00 tools/slurm_train_net.sh \
#       --config mask_rcnn_budget10.yaml --num-gpus 8 OUTPUT_DIR ./output/budget10
# (all arguments are tools/train_net.py's; one node, one task, the tool spawns a worker per GPU).
#
# 120 s before the time limit Slurm sends SIGUSR1 (--signal), at a preemption or scancel SIGTERM:
# tools/train_net.py then finishes the current iteration, writes a checkpoint and exits with 75
# (budgeted.safety.preemption.PREEMPTED_EXIT_CODE). This script then requeues the job
# (scontrol requeue; --requeue allows it), and the requeued job, finding a run in OUTPUT_DIR,
# adds --resume: training continues where it stopped, at exactly the LR it would have had.
# Any other exit status is the job's, never requeued (0: done, or a finished run found by a
# requeued job; 1: an error, said in one line; 3: the loss diverged; 4: a time budget ended
# before its schedule decayed, saved and evaluated).
#
# Environment: PYTHON (the interpreter; default python), SRUN (default srun: the training runs
# as a job step, which --signal reaches; set SRUN= to run it directly), TRAIN_NET (the tool;
# default tools/train_net.py beside this script), PREEMPTED_EXIT_CODE (75).
#
#SBATCH --job-name=budgeted-train-net
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --signal=USR1@120
#SBATCH --requeue
#SBATCH --open-mode=append
set -uo pipefail

PYTHON=${PYTHON:-python}
SRUN=${SRUN-srun}
# sbatch runs a copy of this script from its spool folder: SLURM_SUBMIT_DIR holds the checkout
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ -n "${SLURM_SUBMIT_DIR:-}" ] && [ -f "$SLURM_SUBMIT_DIR/tools/train_net.py" ]; then
  HERE=$SLURM_SUBMIT_DIR/tools
fi
TRAIN_NET=${TRAIN_NET:-$HERE/train_net.py}
PREEMPTED_EXIT_CODE=${PREEMPTED_EXIT_CODE:-75}

# OUTPUT_DIR as the arguments state it (OUTPUT_DIR DIR or OUTPUT_DIR=DIR, the last one wins)
output_dir=""
resume=1
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  case ${args[i]} in
    OUTPUT_DIR=*) output_dir=${args[i]#OUTPUT_DIR=} ;;
    OUTPUT_DIR) output_dir=${args[i + 1]:-} ;;
    --resume | --resume-from | --resume-from=* | --eval-only) resume=0 ;;
  esac
done
if [ -z "$output_dir" ]; then
  # not on the command line: the config's own OUTPUT_DIR
  output_dir=$("$PYTHON" -c 'import sys
from budgeted.detectron2.cli import parse_args, setup
print(setup(parse_args(sys.argv[1:])).OUTPUT_DIR)' "$@" 2>/dev/null | tail -n 1)
fi

extra=()
if [ "$resume" = 1 ] && [ -n "$output_dir" ] && [ -f "$output_dir/last_checkpoint" ]; then
  echo "slurm_train_net: $output_dir holds a run: resuming it (--resume)"
  extra=(--resume)
fi

launcher=()
if [ -n "$SRUN" ] && [ -n "${SLURM_JOB_ID:-}" ] && command -v "$SRUN" >/dev/null 2>&1; then
  launcher=("$SRUN" --ntasks=1 --kill-on-bad-exit=1)
fi

# In the background, so that this shell can pass on the signals it gets (a trapped signal
# interrupts `wait`, not a foreground command) and still see the exit status afterwards.
"${launcher[@]}" "$PYTHON" -u "$TRAIN_NET" "${extra[@]}" "$@" &
child=$!
# shellcheck disable=SC2329  # invoked by the traps below
forward() {
  kill -s "$1" "$child" 2>/dev/null || true
}
trap 'forward TERM' TERM
trap 'forward USR1' USR1
trap 'forward INT' INT
while kill -0 "$child" 2>/dev/null; do
  wait "$child"
done
wait "$child"
rc=$?
trap - TERM USR1 INT

if [ "$rc" = "$PREEMPTED_EXIT_CODE" ]; then
  if [ -n "${SLURM_JOB_ID:-}" ]; then
    echo "slurm_train_net: preempted (exit status $rc): requeueing job $SLURM_JOB_ID"
    scontrol requeue "$SLURM_JOB_ID" || echo "slurm_train_net: scontrol requeue failed" >&2
  else
    echo "slurm_train_net: preempted (exit status $rc); not in a Slurm job: run it again to resume"
  fi
fi
exit "$rc"
