"""``launch``: Detectron2's ``launch`` on GPUs; on a CPU-only machine, CPU processes with gloo.

Detectron2 v0.6's ``launch`` asserts CUDA for more than one process and hard-codes NCCL. Without
CUDA, :func:`launch` spawns the processes itself, joins them with the gloo backend and sets up
Detectron2's local process group the same way, so ``--num-gpus N`` means N CPU processes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from detectron2.engine import launch as d2_launch
from detectron2.engine.launch import DEFAULT_TIMEOUT, _find_free_port
from detectron2.utils import comm

__all__ = ["launch"]


def launch(
    main_func: Callable[..., Any],
    num_gpus_per_machine: int,
    num_machines: int = 1,
    machine_rank: int = 0,
    dist_url: str | None = None,
    args: Sequence[Any] = (),
    timeout: timedelta = DEFAULT_TIMEOUT,
) -> None:
    """Run ``main_func(*args)`` on ``num_gpus_per_machine`` workers of this machine.

    Same signature as ``detectron2.engine.launch``, which it calls when CUDA is there (or for
    one worker); without CUDA it spawns CPU processes joined with gloo.

    Args:
        main_func (callable): one worker's work (picklable: spawned processes import it).
        num_gpus_per_machine (int): workers on this machine (CPU processes without CUDA).
        num_machines (int): machines in all. Defaults to 1.
        machine_rank (int): this machine's rank. Defaults to 0.
        dist_url (str, optional): ``tcp://HOST:PORT``; ``"auto"`` or None: a free local port.
        args (Sequence): the arguments of ``main_func``.
        timeout (timedelta): the process-group timeout.

    Raises:
        ValueError: one line for a bad worker count.

    Example:
        >>> launch(print, 1, args=("one worker",))
        one worker
    """
    world_size = num_machines * num_gpus_per_machine
    if num_gpus_per_machine < 1 or num_machines < 1:
        raise ValueError(
            f"--num-gpus={num_gpus_per_machine} --num-machines={num_machines} is invalid; "
            "allowed: whole numbers >= 1"
        )
    if world_size == 1 or torch.cuda.is_available():
        d2_launch(
            main_func,
            num_gpus_per_machine,
            num_machines,
            machine_rank,
            dist_url,
            args=tuple(args),
            timeout=timeout,
        )
        return
    if dist_url is None or dist_url == "auto":
        if num_machines != 1:
            raise ValueError("--dist-url auto works on one machine only; give tcp://HOST:PORT")
        dist_url = f"tcp://127.0.0.1:{_find_free_port()}"
    mp.spawn(
        _cpu_worker,
        nprocs=num_gpus_per_machine,
        args=(
            main_func,
            world_size,
            num_gpus_per_machine,
            machine_rank,
            dist_url,
            tuple(args),
            timeout,
        ),
        daemon=False,
    )


def _cpu_worker(
    local_rank: int,
    main_func: Callable[..., Any],
    world_size: int,
    num_gpus_per_machine: int,
    machine_rank: int,
    dist_url: str,
    args: tuple[Any, ...],
    timeout: timedelta,
) -> None:
    """One CPU process: Detectron2's ``_distributed_worker`` with gloo and without CUDA."""
    rank = machine_rank * num_gpus_per_machine + local_rank
    dist.init_process_group(
        backend="gloo", init_method=dist_url, world_size=world_size, rank=rank, timeout=timeout
    )
    try:
        assert comm._LOCAL_PROCESS_GROUP is None
        for i in range(world_size // num_gpus_per_machine):
            ranks = list(range(i * num_gpus_per_machine, (i + 1) * num_gpus_per_machine))
            group = dist.new_group(ranks)
            if i == machine_rank:
                comm._LOCAL_PROCESS_GROUP = group
        comm.synchronize()
        main_func(*args)
    finally:
        dist.destroy_process_group()
