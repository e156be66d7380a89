"""CPU-distributed (gloo) set-up for ``tools/train_seg.py``, with no MMEngine edits.

MMEngine's ``init_dist`` calls ``torch.cuda.set_device`` unconditionally, its DDP wrapper passes
``device_ids`` and SyncBN needs GPUs: on a machine without GPUs ``--launcher`` would fail. These
helpers start gloo themselves and adapt the config; with GPUs MMEngine does it all as usual.
Every check raises a one-line ``ValueError`` before any training starts.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import torch
import torch.distributed as dist
from mmengine.config import Config

__all__ = [
    "LAUNCHERS", "LAUNCHER_ENV", "destroy_process_group", "init_cpu_distributed", "lost_a_rank",
    "needs_cpu_distributed", "prepare_cpu_distributed", "say_lost_rank"
]  # fmt: skip

LAUNCHERS = ("none", "pytorch", "slurm", "mpi")
"""``--launcher`` choices, as in MMSegmentation's ``tools/train.py``."""


def _replace_sync_bn(node: Any) -> int:
    count = 0
    if isinstance(node, dict):
        if node.get("type") in ("SyncBN", "MMSyncBN"):
            node["type"] = "BN"
            count += 1
        for value in node.values():
            count += _replace_sync_bn(value)
    elif isinstance(node, (list, tuple)):
        for value in node:
            count += _replace_sync_bn(value)
    return count


def prepare_cpu_distributed(cfg: Config) -> int:
    """Adapt ``cfg`` to gloo on CPUs: DDP with ``device_ids=None``, BN instead of SyncBN.

    Example:
        >>> cfg = Config(dict(model=dict(backbone=dict(norm_cfg=dict(type="SyncBN")))))
        >>> prepare_cpu_distributed(cfg), cfg.model_wrapper_cfg.device_ids
        (1, None)
    """
    cfg.env_cfg = cfg.get("env_cfg") or {}
    cfg.env_cfg.dist_cfg = {**(cfg.env_cfg.get("dist_cfg") or {}), "backend": "gloo"}
    wrapper = dict(cfg.get("model_wrapper_cfg") or {"type": "MMDistributedDataParallel"})
    wrapper["device_ids"] = None
    cfg.model_wrapper_cfg = wrapper
    cfg.pop("sync_bn", None)
    return _replace_sync_bn(cfg.get("model"))


def _require(launcher: str, *names: str) -> None:
    """One line naming the variables a launcher's environment lacks (run outside it)."""
    missing = [name for name in names if name not in os.environ]
    if missing:
        raise ValueError(
            f"--launcher {launcher}: environment variables {', '.join(missing)} are not set; "
            f"start the processes with {_STARTERS[launcher]}"
        )


_STARTERS = {
    "pytorch": "tools/dist_train.sh (torchrun)",
    "slurm": "srun, as tools/slurm_train.sh does",
    "mpi": "mpirun",
}


def _slurm_env() -> None:
    _require("slurm", "SLURM_PROCID", "SLURM_NTASKS")
    os.environ.setdefault("RANK", os.environ["SLURM_PROCID"])
    os.environ.setdefault("WORLD_SIZE", os.environ["SLURM_NTASKS"])
    os.environ.setdefault("LOCAL_RANK", os.environ.get("SLURM_LOCALID", "0"))
    if "MASTER_ADDR" not in os.environ:
        _require("slurm", "SLURM_NODELIST")
        nodes = os.environ["SLURM_NODELIST"]
        out = subprocess.check_output(["scontrol", "show", "hostname", nodes], text=True)
        os.environ["MASTER_ADDR"] = out.split()[0]
    os.environ.setdefault("MASTER_PORT", "29500")


def _mpi_env() -> None:
    _require("mpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE")
    os.environ.setdefault("RANK", os.environ["OMPI_COMM_WORLD_RANK"])
    os.environ.setdefault("WORLD_SIZE", os.environ["OMPI_COMM_WORLD_SIZE"])
    os.environ.setdefault("LOCAL_RANK", os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK", "0"))
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29500")


def init_cpu_distributed(launcher: str) -> None:
    """Start a gloo process group for ``launcher`` (MMEngine's ``init_dist`` needs CUDA).

    Raises:
        ValueError: one line for another launcher or a missing environment variable.

    Example:
        ``init_cpu_distributed("pytorch")`` in each process ``tools/dist_train.sh`` starts.
    """
    if launcher not in LAUNCHERS or launcher == "none":
        raise ValueError(f"launcher={launcher!r} is invalid here; allowed: pytorch, slurm, mpi")
    if dist.is_initialized():
        return
    if launcher == "slurm":
        _slurm_env()
    elif launcher == "mpi":
        _mpi_env()
    _require(launcher, "RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
    dist.init_process_group(backend="gloo", init_method="env://")


def needs_cpu_distributed(launcher: str) -> bool:
    """True when ``launcher`` asks for several processes and there is no GPU.

    Example:
        >>> needs_cpu_distributed("none")
        False
    """
    return launcher != "none" and not torch.cuda.is_available()


def destroy_process_group() -> None:
    """Destroy the default process group if one is up (a rank may abort at exit without it)."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


LAUNCHER_ENV = "BUDGETED_DIST_LAUNCHER"
"""Set by :mod:`budgeted.mmengine.dist_run` for the ranks it starts: it names a rank that died in
one line, so the others stay quiet when their collectives fail for that reason."""


def lost_a_rank(err: BaseException) -> bool:
    """Whether ``err`` is a collective that failed because another rank is gone (gloo: the
    connection to its peer closed or was reset; NCCL: a ``DistBackendError``), in a process group
    of several ranks.

    Example:
        >>> lost_a_rank(RuntimeError("gloo ... Connection closed by peer"))  # no process group
        False
    """
    if not (dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1):
        return False
    text = str(err)
    return isinstance(err, dist.DistError) or ("gloo" in text and "peer" in text)


def say_lost_rank(prog: str, rank: int, err: BaseException) -> None:
    """One line for a rank whose collective failed (:func:`lost_a_rank`), unless the launcher
    (``LAUNCHER_ENV``) names the rank that died."""
    if os.environ.get(LAUNCHER_ENV):
        return
    first = " ".join(str(err).split())[:200]
    print(
        f"{prog}: rank {rank}: another rank is gone, training stopped ({first}); that rank's "
        "own output says why it stopped",
        file=sys.stderr,
    )
