"""``FullGradNormHook``: the budgeted-convergence diagnostics (the paper's Figure 3), registered in
MMEngine's ``HOOKS``: every ``interval`` iterations, the full-gradient norm over a fixed subset of
training batches, logged as ``full_grad_norm`` beside ``lr`` in ``vis_data/scalars.json``.

    full_grad_norm = ||(1/B) sum_b grad_w L_b(w)||_2

over the ``B = num_batches`` first batches of a second dataloader seeded with ``seed`` (the same
subset in every run; averaged over ranks), ``L_b`` the training loss, ``w`` the weights after the
iteration (:class:`budgeted.control.grad_norm.GradNormProbe`). Training continues exactly as
without the hook (buffers, ``.grad`` and random generators restored). In a config::

    custom_imports = dict(imports=["budgeted.mmengine"], allow_failed_imports=False)
    custom_hooks = [dict(type="FullGradNormHook", interval=100, num_batches=2)]
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import torch
from mmengine.hooks import Hook, IterTimerHook, LoggerHook
from mmengine.registry import HOOKS

from ..control.grad_norm import GradNormProbe, check_count
from .schedulers import BudgetConfigError

__all__ = ["SCALAR_NAME", "FullGradNormHook", "mmengine_loss"]

SCALAR_NAME = "full_grad_norm"
"""The key of the value in scalars.json (``train/full_grad_norm`` in the message hub)."""

LOGGED_NAMES = (
    "lr", "base_lr", "momentum", "loss", "grad_norm", "time", "data_time", "memory", "eta",
    "iter", "epoch", "step",
)  # fmt: skip
"""Keys MMEngine's own hooks log in a training row: a ``name`` among them would overwrite them."""


def mmengine_loss(model: torch.nn.Module, data: Any) -> torch.Tensor:
    """The training loss of one batch, as ``BaseModel.train_step`` forms it (without AMP):
    ``parse_losses(model(**data_preprocessor(data, True), mode="loss"))[0]``.

    Example:
        >>> from mmengine.model import BaseModel
        >>> class Net(BaseModel):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.w = torch.nn.Parameter(torch.tensor(2.0))
        ...     def forward(self, x, mode="tensor"):
        ...         return {"loss_a": self.w * x.sum(), "acc": x.mean()}
        >>> float(mmengine_loss(Net(), {"x": torch.ones(3)}))  # losses only: 2 * 3
        6.0
    """
    data = model.data_preprocessor(data, True)
    losses = model(**data, mode="loss") if isinstance(data, dict) else model(*data, mode="loss")
    loss, _ = model.parse_losses(losses)
    return loss


