"""The full-gradient norm over a fixed subset of training batches (the paper's Figure 3), in
plain PyTorch; the Detectron2 and MMEngine hooks (``budgeted.detectron2.grad_norm``,
``budgeted.mmengine.grad_norm``) call :func:`full_gradient_norm` every ``k`` iterations.

For batches ``b = 1..B`` with training losses ``L_b(w)`` at the current weights ``w``:

    ||g||_2,   g = (1/B) sum_b grad_w L_b(w)

(the gradient of the mean loss over the subset), over every parameter with ``requires_grad``
(what the optimizer updates); with several processes, ``g`` is also averaged over the ranks
(each rank holding its own ``B`` batches), so every rank gets the norm over all ``B x ranks``
batches.

The evaluation leaves the training exactly as it would have been without it:

- gradients come from ``torch.autograd.grad``: no parameter's ``.grad`` is read or written, the
  optimizer (its state, its step count) is not touched, no optimizer step is taken;
- the model runs in training mode (the loss is the training loss; Detectron2's R-CNNs return
  losses only in training mode), so BatchNorm normalizes with batch statistics and updates its
  running statistics; every buffer (``running_mean``, ``running_var``,
  ``num_batches_tracked``, any other) is copied before and copied back after, in place, so the
  model's state is bitwise what it was; ``model.training`` is restored;
- the random number generators (python's ``random``, numpy's global one, torch's CPU generator
  and the CUDA generators of the devices the model is on) are saved and restored, so the next
  training iteration draws the numbers it would have drawn (ROI sampling, dropout, data
  augmentation); inside, they are seeded with ``seed``, so the norm is a function of the weights
  alone (the same subset, the same sampling at every evaluation);
- each batch is deep-copied before the loss sees it (a loss that changes its input in place,
  such as MMSegmentation's data preprocessor padding the data samples, sees the same data at
  every evaluation).

State a model keeps outside its parameters and buffers (plain attributes) is not restored.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import random
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

__all__ = ["first_batches", "full_gradient_norm", "model_devices", "preserved_rng", "unwrap_model"]

LossFn = Callable[[nn.Module, Any], torch.Tensor]
"""``loss_fn(model, batch) -> scalar tensor``: the training loss of one batch."""


def unwrap_model(model: nn.Module) -> nn.Module:
    """The module inside ``DataParallel`` / ``DistributedDataParallel`` (MMEngine's wrappers
    subclass it), else ``model``.

    Example:
        >>> net = torch.nn.Linear(2, 1)
        >>> unwrap_model(torch.nn.DataParallel(net)) is net, unwrap_model(net) is net
        (True, True)
    """
    wrappers = (nn.DataParallel, nn.parallel.DistributedDataParallel)
    while isinstance(model, wrappers):
        model = model.module
    return model


def model_devices(model: nn.Module) -> list[int]:
    """The CUDA device indices the parameters and buffers of ``model`` are on (sorted).

    Example:
        >>> model_devices(torch.nn.Linear(2, 1))
        []
    """
    tensors = itertools.chain(model.parameters(), model.buffers())
    return sorted({t.device.index or 0 for t in tensors if t.device.type == "cuda"})


def _numpy_random() -> Any:
    try:
        import numpy
    except ImportError:  # pragma: no cover - numpy is installed with either framework
        return None
    return numpy.random


@contextlib.contextmanager
def preserved_rng(seed: int | None = None, devices: Sequence[int] = ()) -> Iterator[None]:
    """Run a block without changing any global random number generator.

    Saves python's ``random``, numpy's global generator, torch's CPU generator and the CUDA
    generators of ``devices``; seeds them all with ``seed`` (None: leaves them as they are);
    restores every one on exit, also after an exception. CUDA generators of other devices are
    neither seeded nor touched (and CUDA is not initialized by this function).

    Args:
        seed (int, optional): the seed inside the block.
        devices (Sequence[int]): CUDA device indices whose generators to save (and seed).

    Example:
        >>> before = torch.rand(1)
        >>> with preserved_rng(seed=0):
        ...     inside = torch.rand(1)
        >>> with preserved_rng(seed=0):
        ...     again = torch.rand(1)
        >>> bool(inside == again)
        True
    """
    np_random = _numpy_random()
    py_state = random.getstate()
    np_state = np_random.get_state() if np_random is not None else None
    with torch.random.fork_rng(devices=list(devices)):
        try:
            if seed is not None:
                random.seed(seed)
                if np_random is not None:
                    np_random.seed(seed % 2**32)
                torch.default_generator.manual_seed(seed)
                for index in devices:
                    with torch.cuda.device(index):
                        torch.cuda.manual_seed(seed)
            yield
        finally:
            random.setstate(py_state)
            if np_random is not None:
                np_random.set_state(np_state)


def first_batches(
    make_loader: Callable[[], Iterable[Any]],
    num_batches: int,
    *,
    seed: int | None = 0,
    devices: Sequence[int] = (),
) -> list[Any]:
    """The first ``num_batches`` batches of a loader built for the purpose, read once.

    The loader is built and read inside :func:`preserved_rng` (``seed``), so building it
    (a sampler drawing its seed from numpy) and reading it (augmentations, the ``DataLoader``'s
    base seed) changes no global generator, and the batches are the same in every run with the
    same ``seed``. The loader and its iterator are dropped afterwards (its worker processes, if
    any, end).

    Args:
        make_loader (callable): ``() -> iterable of batches``; a loader of its own, never the
            one training reads (reading that one would change the training data).
        num_batches (int): how many batches (>= 1).
        seed (int, optional): the seed while building and reading; None: the generators as
            they are.
        devices (Sequence[int]): CUDA devices whose generators to preserve as well.

    Returns:
        list: the batches, as the loader yields them.

    Raises:
        ValueError: ``num_batches`` < 1, or the loader ends before ``num_batches`` batches.

    Example:
        >>> first_batches(lambda: iter([[1, 2], [3, 4], [5, 6]]), 2)
        [[1, 2], [3, 4]]
    """
    if isinstance(num_batches, bool) or not isinstance(num_batches, int) or num_batches < 1:
        raise ValueError(f"num_batches={num_batches!r} is invalid; allowed: an int >= 1")
    with preserved_rng(seed, devices):
        loader = make_loader()
        iterator = iter(loader)
        batches = list(itertools.islice(iterator, num_batches))
        del iterator, loader
    if len(batches) < num_batches:
        raise ValueError(
            f"the loader gave {len(batches)} batches, fewer than num_batches={num_batches}; "
            "allowed: at most as many batches as the training set has"
        )
    return batches


def _ranks() -> int:
    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size()
    return 1


def _check_loss(loss: Any) -> None:
    if isinstance(loss, torch.Tensor) and loss.numel() == 1 and loss.requires_grad:
        return
    what = type(loss).__name__
    if isinstance(loss, torch.Tensor):
        what += f" of shape {tuple(loss.shape)}" + ("" if loss.requires_grad else " without grad")
    raise ValueError(
        f"full_gradient_norm: loss_fn must return a scalar tensor with a gradient; got {what}"
    )


def full_gradient_norm(
    model: nn.Module,
    batches: Sequence[Any],
    loss_fn: LossFn,
    *,
    seed: int | None = 0,
    all_reduce: bool | None = None,
) -> float:
    """``||(1/B) sum_b grad_w L_b(w)||_2`` over ``batches``, leaving training untouched.

    See the module docstring for what "untouched" covers (``.grad``, optimizer, buffers,
    training mode, random generators). The model is put in training mode for the evaluation.
    Parameters without a gradient from a batch (unused) count as zero for that batch.

    Args:
        model (nn.Module): the model (unwrap a DDP model first, :func:`unwrap_model`: the
            evaluation must not take part in DDP's gradient synchronization).
        batches (Sequence): the fixed subset, ``B >= 1`` batches.
        loss_fn (callable): ``loss_fn(model, batch) -> scalar tensor``, the training loss.
        seed (int, optional): the random generators' seed during the evaluation (ROI sampling,
            dropout); None: the training's generators as they are (restored afterwards anyway).
        all_reduce (bool, optional): average ``g`` over the ranks of the default process group
            (every rank must call this with its own batches); default: when
            ``torch.distributed`` is initialized with more than one rank.

    Returns:
        float: the norm (same on every rank when averaged over the ranks).

    Raises:
        ValueError: no batches, no trainable parameters, or a loss that is not a scalar tensor
            with a gradient.

    Example:
        >>> net = torch.nn.Linear(2, 1, bias=False)
        >>> _ = net.weight.data.copy_(torch.tensor([[1.0, 2.0]]))
        >>> batches = [torch.tensor([[1.0, 0.0]]), torch.tensor([[0.0, 1.0]])]
        >>> # L_b = (w . x_b)^2: gradients 2 w.x_b x_b = [2, 0] and [0, 4]; mean [1, 2]
        >>> round(full_gradient_norm(net, batches, lambda m, x: m(x).pow(2).sum()), 6)
        2.236068
    """
    batches = list(batches)
    if not batches:
        raise ValueError("full_gradient_norm needs at least one batch; got none")
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("full_gradient_norm: the model has no parameter with requires_grad")
    buffers = [(b, b.detach().clone()) for b in model.buffers()]
    was_training = model.training
    sums: list[torch.Tensor | None] = [None] * len(params)
    try:
        model.train()
        with preserved_rng(seed, model_devices(model)), torch.enable_grad():
            for batch in batches:
                loss = loss_fn(model, copy.deepcopy(batch))
                _check_loss(loss)
                grads = torch.autograd.grad(loss.reshape(()), params, allow_unused=True)
                for i, grad in enumerate(grads):
                    if grad is None:
                        continue
                    sums[i] = grad.detach() if sums[i] is None else sums[i] + grad
    finally:
        with torch.no_grad():
            for buffer, saved in buffers:
                buffer.copy_(saved)
        model.train(was_training)
    mean = [
        (s / len(batches)) if s is not None else torch.zeros_like(p) for s, p in zip(sums, params)
    ]
    ranks = _ranks()
    if (all_reduce is None or all_reduce) and ranks > 1:
        flat = torch.cat([g.reshape(-1) for g in mean])
        dist.all_reduce(flat)
        mean = [flat / ranks]
    squares = [torch.linalg.vector_norm(g, dtype=torch.float64) ** 2 for g in mean]
    return float(torch.stack(squares).sum().sqrt())
