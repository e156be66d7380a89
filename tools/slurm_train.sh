#!/usr/bin/env bash
# Training on a Slurm cluster, in MMSegmentation's style:
#   GPUS=8 bash tools/slurm_train.sh PARTITION JOB_NAME CONFIG [tools/train_seg.py options]
# GPUS (default 4), GPUS_PER_NODE (4), CPUS_PER_TASK (5), SRUN_ARGS; PYTHON selects the interpreter.
#
# Preemption: the tasks stop on SIGTERM / SIGUSR1 after the current iteration, write a checkpoint
# and exit with 75 (budgeted.safety.preemption.PREEMPTED_EXIT_CODE). Inside a batch job (SLURM_JOB_ID
# set; sbatch --requeue --signal=USR1@120) this script then requeues the job
# (scontrol requeue), and the requeued job (SLURM_RESTART_COUNT > 0) resumes by itself: --resume
# is added, and a --resume-from PATH of the first start is dropped (the run's own newest
# checkpoint is newer). Run outside a batch job, it exits with 75 and says to rerun with --resume.
set -euxo pipefail

PARTITION=$1
JOB_NAME=$2
CONFIG=$3
GPUS=${GPUS:-4}
GPUS_PER_NODE=${GPUS_PER_NODE:-4}
CPUS_PER_TASK=${CPUS_PER_TASK:-5}
SRUN_ARGS=${SRUN_ARGS:-""}
PYTHON=${PYTHON:-python}
PREEMPTED=75
# sbatch runs a copy of this script from its spool folder: there SLURM_SUBMIT_DIR holds the checkout
TOOLS=$(dirname "$0")
if [ ! -f "$TOOLS/train_seg.py" ] && [ -f "${SLURM_SUBMIT_DIR:-}/tools/train_seg.py" ]; then
    TOOLS=$SLURM_SUBMIT_DIR/tools
fi

ARGS=()
if [ "${SLURM_RESTART_COUNT:-0}" -gt 0 ]; then
    # a requeued job: continue the run from its latest checkpoint
    resume=--resume
    skip=0
    for arg in "${@:4}"; do
        if [ "$skip" = 1 ]; then
            skip=0
            continue
        fi
        case "$arg" in
            --resume) resume="" ;;
            --resume-from) skip=1; continue ;;
            --resume-from=*) continue ;;
        esac
        ARGS+=("$arg")
    done
    if [ -n "$resume" ]; then
        ARGS+=("$resume")
    fi
else
    ARGS=("${@:4}")
fi

status=0
# shellcheck disable=SC2086
PYTHONPATH="$TOOLS/..${PYTHONPATH:+:$PYTHONPATH}" \
srun -p "$PARTITION" \
    --job-name="$JOB_NAME" \
    --gres=gpu:"$GPUS_PER_NODE" \
    --ntasks="$GPUS" \
    --ntasks-per-node="$GPUS_PER_NODE" \
    --cpus-per-task="$CPUS_PER_TASK" \
    --kill-on-bad-exit=1 \
    ${SRUN_ARGS} \
    "$PYTHON" -u "$TOOLS/train_seg.py" "$CONFIG" --launcher="slurm" ${ARGS[@]+"${ARGS[@]}"} \
    || status=$?

if [ "$status" -eq "$PREEMPTED" ]; then
    if [ -n "${SLURM_JOB_ID:-}" ]; then
        echo "slurm_train.sh: preempted: requeueing job $SLURM_JOB_ID, which resumes from its" \
            "latest checkpoint" >&2
        scontrol requeue "$SLURM_JOB_ID"
    else
        echo "slurm_train.sh: preempted (not in a batch job, nothing to requeue): run the same" \
            "command with --resume to continue" >&2
    fi
fi
exit "$status"