@HOOKS.register_module()
class FullGradNormHook(Hook, GradNormProbe):
    """Every ``interval`` iterations (and after the last), ``full_grad_norm`` over a fixed
    subset of ``num_batches`` training batches (see the module).

    Attributes:
        evaluations (int): norms computed so far.
        seconds (float): the time they took, in all.

    In a config: ``custom_hooks = [dict(type="FullGradNormHook", interval=100)]``.

    Example:
        >>> FullGradNormHook(interval=100).num_batches
        2
        >>> try:
        ...     FullGradNormHook(interval=0)
        ... except BudgetConfigError as err:
        ...     print(err)
        FullGradNormHook: interval=0 is invalid; allowed: an int >= 1
    """

    priority = "NORMAL"  # before the LoggerHook (BELOW_NORMAL) of the same iteration

    def __init__(
        self,
        interval: int,
        num_batches: int = 2,
        seed: int = 0,
        dataloader: Mapping[str, Any] | None = None,
        name: str = SCALAR_NAME,
    ) -> None:
        GradNormProbe.__init__(
            self, interval, num_batches, seed=seed, name=name, owner="FullGradNormHook",
            period_key="interval",
        )  # fmt: skip
        check_count(self.owner, "seed", seed, 0)
        if dataloader is not None and not isinstance(dataloader, Mapping):
            raise BudgetConfigError(
                f"FullGradNormHook: dataloader={type(dataloader).__name__} is invalid; allowed: "
                "a dataloader config (dict), from which a loader of its own is built"
            )
        if not (isinstance(name, str) and name.isidentifier()) or name in LOGGED_NAMES:
            raise BudgetConfigError(
                f"FullGradNormHook: name={name!r} is invalid; allowed: an identifier that "
                f"MMEngine does not log itself (not {', '.join(LOGGED_NAMES)}), e.g. "
                f"{SCALAR_NAME!r}"
            )
        self.dataloader = dataloader
        self.key = f"train/{name}"
        self._logger_hook: LoggerHook | None = None
        self._timer: IterTimerHook | None = None

    @property
    def interval(self) -> int:
        """The probe's ``period``, in MMEngine's word."""
        return self.period

    # --- the subset -------------------------------------------------------------------------

    def _loader_cfg(self, runner: Any) -> dict[str, Any]:
        cfg = self.dataloader if self.dataloader is not None else runner.cfg.get("train_dataloader")
        if not isinstance(cfg, Mapping):
            raise BudgetConfigError(
                f"FullGradNormHook: train_dataloader is a {type(cfg).__name__}, not a config; "
                "allowed: a dict config (pass dataloader=dict(...) to the hook): a built loader "
                "would be the training one"
            )
        cfg = copy.deepcopy(dict(cfg))
        cfg["num_workers"] = 0
        cfg["persistent_workers"] = False
        cfg.pop("prefetch_factor", None)
        return cfg

    def before_train(self, runner: Any) -> None:
        cfg = self._loader_cfg(runner)
        self.draw(lambda: runner.build_dataloader(cfg, seed=self.seed), runner.model)
        self._logger_hook = next((h for h in runner.hooks if isinstance(h, LoggerHook)), None)
        # the IterTimerHook that times an iteration before this hook runs (its after_train_iter
        # comes first): the evaluation is then moved out of the next iteration's data_time
        hooks = list(runner.hooks)
        timers = [h for h in hooks[: hooks.index(self)] if isinstance(h, IterTimerHook)]
        self._timer = timers[0] if len(timers) == 1 else None

    # --- every iteration --------------------------------------------------------------------

    def before_train_iter(self, runner: Any, batch_idx: int, data_batch: Any = None) -> None:
        # an earlier value must not reappear beside a later iteration's lr
        runner.message_hub.log_scalars.pop(self.key, None)

    def after_train_iter(
        self, runner: Any, batch_idx: int, data_batch: Any = None, outputs: Any = None
    ) -> None:
        done = runner.iter + 1  # iterations trained (runner.iter counts up after the hooks)
        if not self.due(done, runner.max_iters):
            return
        value = self.evaluate(runner)
        runner.message_hub.update_scalar(self.key, value)
        if not self._logger_writes(runner, batch_idx):
            hook = self._logger_hook
            runner.visualizer.add_scalars(
                {self.name: value},
                step=done,
                file_path=hook.json_log_path if hook is not None else None,
            )

    def _logger_writes(self, runner: Any, batch_idx: int) -> bool:
        """Whether the LoggerHook writes a training row at this iteration (its own test, as
        ``LoggerHook.after_train_iter`` of MMEngine 0.10 makes it)."""
        hook = self._logger_hook
        if hook is None:
            return False
        if hook.every_n_inner_iters(batch_idx, hook.interval):
            return True
        return hook.end_of_epoch(runner.train_dataloader, batch_idx) and (
            not hook.ignore_last or len(runner.train_dataloader) <= hook.interval
        )

    def evaluate(self, runner: Any) -> float:
        """The norm at the current weights (also logged, with its cost)."""
        value, seconds = self.measure(runner.model, mmengine_loss)
        if self._timer is not None and isinstance(getattr(self._timer, "t", None), float):
            self._timer.t += seconds
        runner.logger.info(self.line(value, seconds, runner.iter + 1))
        return value

    def after_train(self, runner: Any) -> None:
        summary = self.finish()
        if summary:
            runner.logger.info(summary)
