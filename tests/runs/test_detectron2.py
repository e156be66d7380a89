"""budgeted.runs.detectron2: run folders as Detectron2's tools leave them."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from budgeted.runs.detectron2 import (
    RUN_FILES,
    check_new_run_folder,
    final_metrics,
    holds_run,
    max_iter,
    resume_checkpoint,
    saved_schedulers,
    write_evaluation,
)

pytestmark = pytest.mark.unit

TRAIN = {"loss_mask": 0.5, "lr": 0.01, "fast_rcnn/cls_accuracy": 0.9, "data_time": 0.1}
EVAL = {"bbox/AP": 12.5, "bbox/AP50": 30.0, "segm/AP": 11.0, "segm/AP-square": float("nan")}


def write_run(folder: Path, rows: list[dict], *, max_iter: int = 8, final: bool = True) -> Path:
    """A run folder: Detectron2's config.yaml, metrics.json rows, model_final.pth if ``final``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.yaml").write_text(f"SOLVER:\n  MAX_ITER: {max_iter}\n")
    (folder / "metrics.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if final:
        (folder / "model_final.pth").write_bytes(b"")
    return folder


def test_holds_run_and_the_one_new_run_check(tmp_path: Path) -> None:
    assert not holds_run(tmp_path) and not holds_run(tmp_path / "missing")
    check_new_run_folder(tmp_path, resume=False)
    check_new_run_folder("", resume=False)  # no OUTPUT_DIR: nothing to protect
    for name in RUN_FILES:
        folder = tmp_path / name.replace(".", "_")
        folder.mkdir()
        (folder / name).write_text("x")
        assert holds_run(folder)
        check_new_run_folder(folder, resume=True)  # continuing it is what --resume asks
        with pytest.raises(ValueError) as err:
            check_new_run_folder(folder, resume=False)
        assert str(err.value) == (
            f"OUTPUT_DIR {str(folder)!r} already holds a run; pass --resume to continue it, or "
            "set another OUTPUT_DIR (e.g. OUTPUT_DIR ./output/new_run) to start a new one"
        )
    with pytest.raises(ValueError, match=r"^train\.output_dir '.*' already holds a run"):
        check_new_run_folder(folder, resume=False, key="train.output_dir")


def test_final_metrics_are_the_evaluation_after_the_last_iteration(tmp_path: Path) -> None:
    rows = [{"iteration": i, **TRAIN} for i in range(7)] + [{"iteration": 7, **TRAIN, **EVAL}]
    found = final_metrics(write_run(tmp_path / "done", rows))
    assert set(found) == set(EVAL) and found["bbox/AP"] == 12.5 and found["segm/AP"] == 11.0
    assert max_iter(tmp_path / "done") == 8


def test_an_eval_only_line_reads_as_the_final_evaluation_of_its_weights(tmp_path: Path) -> None:
    results = {"bbox": {"AP": 12.5, "AP50": 30.0}, "segm": {"AP": 11.0, "AP-square": math.nan}}
    evaluated = tmp_path / "evaluated"
    evaluated.mkdir()
    (evaluated / "config.yaml").write_text("SOLVER:\n  MAX_ITER: 8\n")  # as default_setup saves
    write_evaluation(evaluated, results, 7)  # weights saved at the last of 8 iterations
    found = final_metrics(evaluated)
    assert set(found) == set(EVAL) and found["bbox/AP"] == 12.5 and found["segm/AP"] == 11.0
    assert math.isnan(found["segm/AP-square"])
    # weights saved mid-run: an evaluation, not a finished run's
    write_run(tmp_path / "mid", [], final=False)
    write_evaluation(tmp_path / "mid", results, 3)
    assert final_metrics(tmp_path / "mid") is None
    # weights without an iteration (a converted model): the line has none, and nothing is final
    write_run(tmp_path / "plain", [], final=False)
    write_evaluation(tmp_path / "plain", {"bbox": {"AP": 1.0}}, None)
    assert json.loads((tmp_path / "plain/metrics.json").read_text()) == {"bbox/AP": 1.0}
    assert final_metrics(tmp_path / "plain") is None
    # appended, as Detectron2's JSONWriter does, to an evaluation's own log: its lines stay
    assert write_evaluation(evaluated, {"bbox": {"AP": 13.0}}, 7) == evaluated / "metrics.json"
    assert len((evaluated / "metrics.json").read_text().splitlines()) == 2
    assert final_metrics(evaluated) == {"bbox/AP": 13.0}
    # a training run's log is left as it was (an --eval-only in the run's own folder), so what
    # the run logged stays its final evaluation; so is a log given no results
    rows = [{"iteration": i, **TRAIN} for i in range(7)] + [{"iteration": 8, **TRAIN, **EVAL}]
    run = write_run(tmp_path / "run", rows)
    before = (run / "metrics.json").read_bytes()
    assert write_evaluation(run, {"bbox": {"AP": 2.0}}, 7) is None
    assert (run / "metrics.json").read_bytes() == before
    assert final_metrics(run)["bbox/AP"] == 12.5
    assert write_evaluation(tmp_path / "plain", {}, 3) is None
    assert write_evaluation(tmp_path / "plain", {"bbox": {}}, 3) is None


def test_unfinished_runs_have_no_final_metrics(tmp_path: Path) -> None:
    assert final_metrics(tmp_path / "missing") is None
    periodic = [{"iteration": 3, **TRAIN, **EVAL}] + [{"iteration": i, **TRAIN} for i in (4, 5)]
    assert final_metrics(write_run(tmp_path / "a", periodic, final=False)) is None
    # an evaluation at the last logged iteration, but short of MAX_ITER and no model_final.pth
    assert final_metrics(write_run(tmp_path / "b", periodic[:1], final=False)) is None
    # trained to the end but never evaluated
    assert final_metrics(write_run(tmp_path / "c", periodic[1:])) is None
    # REFERENCE_WORLD_SIZE halved MAX_ITER 8 to 4: model_final.pth marks the end
    scaled = [{"iteration": i, **TRAIN} for i in range(3)] + [{"iteration": 3, **TRAIN, **EVAL}]
    assert final_metrics(write_run(tmp_path / "d", scaled))["bbox/AP50"] == 30.0
    # a line cut short by a crash is skipped
    cut = write_run(tmp_path / "e", scaled)
    with (cut / "metrics.json").open("a") as f:
        f.write('{"iteration": 4, "lo')
    assert final_metrics(cut)["bbox/AP"] == 12.5


def test_max_iter_of_a_lazyconfig_run(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("train:\n  max_iter: 40\n  output_dir: x\n")
    assert max_iter(tmp_path) == 40


JUNK = [None, 3, "x", [], {"trainer": None}, {"trainer": {"hooks": ["LRScheduler"]}},
        {"trainer": {"hooks": {"LRScheduler": None}}}, {"trainer": {"hooks": {1: {}}}}]  # fmt: skip


@pytest.mark.parametrize("checkpoint", JUNK, ids=repr)
def test_saved_schedulers_of_junk_is_empty(checkpoint: object) -> None:
    assert saved_schedulers(checkpoint) == {}


def test_saved_schedulers_reads_the_lr_scheduler_hook_and_a_junk_state_as_empty() -> None:
    state = {"last_epoch": 4, "budget": {"total": 8}}
    assert saved_schedulers({"trainer": {"hooks": {"LRScheduler": state}}}) == {
        "LRScheduler": state
    }
    assert saved_schedulers({"trainer": {"hooks": {"LRScheduler": [1]}}}) == {"LRScheduler": {}}


def test_resume_checkpoint_is_the_file_last_checkpoint_names(tmp_path: Path) -> None:
    assert resume_checkpoint(tmp_path) is None
    (tmp_path / "last_checkpoint").write_bytes(b"model_0000003.pth\n")
    assert resume_checkpoint(tmp_path) == str(tmp_path / "model_0000003.pth")
    (tmp_path / "last_checkpoint").write_bytes(b"\xff\xfe")  # junk: a path, never an error
    assert resume_checkpoint(tmp_path) is not None
    assert resume_checkpoint(tmp_path / "missing") is None
