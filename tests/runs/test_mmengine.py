"""budgeted.runs.mmengine: what a work dir holds (a finished run's metrics are tested on a real
run in test_mmseg_training.py)."""

from __future__ import annotations

import json

import pytest

from budgeted.runs.mmengine import check_new_run_folder, final_metrics, holds_run, run_files

pytestmark = pytest.mark.unit


def test_a_folder_holds_a_run_once_it_has_checkpoints_or_logs(tmp_path):
    assert not holds_run(tmp_path / "missing") and not holds_run(tmp_path)
    (tmp_path / "20260101_000000").mkdir()  # a launch that never logged
    (tmp_path / "toy.py").write_text("")  # the config MMEngine dumps
    assert not holds_run(tmp_path)
    logs = tmp_path / "20260101_000000/vis_data"
    logs.mkdir()
    (logs / "scalars.json").write_text("")
    assert holds_run(tmp_path)
    (tmp_path / "iter_6.pth").write_bytes(b"")
    (tmp_path / "last_checkpoint").write_text("iter_6.pth")
    assert run_files(tmp_path) == [
        "20260101_000000/vis_data/scalars.json",
        "iter_6.pth",
        "last_checkpoint",
    ]


def test_a_new_run_is_refused_in_a_folder_that_holds_one(tmp_path):
    check_new_run_folder(tmp_path / "new", resume=False)
    check_new_run_folder(tmp_path, resume=False)
    (tmp_path / "iter_8.pth").write_bytes(b"")
    with pytest.raises(ValueError) as err:
        check_new_run_folder(tmp_path, resume=False)
    message = str(err.value)
    assert f"work dir {tmp_path} already holds a run (iter_8.pth)" in message
    assert "--resume" in message and "--work-dir" in message and "\n" not in message
    check_new_run_folder(tmp_path, resume=True)


def write_run(folder, max_iters, records):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "toy.py").write_text(f"train_cfg = dict(max_iters={max_iters})\n")
    logs = folder / "20260101_000000/vis_data"
    logs.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(r) for r in records]
    (logs / "scalars.json").write_text("\n".join(lines) + "\n")


def test_final_metrics_are_those_of_the_validation_at_the_end(tmp_path):
    train = {"lr": 0.01, "loss": 1.0, "iter": 4, "step": 4, "time": 0.1, "data_time": 0.0}
    val = {"aAcc": 80.0, "mIoU": 40.0, "mAcc": 50.0, "data_time": 0.0, "time": 0.1, "step": 4}
    write_run(tmp_path / "done", 4, [{**train, "iter": 2, "step": 2}, train, val])
    assert final_metrics(tmp_path / "done") == {"aAcc": 80.0, "mIoU": 40.0, "mAcc": 50.0}
    write_run(tmp_path / "early", 8, [train, val])  # validated at 4 of 8: not finished
    assert final_metrics(tmp_path / "early") is None
    write_run(tmp_path / "crashed", 4, [train])
    (tmp_path / "crashed/20260101_000000/vis_data/scalars.json").write_text(
        json.dumps(train) + '\n{"mIoU": 4'  # a line cut short
    )
    assert final_metrics(tmp_path / "crashed") is None
    assert final_metrics(tmp_path / "missing") is None
    # validated at the end, but the evaluator returned nothing (CocoMetric, no detections)
    write_run(tmp_path / "empty", 4, [train, {"data_time": 0.0, "time": 0.1, "step": 4}])
    assert final_metrics(tmp_path / "empty") == {}


def test_a_refused_resume_that_rewrote_the_config_dump_hides_no_finished_run(tmp_path):
    """MMEngine rewrites ``<work_dir>/<config>.py`` when a runner is built, before a resume with
    another budget is refused; the launch that logged the run keeps its own config."""
    train = {"lr": 0.01, "loss": 1.0, "iter": 4, "step": 4, "time": 0.1, "data_time": 0.0}
    val = {"aAcc": 80.0, "mIoU": 40.0, "mAcc": 50.0, "data_time": 0.0, "time": 0.1, "step": 4}
    run = tmp_path / "done"
    write_run(run, 4, [train, val])
    (run / "20260101_000000/vis_data/config.py").write_text("train_cfg = dict(max_iters=4)\n")
    refused = run / "20260102_000000/vis_data"  # the refused launch: its config, no scalars
    refused.mkdir(parents=True)
    (refused / "config.py").write_text("train_cfg = dict(max_iters=8)\n")
    (run / "toy.py").write_text("train_cfg = dict(max_iters=8)\n")
    assert final_metrics(run) == {"aAcc": 80.0, "mIoU": 40.0, "mAcc": 50.0}
    # a launch that trained on to a longer budget and stopped early: not finished at it
    longer = run / "20260103_000000/vis_data"
    longer.mkdir(parents=True)
    (longer / "config.py").write_text("train_cfg = dict(max_iters=8)\n")
    (longer / "scalars.json").write_text(json.dumps({**train, "iter": 6, "step": 6}) + "\n")
    assert final_metrics(run) is None


