#!/usr/bin/env bash
# Distributed training with torchrun, in MMSegmentation's style:
#   bash tools/dist_train.sh CONFIG NPROC [tools/train_seg.py options]
# On a machine without GPUs the processes train on CPUs with gloo (tools/train_seg.py sets it up).
# Multi-node: NNODES, NODE_RANK, MASTER_ADDR, PORT; PYTHON selects the interpreter.
# Exit status: torchrun's, except 75 when the run was preempted (SIGTERM / SIGUSR1 to the
# workers): its checkpoint is written, run the same command with --resume to continue. torchrun
# reports a worker's 75 as its own failure, so rank 0 leaves it in BUDGETED_STATUS_FILE.
set -euo pipefail

CONFIG=$1
GPUS=$2
NNODES=${NNODES:-1}
NODE_RANK=${NODE_RANK:-0}
PORT=${PORT:-29500}
MASTER_ADDR=${MASTER_ADDR:-"127.0.0.1"}
PYTHON=${PYTHON:-python}
PREEMPTED=75

BUDGETED_STATUS_FILE=$(mktemp "${TMPDIR:-/tmp}/dist_train_status.XXXXXX")
export BUDGETED_STATUS_FILE
trap 'rm -f "$BUDGETED_STATUS_FILE"' EXIT

status=0
PYTHONPATH="$(dirname "$0")/..${PYTHONPATH:+:$PYTHONPATH}" \
"$PYTHON" -m torch.distributed.run \
    --nnodes="$NNODES" \
    --node_rank="$NODE_RANK" \
    --master_addr="$MASTER_ADDR" \
    --nproc_per_node="$GPUS" \
    --master_port="$PORT" \
    "$(dirname "$0")/train_seg.py" \
    "$CONFIG" \
    --launcher pytorch "${@:3}" || status=$?

if [ "$status" -ne 0 ] && [ "$(cat "$BUDGETED_STATUS_FILE")" = "$PREEMPTED" ]; then
    echo "dist_train.sh: preempted: the checkpoint is written; run the same command with" \
        "--resume to continue (exit status $PREEMPTED)" >&2
    exit "$PREEMPTED"
fi
exit "$status"
