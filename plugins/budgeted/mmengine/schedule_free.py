"""Schedule-free training in MMEngine (Defazio et al., "The Road Less Scheduled", NeurIPS 2024):
``SGDScheduleFree`` and ``AdamWScheduleFree`` of the ``schedulefree`` package registered in
MMEngine's ``OPTIMIZERS``, and :class:`ScheduleFreeHook`, which keeps their two modes right.

A schedule-free optimizer keeps two points: it trains at ``y`` and evaluates at ``x``, the
average of the SGD iterates ``z``: ``y = (1 - beta) z + beta x``, with ``beta`` the momentum
(``betas[0]`` for AdamW). ``optimizer.eval()`` moves the weights from ``y`` to ``x`` and
``optimizer.train()`` back. In a config::

    custom_imports = dict(imports=["budgeted.mmengine"], allow_failed_imports=False)
    optim_wrapper = dict(optimizer=dict(type="SGDScheduleFree", lr=0.1, momentum=0.9,
                                        warmup_steps=0))
    param_scheduler = []  # no LR schedule: the optimizer is the schedule
    custom_hooks = [dict(type="ScheduleFreeHook", bn_batches=50)]

Without the package installed the two names are registered all the same, and building one is
one line naming ``pip install budgeted-training[schedulefree]``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import torch
from mmengine.hooks import Hook
from mmengine.model import is_model_wrapper
from mmengine.optim import OptimWrapper, OptimWrapperDict
from mmengine.registry import HOOKS, OPTIMIZERS
from mmengine.runner.checkpoint import weights_to_cpu
from mmengine.utils import apply_to

from ..control.grad_norm import preserved_rng
from ..optimizers import SCHEDULE_FREE
from ..torch_optimizers import recalibrate_bn

__all__ = [
    "MISSING_SCHEDULEFREE", "SCHEDULE_FREE_TYPES", "ScheduleFreeHook",
    "check_schedulefree_installed", "schedule_free_optimizers", "schedulefree_available"
]  # fmt: skip

SCHEDULE_FREE_TYPES: tuple[str, ...] = tuple(spec.type for spec in SCHEDULE_FREE.values())
"""The MMEngine ``optimizer.type`` names registered here: SGDScheduleFree, AdamWScheduleFree."""

MISSING_SCHEDULEFREE = (
    "{name} needs the schedulefree package, which is not installed; allowed: pip install "
    "budgeted-training[schedulefree] (or pip install schedulefree==1.4.1)"
)
"""The one line of a config that names a schedule-free optimizer without the package."""


def schedulefree_available() -> bool:
    """Whether the ``schedulefree`` package imports."""
    try:
        import schedulefree  # noqa: F401
    except ImportError:
        return False
    return True


def check_schedulefree_installed(cfg: Mapping) -> None:
    """A config whose optimizer is a schedule-free one needs the package: one line if missing.

    Raises:
        ValueError: :data:`MISSING_SCHEDULEFREE`.

    Example:
        >>> check_schedulefree_installed(dict(optim_wrapper=dict(optimizer=dict(type="SGD"))))
    """
    optimizer = (cfg.get("optim_wrapper") or {}).get("optimizer") or {}
    kind = (
        str(optimizer.get("type", "")).rsplit(".", 1)[-1] if isinstance(optimizer, Mapping) else ""
    )
    if kind in SCHEDULE_FREE_TYPES and not schedulefree_available():
        raise ValueError(MISSING_SCHEDULEFREE.format(name=f"optim_wrapper.optimizer.type={kind}"))


def _missing(name: str) -> Any:
    def build(*args: Any, **kwargs: Any) -> Any:
        raise ImportError(MISSING_SCHEDULEFREE.format(name=name))

    build.__name__ = name
    return build


def _register() -> None:
    for spec in SCHEDULE_FREE.values():
        if OPTIMIZERS.get(spec.type) is not None:
            continue
        if schedulefree_available():
            import schedulefree

            OPTIMIZERS.register_module(module=getattr(schedulefree, spec.type))
        else:
            OPTIMIZERS.register_module(name=spec.type, module=_missing(spec.type))


_register()


def schedule_free_optimizers(runner: Any) -> list[torch.optim.Optimizer]:
    """The built optimizers of ``runner`` that have a schedule-free ``train()``/``eval()`` pair
    (none while the optimizer wrapper is still a config, as in a test-only run).

    Example:
        >>> from mmengine.optim import OptimWrapper
        >>> class Runner:
        ...     optim_wrapper = OptimWrapper(torch.optim.SGD([torch.zeros(1)], lr=0.1))
        >>> schedule_free_optimizers(Runner())
        []
    """
    wrapper = getattr(runner, "optim_wrapper", None)
    if isinstance(wrapper, OptimWrapperDict):
        wrappers = list(wrapper.optim_wrappers.values())
    else:
        wrappers = [wrapper] if isinstance(wrapper, OptimWrapper) else []
    found = []
    for item in wrappers:
        optimizer = item.optimizer
        groups = optimizer.param_groups
        if groups and "train_mode" in groups[0] and callable(getattr(optimizer, "eval", None)):
            found.append(optimizer)
    return found


def _in_train_mode(optimizers: list[torch.optim.Optimizer]) -> bool:
    return any(o.param_groups[0]["train_mode"] for o in optimizers)


def _set_mode(optimizers: list[torch.optim.Optimizer], train: bool) -> None:
    for optimizer in optimizers:
        optimizer.train() if train else optimizer.eval()


def _endless(loader: torch.utils.data.DataLoader) -> Iterator[Any]:
    """The batches of ``loader`` again and again (none if it has none)."""
    while True:
        empty = True
        for batch in loader:
            empty = False
            yield batch
        if empty:
            return


def _bare(runner: Any) -> torch.nn.Module:
    return runner.model.module if is_model_wrapper(runner.model) else runner.model


def _copy(state: dict) -> dict[str, torch.Tensor]:
    return {key: value.detach().clone() for key, value in state.items()}


Y_KEY = "schedule_free_y"
"""The checkpoint key of the training point ``y`` (the model's parameters, by name)."""


@HOOKS.register_module()
class ScheduleFreeHook(Hook):
    """The train/eval modes of a schedule-free optimizer (``schedulefree``'s README) in a runner.

    * before every training iteration: ``optimizer.train()`` (the weights at ``y``);
    * validation and test during training: ``optimizer.eval()`` (the weights at ``x``); with
      ``bn_batches = N > 0`` and a model with BatchNorm, its statistics are first recomputed at
      ``x`` as the README prescribes (``model.train()``; ``N`` training batches forward under
      ``torch.no_grad()``; ``model.eval()``), from their reset, as an exact average, over the
      hook's own seeded draw of the training set (the run's random state restored after); then
      the model's parameters and buffers are put back exactly as they were: a validation does
      not change the training run;
    * every checkpoint (``before_save_checkpoint``): the saved ``state_dict`` and optimizer state
      are those of ``optimizer.eval()`` (``x``, ``train_mode=False``), as the README asks, and
      ``checkpoint["schedule_free_y"]`` holds the training point ``y``; the live model is left
      exactly as it was (only rank 0 saves, so no rank may change). A resumed run loads ``x``
      and ``z``, and its first iteration trains from the saved ``y``: it is the uninterrupted
      run, weights and LRs, bit for bit. (A checkpoint without ``y`` resumes at
      ``optimizer.train()``'s ``y``, equal up to rounding.) Its BatchNorm statistics are those of
      training: evaluate it through a validation with this hook;
    * after training: ``optimizer.eval()`` (the model the run ends with is ``x``).

    The recalibration is no training iteration: it makes no optimizer step and does not count
    in an iteration budget; it is training compute, so a ``TimeBudgetTrainLoop``'s clock (paused
    for the validation itself) counts its seconds in the budget. Without BatchNorm, or with
    ``bn_batches=0``, it does nothing. Without a schedule-free optimizer the hook does nothing.

    Example:
        >>> ScheduleFreeHook(bn_batches=20).bn_batches
        20
        >>> ScheduleFreeHook(bn_batches=-1)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ValueError: ScheduleFreeHook: bn_batches=-1 is invalid; allowed: a whole number >= 0 ...
    """

    priority = "ABOVE_NORMAL"

    def __init__(self, bn_batches: int = 50) -> None:
        if isinstance(bn_batches, bool) or not isinstance(bn_batches, int) or bn_batches < 0:
            raise ValueError(
                f"ScheduleFreeHook: bn_batches={bn_batches!r} is invalid; allowed: a whole "
                "number >= 0 (0: no BatchNorm recalibration)"
            )
        self.bn_batches = bn_batches
        self._kept: dict[str, torch.Tensor] | None = None  # the model during an evaluation
        self._resumed_y: dict[str, torch.Tensor] | None = None
        self._clock: Any = None  # a time budget's training clock

    def before_train(self, runner: Any) -> None:
        self._clock = getattr(runner.train_loop, "clock", None)  # TimeBudgetTrainLoop's

    def before_train_iter(self, runner: Any, batch_idx: int, data_batch: Any = None) -> None:
        optimizers = schedule_free_optimizers(runner)
        _set_mode(optimizers, train=True)
        saved, self._resumed_y = self._resumed_y, None
        if saved is not None and any(o.state for o in optimizers):  # resumed: y as it was
            with torch.no_grad():
                for name, parameter in _bare(runner).named_parameters():
                    if name in saved:
                        parameter.copy_(saved[name])

    def after_train(self, runner: Any) -> None:
        _set_mode(schedule_free_optimizers(runner), train=False)

    def after_load_checkpoint(self, runner: Any, checkpoint: dict) -> None:
        saved = checkpoint.get(Y_KEY)
        self._resumed_y = dict(saved) if isinstance(saved, dict) else None

    def before_val(self, runner: Any) -> None:
        self._evaluate(runner, recalibrate=True)

    def after_val(self, runner: Any) -> None:
        self._back_to_training(runner)

    def before_test(self, runner: Any) -> None:
        self._evaluate(runner, recalibrate=False)

    def after_test(self, runner: Any) -> None:
        self._back_to_training(runner)

    def _evaluate(self, runner: Any, recalibrate: bool) -> None:
        optimizers = schedule_free_optimizers(runner)
        if not _in_train_mode(optimizers):
            _set_mode(optimizers, train=False)
            return
        self._kept = _copy(_bare(runner).state_dict())
        _set_mode(optimizers, train=False)
        if recalibrate and self.bn_batches:
            self._recalibrate(runner)

    def _back_to_training(self, runner: Any) -> None:
        kept, self._kept = self._kept, None
        if kept is None:
            return
        _set_mode(schedule_free_optimizers(runner), train=True)
        _bare(runner).load_state_dict(kept)  # y and the training statistics, exactly

    def before_save_checkpoint(self, runner: Any, checkpoint: dict) -> None:
        optimizers = schedule_free_optimizers(runner)
        if not _in_train_mode(optimizers):
            return  # already at x: what the runner collected is what is saved
        model = _bare(runner)
        y = _copy(dict(model.named_parameters()))
        _set_mode(optimizers, train=False)
        state = weights_to_cpu(model.state_dict())
        for key, value in state.items():  # x, apart from the live model (on CPU, the same)
            state[key] = value.clone()
        checkpoint["state_dict"] = state
        if "optimizer" in checkpoint:
            checkpoint["optimizer"] = apply_to(
                runner.optim_wrapper.state_dict(),
                lambda x: hasattr(x, "cpu"),
                lambda x: x.cpu(),  # z, which the modes leave as it is
            )
        checkpoint[Y_KEY] = {name: value.cpu() for name, value in y.items()}
        _set_mode(optimizers, train=True)
        with torch.no_grad():
            for name, parameter in model.named_parameters():
                parameter.copy_(y[name])  # exactly y again, as on the ranks that do not save

    def _recalibrate(self, runner: Any) -> None:
        """BatchNorm statistics at ``x``: the exact average over ``bn_batches`` training batches
        forward, no grad (:func:`budgeted.torch_optimizers.recalibrate_bn`), drawn from a
        generator seeded by the iteration, the training's random states left as they were."""
        loader = runner.train_dataloader
        devices = [torch.cuda.current_device()] if torch.cuda.is_available() else []
        with preserved_rng(devices=devices):  # training's data order and augmentations unchanged
            generator = torch.Generator().manual_seed(runner.iter)
            sampler = torch.utils.data.RandomSampler(loader.dataset, generator=generator)
            batches = torch.utils.data.DataLoader(
                loader.dataset,
                batch_size=loader.batch_size,
                sampler=sampler,
                collate_fn=loader.collate_fn,
                num_workers=0,
            )
            if self._clock is not None:
                self._clock.resume()  # training compute: spent from a time budget
            try:
                recalibrate_bn(_LossForward(_bare(runner)), _endless(batches), self.bn_batches)
            finally:
                if self._clock is not None:
                    self._clock.pause()


class _LossForward(torch.nn.Module):
    """An MMEngine model called as ``recalibrate_bn`` calls one: ``forward(batch)`` runs its data
    preprocessor (training) and its ``mode="loss"`` forward."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model
        self.training = model.training  # update_bn puts the mode it finds back

    def forward(self, batch: Any) -> Any:
        data = self.model.data_preprocessor(batch, True)
        return (
            self.model(**data, mode="loss")
            if isinstance(data, dict)
            else self.model(*data, mode="loss")
        )