def test_a_time_budget_run_ends_at_its_last_validation_and_checkpoint(tmp_path):
    """``TimeBudgetTrainLoop``: ``max_iters`` only caps the run; the deadline made iteration 7
    the last, saved ``iter_7.pth`` and validated there. Before that checkpoint and validation
    (or with training logged after them) the run has not ended."""
    train = {"lr": 0.01, "loss": 1.0, "time": 0.1}
    val = {"aAcc": 80.0, "mIoU": 40.0, "mAcc": 50.0, "data_time": 0.0, "time": 0.1, "step": 7}
    rows = [{**train, "iter": i, "step": i} for i in range(1, 8)]
    run = tmp_path / "timed"
    write_run(run, 3200, [*rows, val])
    (run / "toy.py").write_text(
        "train_cfg = dict(type='TimeBudgetTrainLoop', seconds=2.0, max_iters=3200)\n"
    )
    assert final_metrics(run) is None  # validated, but no checkpoint of iteration 7
    (run / "iter_7.pth").write_bytes(b"")
    assert final_metrics(run) == {"aAcc": 80.0, "mIoU": 40.0, "mAcc": 50.0}
    write_run(run, 3200, [*rows, val, {**train, "iter": 8, "step": 8}])  # trained on after it
    (run / "toy.py").write_text("train_cfg = dict(type='TimeBudgetTrainLoop', max_iters=3200)\n")
    assert final_metrics(run) is None


@pytest.mark.parametrize(
    ("dump", "expected"),
    [
        ("train_cfg = dict(max_iters=32)\n_x = __import__('os').system('false')\n", 32),
        ("train_cfg = {'type': 'IterBasedTrainLoop', 'max_iters': 8}\n", 8),
        ("train_cfg = dict(type=IterBasedTrainLoop, max_iters=8)\n", 8),  # a lazy config's
        ("train_cfg = dict(by_epoch=True, max_epochs=12)\n", None),
        ("model = dict(train_cfg=dict(max_iters=5))\n", None),  # not the top-level train_cfg
        ("train_cfg = dict(max_iters=__import__('os').getpid() or 8)\n", "max_iters is an expr"),
        ("train_cfg = make_loop()\n", "train_cfg is an expression, not dict(...) (line 1)"),
        ("train_cfg = dict(max_iters=8\n", "is not Python ('(' was never closed, line 1)"),
        (b"\xff\xfe", "cannot be read (UnicodeDecodeError"),
    ],
)
def test_a_config_dump_is_parsed_never_run(dump, expected, tmp_path):
    """The dump of a downloaded run folder may hold any code: only the literal ``max_iters``
    of the top-level ``train_cfg`` is read; a length that is not a literal is one line."""
    from budgeted.runs.mmengine import dumped_max_iters
    from budgeted.runs.records import RecordError

    path = tmp_path / "cfg.py"
    path.write_bytes(dump if isinstance(dump, bytes) else dump.encode())
    if not isinstance(expected, str):
        assert dumped_max_iters(path) == expected
        return
    with pytest.raises(RecordError) as err:
        dumped_max_iters(path)
    message = str(err.value)
    assert message.startswith(f"config dump {path}") and expected in message, message
    assert "\n" not in message and message.endswith(
        "a run folder's files are read as data, never run"
    )


def test_saved_schedulers_pairs_states_by_position_and_ignores_junk():
    from budgeted.runs.mmengine import saved_schedulers, scheduler_place

    assert saved_schedulers({"param_schedulers": [{"last_step": 3}, "junk", {"begin": 0}]}) == {
        "param_schedulers[0]": {"last_step": 3},
        "param_schedulers[2]": {"begin": 0},
    }
    found = saved_schedulers({"param_schedulers": {"backbone": [{"a": 1}], "head": "junk"}})
    assert found == {"param_schedulers.backbone[0]": {"a": 1}}
    assert scheduler_place("param_schedulers.backbone[0]") == ("backbone", 0)
    for junk in (None, [], "x", {"param_schedulers": 3}, {"param_schedulers": [None]}):
        assert saved_schedulers(junk) == {}


def test_resume_checkpoint_is_the_file_last_checkpoint_names(tmp_path):
    from budgeted.runs.mmengine import resume_checkpoint

    assert resume_checkpoint(tmp_path) is None
    for junk in (b"", b"\n", b"a.pth\nb.pth", b"\xff\xfe"):
        (tmp_path / "last_checkpoint").write_bytes(junk)
        assert resume_checkpoint(tmp_path) is None
    (tmp_path / "last_checkpoint").write_text(f"{tmp_path}/iter_8.pth\n")
    assert resume_checkpoint(tmp_path) == f"{tmp_path}/iter_8.pth"  # even before it exists
    moved = tmp_path / "moved"
    moved.mkdir()
    (moved / "iter_8.pth").write_bytes(b"")
    (moved / "last_checkpoint").write_text("/old/place/iter_8.pth")
    assert resume_checkpoint(moved) == str(moved / "iter_8.pth")  # the folder was moved
    (moved / "last_checkpoint").write_text("s3://bucket/iter_8.pth")
    assert resume_checkpoint(moved) == "s3://bucket/iter_8.pth"


def test_a_work_dirs_checkpoint_loads_with_the_message_hub_it_carries(tmp_path):
    import torch
    from mmengine.logging import MessageHub

    from budgeted.runs.mmengine import load_checkpoint, saved_schedulers

    hub = MessageHub.get_instance("test_runs_mmengine_hub")
    hub.update_scalar("train/loss", 1.0)
    path = tmp_path / "iter_1.pth"
    state = {"budget": {"total": 8}, "_global_step": 1}
    torch.save({"message_hub": hub.state_dict(), "param_schedulers": [state]}, path)
    assert saved_schedulers(load_checkpoint(path)) == {"param_schedulers[0]": state}
