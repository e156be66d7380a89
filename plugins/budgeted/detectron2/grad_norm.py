"""``FullGradNormHook``: the budgeted-convergence diagnostic (the paper's Figure 3) for
Detectron2: every ``period`` iterations, the full-gradient norm over a fixed subset of training
batches, logged as ``full_grad_norm`` beside ``lr`` in metrics.json (and TensorBoard):

    full_grad_norm = ||(1/B) sum_b grad_w L_b(w)||_2

over the ``B = SOLVER.BUDGET.GRAD_NORM_BATCHES`` first batches of a second, seeded train loader
(the same in every run), ``L_b`` the training loss, ``w`` the weights after the iteration
(:class:`budgeted.control.grad_norm.GradNormProbe`); training continues bit for bit as without
the hook. In your own ``DefaultTrainer`` subclass::

    def build_hooks(self):
        ret = super().build_hooks()
        ret.insert(len(ret) - 1, FullGradNormHook(period=100, num_batches=2))  # before the writer
        return ret
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import torch
from detectron2.config import CfgNode
from detectron2.engine import HookBase, hooks
from detectron2.utils.events import EventStorage

from ..control.grad_norm import GradNormProbe
from .compat import trainer_hooks, writer_period
from .config import KEYS, check_grad_norm_config
from .solver import BudgetConfigError

__all__ = ["SCALAR_NAME", "FullGradNormHook", "detectron2_loss", "grad_norm_hook_from_cfg"]

SCALAR_NAME = "full_grad_norm"
"""The key of the value in metrics.json."""

SUBSET_SEED = 0
"""The seed of the random generators while the subset is drawn and the norm computed."""

logger = logging.getLogger("detectron2.budgeted")  # into log.txt, with Detectron2's own lines


def detectron2_loss(model: torch.nn.Module, batch: list[dict[str, Any]]) -> torch.Tensor:
    """The training loss of one batch, as ``SimpleTrainer.run_step`` forms it: the model's
    output if it is a tensor, else the sum of its loss dict.

    Example:
        >>> model = lambda batch: {"a": torch.tensor(1.0), "b": torch.tensor(2.0)}
        >>> float(detectron2_loss(model, []))
        3.0
    """
    out = model(batch)
    if isinstance(out, torch.Tensor):
        return out
    return sum(out.values())


class FullGradNormHook(HookBase, GradNormProbe):
    """Every ``period`` iterations (and after the last), ``full_grad_norm`` over a fixed subset
    of ``num_batches`` training batches, put in the trainer's event storage (see the module);
    ``evaluations`` and ``seconds`` count them and their time.

    Example:
        >>> FullGradNormHook(period=20).num_batches
        2
        >>> try:
        ...     FullGradNormHook(period=0)
        ... except BudgetConfigError as err:
        ...     print(err)
        FullGradNormHook: period=0 is invalid; allowed: an int >= 1
    """

    MEASURED = "{name}: {value:.6g} after iteration {done} ({batches} batches, {seconds:.2f} s)"

    def __init__(
        self,
        period: int,
        num_batches: int = 2,
        *,
        data_loader: Iterable[Any] | None = None,
        seed: int = SUBSET_SEED,
        name: str = SCALAR_NAME,
    ) -> None:
        GradNormProbe.__init__(
            self, period, num_batches, seed=seed, name=name, owner="FullGradNormHook"
        )
        self.data_loader = data_loader

    def _make_loader(self) -> Iterable[Any]:
        if self.data_loader is not None:
            return self.data_loader
        cfg = getattr(self.trainer, "cfg", None)
        build = getattr(self.trainer, "build_train_loader", None)
        if not isinstance(cfg, CfgNode) or build is None:
            raise BudgetConfigError(
                "FullGradNormHook: the trainer has no cfg and build_train_loader (a "
                "DefaultTrainer's); allowed: pass data_loader= (a loader of its own, not the "
                "training one)"
            )
        cfg = cfg.clone()
        cfg.defrost()
        cfg.DATALOADER.NUM_WORKERS = 0  # as DefaultTrainer builds PreciseBN's loader
        return build(cfg)

    def before_train(self) -> None:
        self.draw(self._make_loader, self.trainer.model)
        self._warn_about_writers()

    def _warn_about_writers(self) -> None:
        registered = list(trainer_hooks(self.trainer))
        mine = next((i for i, h in enumerate(registered) if h is self), len(registered))
        for i, hook in enumerate(registered):
            if not isinstance(hook, hooks.PeriodicWriter):
                continue
            if i < mine:
                logger.warning(
                    "FullGradNormHook is registered after a PeriodicWriter: a value computed at "
                    "an iteration the writer has just written is never written; register it "
                    "before the writers"
                )
            period = writer_period(hook)
            if self.period < period:
                logger.warning(
                    "FullGradNormHook: period %d < the writers' period %d: metrics.json keeps "
                    "only the latest %s of each write (use a multiple of the writers' period)",
                    self.period,
                    period,
                    self.name,
                )

    def after_step(self) -> None:
        if self.due(self.trainer.iter + 1, self.trainer.max_iter):
            self.trainer.storage.put_scalar(self.name, self.evaluate(), smoothing_hint=False)

    def evaluate(self) -> float:
        """The norm at the current weights (also logged, with its cost)."""
        with EventStorage(self.trainer.iter):  # the model's own put_scalar calls land here
            value, seconds = self.measure(self.trainer.model, detectron2_loss)
        logger.info(self.line(value, seconds, self.trainer.iter + 1))
        return value

    def after_train(self) -> None:
        summary = self.finish()
        if summary:
            logger.info(summary)


def grad_norm_hook_from_cfg(cfg: CfgNode) -> FullGradNormHook | None:
    """The hook ``SOLVER.BUDGET.GRAD_NORM_PERIOD`` / ``GRAD_NORM_BATCHES`` ask for; None when
    the period is 0 (a bad key: one-line :class:`BudgetConfigError`).

    Example:
        >>> from budgeted.detectron2 import add_budget_config
        >>> from detectron2.config import get_cfg
        >>> cfg = add_budget_config(get_cfg())
        >>> grad_norm_hook_from_cfg(cfg) is None
        True
        >>> cfg.SOLVER.BUDGET.GRAD_NORM_PERIOD = 20
        >>> grad_norm_hook_from_cfg(cfg).period
        20
    """
    try:
        check_grad_norm_config(cfg)
    except ValueError as err:
        raise BudgetConfigError(str(err)) from None
    budget = cfg.SOLVER.get("BUDGET") or {}
    period = budget.get("GRAD_NORM_PERIOD", KEYS["GRAD_NORM_PERIOD"])
    if not period:
        return None
    return FullGradNormHook(period, budget.get("GRAD_NORM_BATCHES", KEYS["GRAD_NORM_BATCHES"]))
