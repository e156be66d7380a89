"""PyTorch Lightning integration (written for Lightning 2.6): :class:`BudgetCallback` installs a
registered budget schedule as the LR schedule of a LightningModule's optimizers, over the
trainer's budget (``max_steps``, ``max_epochs`` x optimizer steps per epoch, a fraction of a
stated full schedule, or ``max_time``/``time=`` seconds of training), with the resume check,
preemption (SIGTERM / SIGUSR1 -> checkpoint -> exit 75) and divergence (exit 3).

::

    from budgeted.lightning import BudgetCallback
    trainer = lightning.Trainer(max_steps=2000, callbacks=[BudgetCallback("cosine")])

In a LightningCLI yaml: ``trainer.callbacks: [{class_path: budgeted.lightning.BudgetCallback,
init_args: {schedule: cosine, warmup_iters: 100}}]`` (docs/lightning.md).
"""

from __future__ import annotations

from .._require import require

require("budgeted.lightning", "lightning")

from ..errors import BudgetConfigError, BudgetMismatchError, BudgetReplanError  # noqa: E402
from ..safety.preemption import Preempted  # noqa: E402
from .callback import BudgetCallback, Diverged  # noqa: E402

__all__ = [
    "BudgetCallback", "BudgetConfigError", "BudgetMismatchError", "BudgetReplanError",
    "Diverged", "Preempted",
]  # fmt: skip
