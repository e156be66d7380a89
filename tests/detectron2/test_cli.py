"""tools/train_net.py (budgeted.detectron2.cli) with the real Detectron2 trainer on toy data."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest
from d2_testutils import TINY, TOY_CONFIG, logged_lrs, read_metrics

from budgeted.core import BudgetSchedule
from budgeted.detectron2 import BudgetConfigError, BudgetTrainer, load_config
from budgeted.detectron2.cli import run

# 8 iterations (0.02 x 400), warmup 3, a checkpoint every 4
EIGHT = ["SOLVER.BUDGET.FRACTION", "0.02", "SOLVER.CHECKPOINT_PERIOD", "4"]


@pytest.fixture(scope="module")
def toy_run(toy_root, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("toy_run")
    run(["--config-file", TOY_CONFIG, *TINY, *EIGHT, "OUTPUT_DIR", str(out)])
    return out


@pytest.mark.slow
def test_logged_lr_equals_the_core_and_ap_is_computed(toy_run: Path) -> None:
    cfg = load_config(TOY_CONFIG, [*TINY, *EIGHT])
    core = BudgetSchedule("linear", 8, cfg.SOLVER.WARMUP_ITERS, cfg.SOLVER.WARMUP_FACTOR)
    lrs = logged_lrs(toy_run)
    assert sorted(lrs) == list(range(8))
    assert [lrs[i] for i in range(8)] == pytest.approx(
        [cfg.SOLVER.BASE_LR * core(i) for i in range(8)], rel=1e-9
    )
    final = read_metrics(toy_run)[-1]
    for key in ("bbox/AP", "bbox/AP50", "segm/AP", "segm/AP50"):
        assert math.isfinite(final[key]) and 0.0 <= final[key] <= 100.0  # pycocotools ran
    assert list(toy_run.glob("events.out.tfevents.*"))  # TensorBoard
    assert (toy_run / "inference" / "coco_instances_results.json").exists()


@pytest.mark.slow
def test_resume_continues_the_schedule_exactly(toy_run: Path, tmp_path: Path) -> None:
    stopped = tmp_path / "stopped"
    shutil.copytree(toy_run, stopped)
    # as if the run had stopped after iteration 3: its last checkpoint is model_0000003.pth
    for f in ("model_0000007.pth", "model_final.pth", "metrics.json"):
        (stopped / f).unlink(missing_ok=True)
    (stopped / "last_checkpoint").write_text("model_0000003.pth")
    run(["--config-file", TOY_CONFIG, "--resume", *TINY, *EIGHT, "DATASETS.TEST", "()",
         "OUTPUT_DIR", str(stopped)])  # fmt: skip
    resumed, full = logged_lrs(stopped), logged_lrs(toy_run)
    assert sorted(resumed) == [4, 5, 6, 7]
    assert [resumed[i] for i in range(4, 8)] == [full[i] for i in range(4, 8)]


@pytest.mark.slow
def test_resume_with_another_budget_is_refused(toy_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    shutil.copytree(toy_run, out)
    (out / "last_checkpoint").write_text("model_0000003.pth")
    other = [*TINY, "SOLVER.BUDGET.FRACTION", "0.03", "OUTPUT_DIR", str(out)]  # 12 iterations
    with pytest.raises(SystemExit) as err:
        run(["--config-file", TOY_CONFIG, "--resume", *other])
    msg = str(err.value.code)
    assert "total=8" in msg and "total=12" in msg and "SOLVER.MAX_ITER" in msg
    assert "MODEL.WEIGHTS" in msg and "\n" not in msg
    # the real trainer refuses too, before training
    trainer = BudgetTrainer(load_config(TOY_CONFIG, other))
    with pytest.raises(BudgetConfigError, match="total=8"):
        trainer.resume_or_load(resume=True)
    assert not (out / "model_0000011.pth").exists()


@pytest.mark.slow
def test_an_existing_run_is_never_overwritten(toy_run: Path) -> None:
    before = (toy_run / "metrics.json").read_text()
    with pytest.raises(SystemExit, match="already holds a run; pass --resume"):
        run(["--config-file", TOY_CONFIG, *TINY, *EIGHT, "OUTPUT_DIR", str(toy_run)])
    assert (toy_run / "metrics.json").read_text() == before


@pytest.mark.parametrize(
    "opts,message",
    [
        (["SOLVER.BUDGET.FRACTION", "0"], "SOLVER.BUDGET.FRACTION=0"),
        (["SOLVER.WARMUP_ITERS", "40"], "SOLVER.WARMUP_ITERS=40 is not shorter"),
        (["SOLVER.LR_SCHEDULER_NAME", "BudgetLinar"], "valid names: BudgetLinear"),
        (["DATASETS.TRAIN", "('nope',)"], "unknown dataset 'nope'"),
    ],
)
def test_bad_input_fails_in_one_line_before_training(toy_root, tmp_path, opts, message) -> None:
    with pytest.raises(SystemExit) as err:
        run(["--config-file", TOY_CONFIG, *opts, "OUTPUT_DIR", str(tmp_path / "out")])
    assert message in str(err.value.code) and "\n" not in str(err.value.code)
    assert not (tmp_path / "out").exists()


def test_missing_dataset_files_name_detectron2_datasets(tmp_path, monkeypatch) -> None:
    from budgeted.detectron2 import register_toy_coco

    register_toy_coco(str(tmp_path / "empty"), replace=True)
    try:
        with pytest.raises(SystemExit, match="does not exist; set DETECTRON2_DATASETS"):
            run(["--config-file", TOY_CONFIG, "OUTPUT_DIR", str(tmp_path / "out")])
    finally:
        register_toy_coco(replace=True)


def test_warmup_after_auto_scaling_is_checked_before_launch(toy_root, tmp_path) -> None:
    # toy 1 %: MAX_ITER 4, warmup 3; on 4 workers instead of 1: MAX_ITER 1, warmup 1
    with pytest.raises(SystemExit, match="after REFERENCE_WORLD_SIZE scaling to 4 workers"):
        run(["--config-file", "configs/detectron2/toy/mask_rcnn_toy_budget1.yaml", "--num-gpus",
             "4", "SOLVER.REFERENCE_WORLD_SIZE", "1",
             "OUTPUT_DIR", str(tmp_path / "o")])  # fmt: skip
