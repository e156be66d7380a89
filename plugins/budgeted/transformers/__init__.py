"""Budget-aware LR schedules in the Hugging Face ``Trainer`` (transformers >= 5):

::

    from budgeted.transformers import BudgetCallback, BudgetTrainer

    args = TrainingArguments("out", max_steps=20000, save_steps=1000)
    trainer = BudgetTrainer(model=model, args=args, train_dataset=train,
                            callbacks=[BudgetCallback("cosine", warmup_iters=500)])
    trainer.train()  # resume_from_checkpoint=True refuses another budget in one line

:class:`BudgetCallback` holds the budget (steps, a fraction of a full schedule, or ``time=``),
the time budget's clock, preemption (SIGTERM / SIGUSR1: checkpoint, exit 75) and the budget's
stop; :class:`BudgetTrainerMixin` builds its scheduler in ``create_scheduler`` and stops a
non-finite loss in one line. See docs/transformers.md.
"""

from __future__ import annotations

from .._require import require

require("budgeted.transformers", "transformers")

from .callback import LOGGER, BudgetCallback, BudgetTrainer, BudgetTrainerMixin  # noqa: E402

__all__ = ["LOGGER", "BudgetCallback", "BudgetTrainer", "BudgetTrainerMixin"]
