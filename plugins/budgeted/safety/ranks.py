"""What the ranks of a distributed run must agree on: one helper for both adapters.

A time budget follows rank 0's clock (:func:`broadcast_from_rank0`), and a stop (a preemption
signal, a non-finite loss) is taken by every rank when any rank saw it (:func:`agree_max`), so
that all ranks leave the loop after the same iteration. Both use ``torch.distributed``'s default
group, which Detectron2's ``launch`` and MMEngine's ``init_dist`` set up; the tensor lives on the
current CUDA device under NCCL and on the CPU otherwise. With one process they return their
argument without touching ``torch.distributed``.

Every rank must call them at the same point (after the same iteration), or the run hangs.

Example:
    >>> agree_max(3), broadcast_from_rank0([1.5, 2.0])  # one process
    (3, [1.5, 2.0])
"""

from __future__ import annotations

from typing import Any

__all__ = ["agree_max", "broadcast_from_rank0", "world_size"]


def world_size() -> int:
    """The number of ranks of the default group (1 without ``torch.distributed``)."""
    import torch.distributed as dist

    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def _device() -> Any:
    import torch
    import torch.distributed as dist

    if dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def broadcast_from_rank0(values: list[float]) -> list[float]:
    """Rank 0's ``values`` on every rank (``values`` itself with one process): one broadcast of
    a float64 tensor."""
    if world_size() == 1:
        return values
    import torch
    import torch.distributed as dist

    tensor = torch.tensor(values, dtype=torch.float64, device=_device())
    dist.broadcast(tensor, src=0)
    return tensor.tolist()


def agree_max(value: int) -> int:
    """The largest ``value`` any rank passes (``int(value)`` with one process): one all-reduce
    (max) of an int64 tensor. A flag any rank raised (a signal number, 1 for a non-finite loss)
    is then raised on every rank."""
    if world_size() == 1:
        return int(value)
    import torch
    import torch.distributed as dist

    flag = torch.tensor([int(value)], dtype=torch.int64, device=_device())
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return int(flag.item())
