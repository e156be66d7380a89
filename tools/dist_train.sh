#!/usr/bin/env bash
# Distributed training with torchrun, in MMSegmentation's style:
#   bash tools/dist_train.sh CONFIG NPROC [tools/train_seg.py options]
# On a machine without GPUs the processes train on CPUs with gloo (tools/train_seg.py sets it up).
# Multi-node: NNODES, NODE_RANK, MASTER_ADDR, PORT; PYTHON selects the interpreter.
# torchrun runs inside budgeted.mmengine.dist_run, which first makes train_seg's checks once
# (bad input: one line, exit status 2, no rank started) and reports a failed rank in one line
# (which rank, its signal or status). Exit status: 0 done; the ranks' own 2 (refused), 3
# (diverged), 4 (time budget undecayed), 75 (preempted: the checkpoint is written, run the same
# command with --resume); 1 when a rank was killed or lost.
set -euo pipefail

CONFIG=$1
GPUS=$2
NNODES=${NNODES:-1}
NODE_RANK=${NODE_RANK:-0}
PORT=${PORT:-29500}
MASTER_ADDR=${MASTER_ADDR:-"127.0.0.1"}
PYTHON=${PYTHON:-python}

# (train_seg.py filters the same warning of MMEngine's imports)
PYTHONWARNINGS="${PYTHONWARNINGS:+$PYTHONWARNINGS,}ignore:pkg_resources is deprecated:UserWarning" \
PYTHONPATH="$(dirname "$0")/..${PYTHONPATH:+:$PYTHONPATH}" \
exec "$PYTHON" -m budgeted.mmengine.dist_run \
    --nnodes="$NNODES" \
    --node_rank="$NODE_RANK" \
    --master_addr="$MASTER_ADDR" \
    --nproc_per_node="$GPUS" \
    --master_port="$PORT" \
    "$(dirname "$0")/train_seg.py" \
    "$CONFIG" \
    --launcher pytorch "${@:3}"
