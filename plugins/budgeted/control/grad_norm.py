"""The full-gradient norm over a fixed subset of training batches (the paper's Figure 3), in
plain PyTorch: :func:`full_gradient_norm`, and :class:`GradNormProbe`, the diagnostic every
framework's ``FullGradNormHook`` is (its period, its subset drawn once, its bookkeeping and lines).

    ||g||_2,   g = (1/B) sum_b grad_w L_b(w)

over every parameter with ``requires_grad``, ``g`` averaged over the ranks where there are
several. Training is left as it would have been without it (docs/detectron2.md, "Budgeted-
convergence diagnostics"): ``torch.autograd.grad`` (no ``.grad``, no optimizer touched),
training mode with every buffer copied back in place, the random generators saved, seeded and
restored, each batch deep-copied. A model's plain attributes are not restored.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import random
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from ..errors import BudgetConfigError

__all__ = [
    "GradNormProbe", "check_count", "first_batches", "full_gradient_norm", "model_devices",
    "preserved_rng", "unwrap_model",
]  # fmt: skip

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
    """Run a block without changing any global random number generator: python's ``random``,
    numpy's, torch's CPU one and the CUDA ones of ``devices`` are saved, seeded with ``seed`` (None:
    left as they are) and restored on exit, also after an exception.

    Example:
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
    """The first ``num_batches`` batches of ``make_loader()`` (a loader of its own, never the one
    training reads), built and read inside :func:`preserved_rng` (``seed``, ``devices``): the same
    batches in every run, no global generator changed.

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
    """``||(1/B) sum_b grad_w L_b(w)||_2`` over ``batches``, leaving training untouched (module
    docstring); ``loss_fn(model, batch)`` is the training loss, ``seed`` the generators' seed inside
    (None: as they are), ``all_reduce`` averages over the ranks (default: when more than one). Pass
    the module inside DDP (:func:`unwrap_model`). An unused parameter counts as zero.

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


def check_count(owner: str, key: str, value: Any, low: int) -> None:
    """Refuse ``value`` unless it is an int (not a bool) >= ``low``, in one line naming ``owner``
    and ``key``.

    Raises:
        BudgetConfigError: ``<owner>: <key>=<value> is invalid; allowed: an int >= <low>``.

    Example:
        >>> try:
        ...     check_count("FullGradNormHook", "seed", -1, 0)
        ... except BudgetConfigError as err:
        ...     print(err)
        FullGradNormHook: seed=-1 is invalid; allowed: an int >= 0
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise BudgetConfigError(f"{owner}: {key}={value!r} is invalid; allowed: an int >= {low}")


class GradNormProbe:
    """The full-gradient norm every ``period`` iterations and after the last (:meth:`due`), over
    a subset of ``num_batches`` training batches drawn once (:meth:`draw`), with its bookkeeping:
    ``evaluations`` (norms computed) and ``seconds`` (their time, in all). A framework's hook is
    this probe plus its framework's loss, loader and place to write the value.

    Args:
        period: iterations between two norms (an int >= 1).
        num_batches: batches in the subset (an int >= 1).
        seed: the random generators' seed while the subset is drawn and the norm computed (None:
            as they are).
        name: the value's name in the lines (and where the hook writes it).
        owner: who speaks in the lines and refusals (``FullGradNormHook``).
        period_key: what a refusal calls ``period`` (MMEngine's hook: ``interval``).

    Raises:
        BudgetConfigError: ``period`` or ``num_batches`` not an int >= 1 (:func:`check_count`).

    Example:
        >>> probe = GradNormProbe(period=2, num_batches=1)
        >>> [done for done in range(1, 6) if probe.due(done, last=5)]
        [2, 4, 5]
        >>> net = torch.nn.Linear(2, 1, bias=False)
        >>> _ = net.weight.data.copy_(torch.tensor([[3.0, 4.0]]))
        >>> probe.draw(lambda: iter([torch.tensor([[1.0, 0.0]]), torch.tensor([[0.0, 1.0]])]), net)
        >>> value, seconds = probe.measure(net, lambda m, x: m(x).sum())  # gradient [1, 0]
        >>> value, probe.evaluations
        (1.0, 1)
        >>> probe.line(value, 0.25, done=2)
        'GradNormProbe: full_grad_norm=1 after iteration 2 (1 batches, 0.25 s)'
        >>> probe.finish().split(",")[0], probe.batches
        ('GradNormProbe: 1 evaluations of 1 batches', None)
    """

    MEASURED = (
        "{owner}: {name}={value:.6g} after iteration {done} ({batches} batches, {seconds:.2f} s)"
    )
    """The line after a norm (:meth:`line`); Detectron2's hook words it its own way."""

    def __init__(
        self,
        period: int,
        num_batches: int = 2,
        *,
        seed: int | None = 0,
        name: str = "full_grad_norm",
        owner: str = "GradNormProbe",
        period_key: str = "period",
    ) -> None:
        check_count(owner, period_key, period, 1)
        check_count(owner, "num_batches", num_batches, 1)
        self.period = period
        self.num_batches = num_batches
        self.seed = seed
        self.name = name
        self.owner = owner
        self.batches: list[Any] | None = None
        self.evaluations = 0
        self.seconds = 0.0

    def draw(self, make_loader: Callable[[], Iterable[Any]], model: nn.Module) -> None:
        """Draw the subset: the first ``num_batches`` batches of ``make_loader()`` (a loader of its
        own, never the training one; :func:`first_batches`, on the devices of ``model``)."""
        devices = model_devices(unwrap_model(model))
        self.batches = first_batches(make_loader, self.num_batches, seed=self.seed, devices=devices)

    def due(self, done: int, last: int) -> bool:
        """Whether a norm is due after ``done`` iterations of ``last``: every ``period``, and
        after the last."""
        return done % self.period == 0 or done == last

    def measure(self, model: nn.Module, loss_fn: LossFn) -> tuple[float, float]:
        """The norm at the current weights of ``model`` (wrapped or not) and the seconds it
        took, counted in ``evaluations`` and ``seconds``.

        Raises:
            RuntimeError: no subset drawn yet.
        """
        if self.batches is None:
            raise RuntimeError(f"{self.owner}: before_train has not drawn the subset yet")
        start = time.perf_counter()
        value = full_gradient_norm(unwrap_model(model), self.batches, loss_fn, seed=self.seed)
        seconds = time.perf_counter() - start
        self.evaluations += 1
        self.seconds += seconds
        return value, seconds

    def line(self, value: float, seconds: float, done: int) -> str:
        """The log line of a norm ``value`` that took ``seconds`` after ``done`` iterations
        (:data:`MEASURED`)."""
        facts = dict(owner=self.owner, name=self.name, batches=len(self.batches or ()))
        return self.MEASURED.format(value=value, seconds=seconds, done=done, **facts)

    def finish(self) -> str | None:
        """The summary line after training (None when no norm was computed); the subset is let
        go."""
        self.batches = None
        if not self.evaluations:
            return None
        each = self.seconds / self.evaluations
        return (
            f"{self.owner}: {self.evaluations} evaluations of {self.num_batches} batches, "
            f"{each:.2f} s each on average"
        )
