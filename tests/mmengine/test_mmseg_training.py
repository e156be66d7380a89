"""Real MMEngine Runner on CPU, toy PSPNet: logged LR, resume, refusals, metrics (2 ranks, and
preempted runs: test_mmseg_reliability.py).

Two routes: ``tools/train_seg.py`` (``budgeted.mmengine.cli``), and the stock one that
MMSegmentation's own ``tools/train.py`` takes: ``Runner.from_cfg(Config.fromfile(...)).train()``
with nothing of ours but the config's ``custom_imports``.
"""

from __future__ import annotations

import fractions
import gc
import pickle
import shutil
import subprocess
import sys

import pytest
import torch
from mmengine.runner import Runner
from mmseg_testutils import (
    logged,
    recorded_lrs,
    stock_config,
    toy_args,
    toy_config,
)

from budgeted.mmengine import BudgetConfigError
from budgeted.runs.mmengine import final_metrics, holds_run
from budgeted.schedules import BudgetMismatchError, BudgetSchedule

ITERS, WARMUP, BASE_LR = 12, 4, 0.01
SAFE = ("budgeted.mmengine", "budgeted.mmengine.safe_checkpoints")
"""The custom_imports of a config that opts in to loading MMEngine checkpoints."""


def core_lr(it: int, total: int = ITERS, warmup: int = WARMUP) -> float:
    return BASE_LR * BudgetSchedule("linear", total, warmup)(it)


@pytest.mark.e2e
def test_logged_lr_equals_the_core_and_mmseg_computes_miou(first_run):
    tmp, work_dir = first_run
    lrs = logged(work_dir, "lr")
    assert sorted(lrs) == list(range(1, ITERS + 1))
    for it, lr in lrs.items():  # MMEngine logs iteration it (1-based) with the LR it trained at
        assert lr == pytest.approx(core_lr(it - 1), rel=1e-6), it
    assert recorded_lrs(tmp) == pytest.approx({it: core_lr(it) for it in range(ITERS)})
    miou = logged(work_dir, "mIoU")
    assert list(miou) == [ITERS] and 0.0 <= miou[ITERS] <= 100.0
    assert (work_dir / "iter_6.pth").is_file() and (work_dir / f"iter_{ITERS}.pth").is_file()
    metrics = final_metrics(work_dir)  # what sweeps and reports read
    assert metrics is not None and metrics["mIoU"] == miou[ITERS]
    assert set(metrics) == {"aAcc", "mIoU", "mAcc"} and holds_run(work_dir)


def resume_dir(first_run, tmp_path):
    _, work_dir = first_run
    resumed = tmp_path / "resumed"
    resumed.mkdir()
    shutil.copy(work_dir / "iter_6.pth", resumed / "iter_6.pth")
    return resumed


@pytest.mark.e2e
def test_stock_runner_resumes_exactly_with_the_config_opt_in(
    first_run, tmp_path, toy_root, fresh_allow_list
):
    resumed = resume_dir(first_run, tmp_path)
    ckpt = resumed / "iter_6.pth"
    import budgeted.mmengine  # noqa: F401  (registers; does not open torch's allow-list)

    with pytest.raises(pickle.UnpicklingError, match="HistoryBuffer"):
        torch.load(ckpt)  # without the opt-in, torch >= 2.6 refuses MMEngine's checkpoints
    cfg = stock_config(tmp_path, toy_root, imports=SAFE, resume=True, load_from=str(ckpt))
    cfg.work_dir = str(resumed)
    Runner.from_cfg(cfg).train()
    first = recorded_lrs(first_run[0])
    after = recorded_lrs(tmp_path)
    assert sorted(after) == list(range(6, ITERS))
    assert after == {it: first[it] for it in after}  # bit-for-bit the uninterrupted run's LR
    first_logged = logged(first_run[1], "lr")
    assert logged(resumed, "lr") == {it: first_logged[it] for it in range(7, ITERS + 1)}

    foreign = tmp_path / "foreign" / "iter_6.pth"
    foreign.parent.mkdir()
    checkpoint = torch.load(ckpt)  # weights_only, through the allow-list
    checkpoint["meta"]["note"] = fractions.Fraction(1, 3)
    torch.save(checkpoint, foreign)
    cfg = stock_config(tmp_path, toy_root, imports=SAFE, resume=True, load_from=str(foreign))
    with pytest.raises(pickle.UnpicklingError, match=r"fractions\.Fraction"):
        Runner.from_cfg(cfg).train()  # the opt-in allows MMEngine's globals, nothing else


