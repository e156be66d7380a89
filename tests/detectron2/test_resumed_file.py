"""Which file ``--resume`` continues: only a checkpoint of the run in the output folder (issue 40,
items 14 and 24). A ``last_checkpoint`` that names another run's checkpoint, or an MMEngine run
folder (a real one, written by MMEngine's ``Runner``), is refused in one line saying what it is
and what to do, before anything is loaded or written."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest
import torch
from d2_testutils import EIGHT, TINY, TOY_CONFIG, copy_run, folder_hashes, refusal
from mmengine.model import BaseModel
from mmengine.runner import Runner
from torch import nn
from torch.utils.data import Dataset

from budgeted.detectron2 import BudgetTrainer, load_config
from budgeted.mmengine.checkpoint import allow_mmengine_checkpoints
from budgeted.safety import DamagedCheckpointError


@pytest.mark.integration
@pytest.mark.parametrize("named", ["an absolute path", "a relative path"])
def test_resume_refuses_a_checkpoint_of_another_run(toy_run, tmp_path, named) -> None:
    """Before, ``--resume`` loaded the other run's checkpoint and trained on from its iteration
    here, its evaluation appended to this run's metrics.json."""
    other = copy_run(toy_run, tmp_path / "other")  # another run: its model_0000003.pth
    out = copy_run(toy_run, tmp_path / "run")
    foreign = other / "model_0000003.pth"
    text = str(foreign) if named == "an absolute path" else "../other/model_0000003.pth"
    (out / "last_checkpoint").write_text(text)
    before = folder_hashes(tmp_path)
    message = refusal(["--config-file", TOY_CONFIG, "--resume", *TINY, *EIGHT,
                       "OUTPUT_DIR", str(out)])  # fmt: skip
    assert message == (
        f"train_net: cannot resume: {str(out / 'last_checkpoint')!r} names {str(foreign)!r}, "
        f"outside OUTPUT_DIR {str(out)!r} (another run's checkpoint): --resume continues only "
        "the run in OUTPUT_DIR; to start a new run from its weights: MODEL.WEIGHTS "
        f"{foreign}, no --resume, another OUTPUT_DIR; to go on with this run: --resume-from "
        f"{out / 'model_0000003.pth'}"
    )
    assert folder_hashes(tmp_path) == before  # both runs: not one byte changed, no file added
    # the trainer itself refuses it too (a user's script with the safe checkpointer)
    trainer = BudgetTrainer(load_config(TOY_CONFIG, [*TINY, *EIGHT, "OUTPUT_DIR", str(out)]))
    with pytest.raises(DamagedCheckpointError, match=r"outside OUTPUT_DIR .* another OUTPUT_DIR"):
        trainer.resume_or_load(resume=True)


class TinyNet(BaseModel):
    """A linear regression: what MMEngine's runner trains and checkpoints here."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(2, 1)

    def forward(self, x, y=None, mode="tensor"):
        out = self.linear(x).squeeze(-1)
        return {"loss": ((out - y) ** 2).mean()} if mode == "loss" else out


class Pairs(Dataset):
    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int) -> dict:
        return {"x": torch.tensor([float(i), 1.0]), "y": torch.tensor(float(i % 3))}


@pytest.fixture(scope="module")
def mmengine_work_dir(tmp_path_factory) -> Path:
    """A real MMEngine run folder: 4 iterations of MMEngine's ``Runner``, a checkpoint every 2
    (``iter_2.pth``, ``iter_4.pth``; ``last_checkpoint`` names the last by its absolute path,
    as MMEngine writes it) and its timestamped log folder."""
    work_dir = tmp_path_factory.mktemp("mmengine") / "work"
    runner = Runner(
        model=TinyNet(), work_dir=str(work_dir), experiment_name="resumed_file_mmengine",
        train_dataloader=dict(
            dataset=Pairs(), sampler=dict(type="DefaultSampler", shuffle=False), batch_size=2,
            collate_fn=dict(type="default_collate"),
        ),
        optim_wrapper=dict(optimizer=dict(type="SGD", lr=0.01)),
        train_cfg=dict(type="IterBasedTrainLoop", max_iters=4),
        default_hooks=dict(checkpoint=dict(type="CheckpointHook", interval=2, by_epoch=False)),
        default_scope="mmengine",
    )  # fmt: skip
    runner.logger.setLevel(logging.ERROR)
    runner.train()
    assert (work_dir / "last_checkpoint").read_text().strip() == str(work_dir / "iter_4.pth")
    return work_dir


@pytest.fixture(params=[False, True], ids=["", "MMEngine's globals allowed here"])
def mmengine_globals(request):
    """Whether this process allow-lists MMEngine's checkpoint globals (as after an MMEngine
    resume in it: ``torch.serialization.add_safe_globals`` is process-wide); put back after."""
    saved = torch.serialization.get_safe_globals()
    if request.param:
        allow_mmengine_checkpoints()
    yield request.param
    torch.serialization.clear_safe_globals()
    torch.serialization.add_safe_globals(saved)


@pytest.mark.integration
@pytest.mark.parametrize("where", ["where MMEngine wrote it", "a copy of it elsewhere"])
def test_resume_into_an_mmengine_run_folder_says_what_it_is(
    toy_root, mmengine_work_dir, tmp_path, where, mmengine_globals
) -> None:
    """Before: "refusing to load .../iter_4.pth: it names the globals builtins.getattr,
    mmengine.logging.history_buffer.HistoryBuffer ... loading it could run code from the file",
    in a copy naming the original folder's file. The same where this process allow-lists
    MMEngine's globals (it failed so in CI: told by torch's *unsafe* globals, the file looked
    like weights only)."""
    out = mmengine_work_dir
    if where == "a copy of it elsewhere":  # last_checkpoint still names the original's file
        out = Path(shutil.copytree(mmengine_work_dir, tmp_path / "copy"))
    named = (out / "last_checkpoint").read_text().strip()
    before = folder_hashes(out)
    message = refusal(["--config-file", TOY_CONFIG, "--resume", *TINY, *EIGHT,
                       "OUTPUT_DIR", str(out)])  # fmt: skip
    assert message == (
        f"train_net: cannot resume: OUTPUT_DIR {str(out)!r} is an MMEngine run folder, not a "
        f"Detectron2 one (its last_checkpoint names MMEngine's checkpoint {named!r}); resume it "
        f"with the MMEngine tool that trained it (budgeted-train-seg CONFIG --work-dir {out} "
        "--resume), or train this config into another OUTPUT_DIR"
    )
    assert folder_hashes(out) == before
