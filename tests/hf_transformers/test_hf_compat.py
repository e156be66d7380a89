"""The transformers internals of ``budgeted/transformers/compat.py`` (4.51.3, the pinned one, and
5.25.0): each still means what the adapter takes it to mean, in the installed transformers."""

from __future__ import annotations

import pytest
import transformers
from hf_testutils import digits, trainer_of
from transformers import DefaultFlowCallback, Trainer

from budgeted.transformers import BudgetCallback, compat

pytestmark = pytest.mark.integration


def test_the_internals_the_adapter_uses(tmp_path):
    assert transformers.__version__ in compat.TESTED_VERSIONS
    callback = BudgetCallback(warmup_iters=0)
    trainer = trainer_of(tmp_path, digits(), [callback], max_steps=3, save_strategy="steps",
                         save_steps=3)  # fmt: skip
    found = compat.callbacks_of(trainer)
    assert isinstance(found[0], DefaultFlowCallback) and found[-1] is callback
    plain = trainer_of(tmp_path / "plain", digits(), [], cls=Trainer, max_steps=3)
    plain.create_optimizer_and_scheduler(3)
    assert plain._created_lr_scheduler is True  # what mark_scheduler_created sets
    trainer.train()
    assert trainer._created_lr_scheduler is True
    assert (tmp_path / "checkpoint-3" / "scheduler.pt").is_file()
    assert compat.checkpoint_folder(str(tmp_path), 3) == str(tmp_path / "checkpoint-3")
    trainer.train()  # a second call builds the budget's scheduler anew, over its own steps
    assert trainer.lr_scheduler is callback.lr_scheduler and trainer.state.global_step == 3
