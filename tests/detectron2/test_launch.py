"""budgeted.detectron2.launch: 2 CPU processes (gloo) train in step, with the same LR."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from d2_testutils import TINY, TOY_CONFIG, logged_lrs
from detectron2.engine import HookBase
from detectron2.utils import comm

from budgeted.detectron2 import BudgetTrainer, launch, load_config, register_toy_coco
from budgeted.schedules import BudgetSchedule

# 12 iterations at 1 worker (0.03 x 400), warmup 3; REFERENCE_WORLD_SIZE 1 makes 2 workers
# train 6 iterations of batch 4 at twice the LR, with a warmup of round(3 / 2) = 2
OPTS = [*TINY, "SOLVER.BUDGET.FRACTION", "0.03", "SOLVER.REFERENCE_WORLD_SIZE", "1",
        "DATASETS.TEST", "()"]  # fmt: skip


class RecordLR(HookBase):
    """The LR each iteration trains at, on this rank (read before the step)."""

    def __init__(self) -> None:
        self.lrs: list[float] = []

    def before_step(self) -> None:
        self.lrs.append(self.trainer._trainer.optimizer.param_groups[0]["lr"])


def train_and_record(out: str) -> None:
    """One worker: train the toy budget, write this rank's LRs to ``out``."""
    register_toy_coco()  # a spawned process: importing budgeted.detectron2 registers no dataset
    cfg = load_config(TOY_CONFIG, [*OPTS, "OUTPUT_DIR", out])
    trainer = BudgetTrainer(cfg)
    record = RecordLR()
    trainer.register_hooks([record])
    trainer.resume_or_load(resume=False)
    trainer.train()
    info = {"world": comm.get_world_size(), "max_iter": trainer.max_iter, "lrs": record.lrs,
            "base_lr": trainer.cfg.SOLVER.BASE_LR,
            "warmup": trainer.cfg.SOLVER.WARMUP_ITERS}  # fmt: skip
    Path(out, f"lrs_rank{comm.get_rank()}.json").write_text(json.dumps(info))


@pytest.mark.e2e
def test_two_cpu_processes_see_the_same_lr_at_every_iteration(toy_root, tmp_path: Path) -> None:
    launch(train_and_record, 2, dist_url="auto", args=(str(tmp_path),))
    ranks = [json.loads((tmp_path / f"lrs_rank{r}.json").read_text()) for r in (0, 1)]
    assert ranks[0] == ranks[1]
    info = ranks[0]
    assert (info["world"], info["max_iter"], info["warmup"]) == (2, 6, 2)
    base_lr = 2 * load_config(TOY_CONFIG, OPTS).SOLVER.BASE_LR  # scaled like the batch
    assert info["base_lr"] == pytest.approx(base_lr)
    core = BudgetSchedule("linear", 6, 2, 0.001)
    assert info["lrs"] == pytest.approx([base_lr * core(t) for t in range(6)], rel=1e-9)
    logged = logged_lrs(tmp_path)  # rank 0's metrics.json
    assert [logged[t] for t in range(6)] == pytest.approx(info["lrs"], rel=1e-12)


@pytest.mark.unit
def test_launch_refuses_zero_processes() -> None:
    with pytest.raises(ValueError, match="--num-gpus=0"):
        launch(print, 0)