@pytest.mark.e2e
def test_importing_the_package_leaves_torch_allow_list_alone():
    code = (
        "import torch, budgeted.mmengine\n"
        "names = {e[1] for e in torch.serialization.get_safe_globals() if isinstance(e, tuple)}\n"
        "assert 'mmengine.logging.history_buffer.HistoryBuffer' not in names, names\n"
        "import budgeted.mmengine.safe_checkpoints\n"
        "names = {e[1] for e in torch.serialization.get_safe_globals() if isinstance(e, tuple)}\n"
        "assert 'mmengine.logging.history_buffer.HistoryBuffer' in names, names\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]


@pytest.mark.e2e
def test_stock_runner_refuses_a_resume_with_another_budget_in_one_line(
    first_run, tmp_path, toy_root
):
    resumed = resume_dir(first_run, tmp_path)
    ckpt = resumed / "iter_6.pth"
    cfg = stock_config(tmp_path, toy_root, iters=20, resume=True, load_from=str(ckpt))
    cfg.work_dir = str(resumed)
    with pytest.raises(BudgetMismatchError) as err:
        Runner.from_cfg(cfg).train()
    message = str(err.value)  # what MMSeg's tools/train.py prints last, alone
    assert message == (
        "cannot resume: the checkpoint's budget has train_cfg.max_iters (end - begin)=12, the "
        "config's train_cfg.max_iters (end - begin)=20; to resume, keep the checkpoint's budget "
        "(train_cfg.max_iters=12); to train another budget, start a new run from its weights "
        "with load_from=<checkpoint> and resume=False"
    )
    assert sorted(p.name for p in resumed.glob("*.pth")) == ["iter_6.pth"]  # nothing trained
    assert not (tmp_path / "lr_rank0.json").exists()


@pytest.mark.integration
def test_our_tool_refuses_a_resume_with_another_budget(first_run, tmp_path, toy_root, cli, capsys):
    resumed = resume_dir(first_run, tmp_path)
    ckpt = resumed / "iter_6.pth"
    args = toy_args(toy_config(tmp_path), resumed, toy_root, f"load_from={ckpt}", iters=20)
    assert cli.main([*args, "--resume"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("train_seg: error: cannot resume: the checkpoint's budget has ")
    assert "(end - begin)=12" in err and "(end - begin)=20" in err
    assert "train_cfg.max_iters=12" in err and "load_from" in err
    assert sorted(p.name for p in resumed.glob("*.pth")) == ["iter_6.pth"]  # nothing trained
    assert not (tmp_path / "lr_rank0.json").exists()


@pytest.mark.e2e
def test_stock_runner_replans_a_longer_budget_from_the_current_lr(first_run, tmp_path, toy_root):
    resumed = resume_dir(first_run, tmp_path)  # iter_6.pth of the 12-iteration run
    ckpt = resumed / "iter_6.pth"
    cfg = stock_config(
        tmp_path, toy_root, iters=20, resume=True, load_from=str(ckpt), budget_on_resume="replan"
    )
    cfg.work_dir = str(resumed)
    Runner.from_cfg(cfg).train()
    first = recorded_lrs(first_run[0])
    after = recorded_lrs(tmp_path)
    assert sorted(after) == list(range(6, 20))
    assert after[6] == pytest.approx(first[6], rel=1e-9)  # no jump at the re-plan
    # linear: a straight line from the LR it had reached to 0 at the new end (20)
    assert after == pytest.approx({it: first[6] * (20 - it) / (20 - 6) for it in range(6, 20)})
    log = next(resumed.glob("*/*.log")).read_text()
    assert "budget re-planned at 6: train_cfg.max_iters 12 -> 20" in log
    # the re-plan is in the new checkpoints: resuming one is exact, with the default policy
    again_dir = tmp_path / "again"
    again_dir.mkdir()
    shutil.copy(resumed / "iter_20.pth", again_dir / "iter_20.pth")
    saved = torch.load(resumed / "iter_20.pth", weights_only=False)["param_schedulers"][0]
    assert saved["budget"]["replan"] == {"at": 6, "from_progress": pytest.approx(2 / 8)}
    assert saved["budget"]["total"] == 20 and saved["end"] == 20


@pytest.mark.e2e
def test_our_tool_replans_and_refuses_to_extend_a_finished_run(
    first_run, tmp_path, toy_root, cli, capsys
):
    resumed = resume_dir(first_run, tmp_path)
    ckpt = resumed / "iter_6.pth"
    args = toy_args(toy_config(tmp_path), resumed, toy_root, f"load_from={ckpt}", iters=16)
    assert cli.main([*args, "budget_on_resume=replan", "--resume"]) == 0
    after = recorded_lrs(tmp_path)
    first = recorded_lrs(first_run[0])
    assert after == pytest.approx({it: first[6] * (16 - it) / (16 - 6) for it in range(6, 16)})
    # the run is finished (LR 0 at 16): extending it again is refused, nothing written
    final = resumed / "iter_16.pth"
    before = sorted(p.name for p in resumed.glob("*.pth"))
    args = toy_args(toy_config(tmp_path), resumed, toy_root, f"load_from={final}", iters=24)
    assert cli.main([*args, "budget_on_resume=replan", "--resume"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == (
        "train_seg: error: BudgetLinearLR: train_cfg.max_iters: cannot change the budget at 16: "
        "the budget of 16 has run out there (multiplier 0); re-plan from a checkpoint saved "
        "before 16"
    )
    assert sorted(p.name for p in resumed.glob("*.pth")) == before
    args = toy_args(toy_config(tmp_path), resumed, toy_root, f"load_from={ckpt}", iters=24)
    assert cli.main([*args, "budget_on_resume=later", "--resume"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.endswith("budget_on_resume='later' is invalid; allowed: refuse, replan, branch")


@pytest.mark.integration
def test_checkpoint_with_a_foreign_global_is_refused(first_run, tmp_path, toy_root, cli, capsys):
    resumed = resume_dir(first_run, tmp_path)
    ckpt = resumed / "iter_6.pth"
    checkpoint = torch.load(ckpt)  # weights_only, through the allow-list
    checkpoint["meta"]["note"] = fractions.Fraction(1, 3)
    torch.save(checkpoint, ckpt)
    args = toy_args(toy_config(tmp_path), resumed, toy_root, f"load_from={ckpt}")
    assert cli.main([*args, "--resume"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith(f"train_seg: error: refusing to load '{ckpt}': it names the global ")
    assert "fractions.Fraction" in err


EPOCHS = dict(  # 8 toy train images at batch 2: 4 iterations an epoch
    train_cfg=dict(_delete_=True, type="EpochBasedTrainLoop", max_epochs=3, val_interval=10),
    train_dataloader=dict(sampler=dict(type="DefaultSampler", shuffle=True)),
)


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"param_scheduler.0.end": 20},
            "BudgetLinearLR: end=20 differs from the train loop's max_iters=12: the budget would "
            "be cut short",
        ),
        (  # an epoch-based entry in an iteration-based loop: end = 1 epoch of 4 iterations (no
            # warmup: a warmup as long as the budget is refused first, when the entry is built)
            {
                "param_scheduler.0.by_epoch": True,
                "param_scheduler.0.convert_to_iter_based": True,
                "param_scheduler.0.warmup_iters": 0,
            },
            "BudgetLinearLR: end=1 epochs x 4 iterations = 4 differs from the train loop's "
            "max_iters=12 (by_epoch=True with convert_to_iter_based",
        ),
        (  # epoch-based, converted: end=2 epochs is 8 iterations of 12
            {
                **EPOCHS,
                "param_scheduler": [
                    dict(
                        type="BudgetStepLR",
                        end=2,
                        by_epoch=True,
                        convert_to_iter_based=True,
                        warmup_iters=0,
                    )
                ],
            },
            "BudgetStepLR: end=2 epochs x 4 iterations = 8 differs from the train loop's "
            "max_iters=12: the budget would end before training does; leave out end",
        ),
    ],
)
def test_stock_runner_refuses_an_end_other_than_the_train_loop(
    options, message, tmp_path, toy_root
):
    cfg = stock_config(tmp_path, toy_root, validate=False, **options)
    with pytest.raises(BudgetConfigError) as err:
        Runner.from_cfg(cfg).train()
    assert str(err.value).startswith(message) and "\n" not in str(err.value)
    assert logged(tmp_path / "work", "lr") == {}  # refused before the first iteration
    assert not list((tmp_path / "work").glob("*.pth"))


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("options", "expected"),
    [
        (  # a stock warmup, then the budget over the rest: begin offsets the budget
            {
                "param_scheduler": [
                    dict(type="LinearLR", start_factor=0.5, begin=0, end=4, by_epoch=False),
                    dict(type="BudgetLinearLR", begin=4, warmup_iters=0, by_epoch=False),
                ]
            },
            {it: BASE_LR * BudgetSchedule("linear", 8, 0)(it - 4) for it in range(4, ITERS)},
        ),
        (  # epoch-based loop: end filled with max_epochs, converted to 3 x 4 iterations
            {
                **EPOCHS,
                "param_scheduler": [
                    dict(type="BudgetLinearLR", warmup_iters=4, convert_to_iter_based=True)
                ],
            },
            {it: core_lr(it) for it in range(ITERS)},
        ),
    ],
)
def test_stock_runner_trains_offset_and_epoch_based_budgets(options, expected, tmp_path, toy_root):
    cfg = stock_config(tmp_path, toy_root, validate=False, **options)
    Runner.from_cfg(cfg).train()
    lrs = recorded_lrs(tmp_path)
    assert sorted(lrs) == list(range(ITERS))
    assert {it: lrs[it] for it in expected} == pytest.approx(expected, rel=1e-12)


@pytest.mark.e2e
def test_a_schedule_registered_later_trains_with_the_runner(sqrt_schedule, tmp_path, toy_root):
    iters, warmup = 6, 2
    scheduler = dict(type="BudgetSqrtLR", floor=0.2, warmup_iters=warmup, by_epoch=False)
    cfg = stock_config(tmp_path, toy_root, iters=iters, validate=False, param_scheduler=[scheduler])
    Runner.from_cfg(cfg).train()
    core = BudgetSchedule(sqrt_schedule, iters, warmup, params={"floor": 0.2})
    expected = {it: BASE_LR * core(it) for it in range(iters)}
    assert recorded_lrs(tmp_path) == pytest.approx(expected, rel=1e-12)
    assert expected[iters - 1] < expected[warmup]  # it decays ...
    assert expected[iters - 1] > BASE_LR * 0.2  # ... towards its floor


@pytest.mark.e2e
def test_test_split_metrics_iou_and_cityscapes(first_run, tmp_path, toy_root, cli):
    _, work_dir = first_run
    args = cli.parse_args(
        toy_args(
            toy_config(tmp_path),
            tmp_path / "test",
            toy_root,
            f"load_from={work_dir / f'iter_{ITERS}.pth'}",
            f"test_evaluator.1.output_dir={tmp_path / 'cityscapes_results'}",
        )
    )
    runner = Runner.from_cfg(cli.preflight(args))
    metrics = runner.test()
    assert 0.0 <= metrics["mIoU"] <= 100.0
    assert 0.0 <= metrics["averageScoreCategories"] <= 1.0  # cityscapesscripts' evaluator
    # CityscapesMetric removes its scratch folder when it is collected. Collect it now, while the
    # folder exists: collected later, after tmp_path is gone, its finalizer would raise in whatever
    # test is running then, and on Python 3.11.7 pytest formatting that exception inside another
    # ast.parse fails that test (gh-106905, "AST constructor recursion depth mismatch").
    del runner
    gc.collect()
    assert not (tmp_path / "cityscapes_results").exists()
