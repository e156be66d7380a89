#!/usr/bin/env bash
# Training on a Slurm cluster, in MMSegmentation's style:
#   GPUS=8 bash tools/slurm_train.sh PARTITION JOB_NAME CONFIG [tools/train_seg.py options]
# GPUS (default 4), GPUS_PER_NODE (4), CPUS_PER_TASK (5), SRUN_ARGS; PYTHON selects the interpreter.
set -euxo pipefail

PARTITION=$1
JOB_NAME=$2
CONFIG=$3
GPUS=${GPUS:-4}
GPUS_PER_NODE=${GPUS_PER_NODE:-4}
CPUS_PER_TASK=${CPUS_PER_TASK:-5}
SRUN_ARGS=${SRUN_ARGS:-""}
PYTHON=${PYTHON:-python}

# shellcheck disable=SC2086
PYTHONPATH="$(dirname "$0")/..${PYTHONPATH:+:$PYTHONPATH}" \
srun -p "$PARTITION" \
    --job-name="$JOB_NAME" \
    --gres=gpu:"$GPUS_PER_NODE" \
    --ntasks="$GPUS" \
    --ntasks-per-node="$GPUS_PER_NODE" \
    --cpus-per-task="$CPUS_PER_TASK" \
    --kill-on-bad-exit=1 \
    ${SRUN_ARGS} \
    "$PYTHON" -u "$(dirname "$0")/train_seg.py" "$CONFIG" --launcher="slurm" "${@:4}"
