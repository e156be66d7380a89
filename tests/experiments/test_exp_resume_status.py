"""``budgeted-sweep --status`` checks a started cell's checkpoint through the one resume route
(issue 42, item 2): the checkpoint ``--resume`` loads, read by ``budgeted.runs.saved_budget``, its
iteration budget compared with the cell's by the core. A cell whose checkpoint holds another
budget is ``mismatch`` (resuming it is refused), one whose checkpoint cannot be loaded is
``unreadable``, each with one line; a checkpoint of the cell's own budget stays ``interrupted``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from run_folders import TIMESTAMP, write_sweep

from budgeted.experiments.families import PSPNET_TOY
from budgeted.experiments.sweep.records import CELL_FILE
from budgeted.experiments.sweep.status import STATES, cell_states, format_status
from budgeted.mmengine.schedulers import BudgetLinearLR

pytestmark = pytest.mark.integration

NAME = "linear_budget5_lr0.01_seed0"


def _interrupted_cell(tmp_path: Path, command: tuple[str, ...] = ()) -> tuple[Path, Path]:
    """A toy MMSeg sweep whose one cell was stopped before its end: no final validation, its
    record ``interrupted``; (the sweep folder, the checkpoint ``--resume`` loads)."""
    out = tmp_path / "sweep"
    run_dir = write_sweep(out, "mmseg", {("linear", 0.05, 0.01, 0): 4.5}, tmp_path / "data")[NAME]
    scalars = run_dir / TIMESTAMP / "vis_data" / "scalars.json"
    scalars.write_text("".join(scalars.read_text().splitlines(keepends=True)[:-1]))
    record = json.loads((run_dir / CELL_FILE).read_text())
    record.update(status="interrupted", exit=75, metrics=None, command=list(command))
    record["tries"][0].update(exit=75, signal="SIGTERM")
    (run_dir / CELL_FILE).write_text(json.dumps(record))
    return out, Path((run_dir / "last_checkpoint").read_text())


def _save_checkpoint(path: Path, total: int) -> None:
    """The checkpoint an MMEngine runner saves with a ``BudgetLinearLR`` of ``total`` iterations
    (``param_schedulers``: each scheduler's ``state_dict()``; its message hub's history buffers,
    which only MMEngine's allow-list loads)."""
    from mmengine.logging import MessageHub

    hub = MessageHub.get_instance(f"test_exp_resume_status_{total}")
    hub.update_scalar("train/loss", 1.0)
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.01)
    scheduler = BudgetLinearLR(optimizer, begin=0, end=total, by_epoch=False, warmup_iters=5)
    torch.save({"meta": {"iter": 40}, "message_hub": hub.state_dict(),
                "param_schedulers": [scheduler.state_dict()]}, path)  # fmt: skip


def test_a_checkpoint_of_the_cells_own_budget_resumes(tmp_path):
    out, checkpoint = _interrupted_cell(tmp_path)
    _save_checkpoint(checkpoint, PSPNET_TOY.iters(0.05))
    (row,) = cell_states(out)
    assert row.state == "interrupted" and "rerun the sweep to resume it" in row.result


def test_a_checkpoint_of_another_budget_is_a_mismatch_naming_both_totals_and_the_fix(tmp_path):
    out, checkpoint = _interrupted_cell(tmp_path)
    _save_checkpoint(checkpoint, 80)
    (row,) = cell_states(out)
    assert row.state == "mismatch" and "mismatch" in STATES
    assert row.result == (
        f"(iter_160.pth holds a budget of 80 iterations, the sweep plans 160: resuming is "
        f"refused; remove {out / NAME} to train it anew, or resume with the tool's on_resume "
        "replan)"
    )
    assert format_status([row]).splitlines()[-1] == "[status] 1 cells: 1 mismatch"


def test_a_cell_resumed_with_on_resume_replan_is_no_mismatch(tmp_path):
    out, checkpoint = _interrupted_cell(tmp_path, ("--cfg-options", "budget_on_resume=replan"))
    _save_checkpoint(checkpoint, 80)
    (row,) = cell_states(out)
    assert row.state == "interrupted"


def test_a_checkpoint_that_cannot_be_loaded_is_one_line(tmp_path):
    out, checkpoint = _interrupted_cell(tmp_path)  # its iter_160.pth: 0 bytes
    (row,) = cell_states(out)
    assert row.state == "unreadable" and "unreadable" in STATES
    assert str(checkpoint) in row.result and "\n" not in row.result


def test_a_checkpoint_whose_budget_state_is_junk_is_one_line(tmp_path):
    out, checkpoint = _interrupted_cell(tmp_path)
    state = {"budget": {"schedule": "linear", "total": "many"}}
    torch.save({"meta": {}, "param_schedulers": [state]}, checkpoint)
    (row,) = cell_states(out)
    assert row.state == "unreadable"
    assert row.result.startswith(f"(the budget in {checkpoint} cannot be read: ")
    assert "\n" not in row.result
