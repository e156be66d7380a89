"""``budgeted-sweep --evaluate-from``: a sweep's finished Detectron2 runs evaluated again (their
``model_final.pth``, Detectron2's ``--eval-only``) on another set, into a sweep folder the
report reads as any other. Real toy runs, the real tools."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from budgeted.experiments.sweep import main
from budgeted.toys.coco import make_toy_coco

REPO = Path(__file__).resolve().parents[2]
SWEEP = [sys.executable, "-m", "budgeted.experiments.sweep"]
REPORT = [sys.executable, "-m", "budgeted.experiments.report"]
# the Detectron2 tests' 64 px images (tests/detectron2/d2_testutils.py's TINY), scores kept
TINY = ["INPUT.MIN_SIZE_TRAIN", "(64,)", "INPUT.MAX_SIZE_TRAIN", "64", "INPUT.MIN_SIZE_TEST",
        "64", "INPUT.MAX_SIZE_TEST", "64", "MODEL.ROI_HEADS.SCORE_THRESH_TEST", "0.0"]  # fmt: skip
GRID = ["detectron2", "--toy", "--schedules", "linear", "--budgets", "0.01"]
CELLS = ("linear_budget1",)


def cli(cmd: list[str], *args: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*cmd, *map(str, args)], capture_output=True, text=True, cwd=REPO, check=False
    )


def final_line(run_dir: Path) -> dict:
    """The last evaluation line of a run folder's metrics.json, read directly."""
    rows = [json.loads(r) for r in (run_dir / "metrics.json").read_text().splitlines()]
    return [r for r in rows if "bbox/AP" in r][-1]


def dry_run(capsys: pytest.CaptureFixture, *args: str | Path) -> str:
    """``budgeted-sweep ... --dry-run``'s output, run in this process (nothing is started)."""
    assert main([*map(str, args), "--dry-run"]) == 0, capsys.readouterr().err
    return capsys.readouterr().out


def report_csv(*folders: Path) -> dict[str, dict[str, str]]:
    """cell folder name -> its CSV row, from budgeted-report over ``folders``."""
    out = folders[0].parent / f"{folders[0].name}.csv"
    run = cli(REPORT, *folders, "--csv", out)
    assert run.returncode == 0, run.stderr
    with out.open() as f:
        return {Path(row["run_dir"]).name: row for row in csv.DictReader(f)}


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the toy set, a finished sweep of one 4-iteration toy Mask R-CNN run)."""
    root = tmp_path_factory.mktemp("evaluate_from")
    data, out = root / "datasets", root / "trained"
    run = cli(SWEEP, *GRID, "--data", data, "--out", out, "--", *TINY)
    assert run.returncode == 0, run.stderr[-3000:]
    return data, out


@pytest.mark.e2e
def test_evaluating_on_the_training_runs_own_set_gives_their_own_figures(trained, tmp_path, capsys):
    data, source = trained
    out = tmp_path / "again"
    dry = dry_run(capsys, *GRID, "--evaluate-from", source, "--data", data, "--out", out)
    assert dry.splitlines()[0] == (
        "[sweep] grid: 1 evaluation (0 finished, 1 to run); cost unknown until one has finished"
    )
    assert "--eval-only" in dry and not out.exists()
    run = cli(SWEEP, *GRID, "--evaluate-from", source, "--data", data, "--out", out)
    assert run.returncode == 0, run.stderr[-3000:]
    for cell in CELLS:
        line = next(ln for ln in run.stdout.splitlines() if f"] {cell}:" in ln)
        assert "budgeted-train-net --eval-only" in line
        assert f"MODEL.WEIGHTS {source / cell / 'model_final.pth'}" in line
        assert f"OUTPUT_DIR {out / cell}" in line
        record = json.loads((out / cell / "sweep_cell.json").read_text())
        assert record["evaluated_from"] == str(source / cell)
        assert not (out / cell / "model_final.pth").exists()  # nothing trained, nothing saved
        trained_line, evaluated = final_line(source / cell), final_line(out / cell)
        # logged at the iteration model_final.pth was saved at (the last one, 3); training
        # logs its final evaluation after it, at MAX_ITER (4)
        assert (evaluated["iteration"], trained_line["iteration"]) == (3, 4)
        for key in ("bbox/AP", "segm/AP"):  # the same weights on the same set: the same figures
            assert evaluated[key] == pytest.approx(trained_line[key], abs=1e-9)
    rows, original = report_csv(out), report_csv(source)
    for cell in CELLS:
        assert rows[cell]["box AP"] == original[cell]["box AP"] != ""
        assert rows[cell]["mask AP"] == original[cell]["mask AP"]
    # the plots: the metric against the budget; no LR or loss curves (nothing was trained)
    plot = cli(REPORT, out, "--plot", tmp_path / "evaluated.png")
    assert plot.returncode == 0, plot.stderr
    assert sorted(p.name for p in tmp_path.glob("evaluated*")) == ["evaluated.png"]
    # a second run skips every evaluation and touches none of their files
    before = {p: p.stat().st_mtime_ns for cell in CELLS for p in (out / cell).rglob("*")}
    again = cli(SWEEP, *GRID, "--evaluate-from", source, "--data", data, "--out", out)
    assert again.returncode == 0 and again.stdout.count("skipped, already finished") == 1
    dry = dry_run(capsys, *GRID, "--evaluate-from", source, "--data", data, "--out", out)
    assert dry.splitlines()[0] == "[sweep] grid: 1 evaluation (1 finished, 0 to run)"
    # the estimate of what is left: the mean wall time of the finished evaluations in --out (a
    # copy with the cell moved to another budget's folder, its record saying so: a record must
    # be that of its folder, issue 40)
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    (copy / CELLS[0]).rename(copy / "linear_budget5")
    record = json.loads((copy / "linear_budget5" / "sweep_cell.json").read_text())
    (copy / "linear_budget5" / "sweep_cell.json").write_text(json.dumps({**record, "budget": 0.05}))
    wall = record["wall_s"]
    dry = dry_run(capsys, *GRID, "--evaluate-from", source, "--data", data, "--out", copy)
    assert dry.splitlines()[0] == (
        f"[sweep] grid: 1 evaluation (0 finished, 1 to run); estimated {wall / 60:.0f} min at "
        f"{wall:.0f} s each (the mean of the 1 finished in --out)"
    )
    assert {p: p.stat().st_mtime_ns for p in before} == before


@pytest.mark.e2e
def test_an_eval_only_in_the_runs_own_folder_leaves_its_log_as_it_was(trained, tmp_path):
    """The stock habit: ``--eval-only MODEL.WEIGHTS <run>/model_final.pth`` with the run's own
    OUTPUT_DIR (here a copy of the sweep's finished run): its metrics.json keeps its bytes and
    its final evaluation, so the sweep still skips it."""
    data, source = trained
    run = tmp_path / "run"
    shutil.copytree(source / CELLS[0], run)
    before = (run / "metrics.json").read_bytes()
    evaluate = subprocess.run(
        [sys.executable, "tools/train_net.py", "--eval-only", "--config-file",
         "configs/detectron2/toy/mask_rcnn_toy_budget1.yaml", *TINY,
         "MODEL.WEIGHTS", str(run / "model_final.pth"), "OUTPUT_DIR", str(run)],
        capture_output=True, text=True, cwd=REPO, check=False,
        env={**os.environ, "DETECTRON2_DATASETS": str(data)},
    )  # fmt: skip
    assert evaluate.returncode == 0, evaluate.stderr[-3000:]
    assert "--eval-only: results not added to" in evaluate.stderr + evaluate.stdout
    assert (run / "metrics.json").read_bytes() == before


@pytest.mark.e2e
def test_a_held_out_set_is_the_one_evaluated(trained, tmp_path):
    _, source = trained
    held_out = tmp_path / "held_out"
    make_toy_coco(str(held_out), num_train=1, num_val=5, seed=2)
    out = tmp_path / "held_out_eval"
    run = cli(SWEEP, *GRID, "--evaluate-from", source, "--data", held_out, "--out", out)
    assert run.returncode == 0, run.stderr[-3000:]
    for cell in CELLS:
        log = (out / cell / "sweep.log").read_text()
        assert "Start inference on 5 batches" in log  # the 5 held-out images, not the 16
        assert "bbox/AP" in final_line(out / cell)
    assert set(report_csv(out)) == set(CELLS)


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("mmseg", "--evaluate-from with mmseg: allowed: detectron2 sweeps"),
        (
            "unfinished",
            "cell linear_budget5 is finished (model_final.pth and its final "
            "evaluation) in none of {source}; allowed: cells finished in exactly one "
            "--evaluate-from folder",
        ),
        (
            "twice",
            "cell linear_budget1 is finished (model_final.pth and its final evaluation) in "
            "each of {source}, {source}; allowed: cells finished in exactly one",
        ),
        ("same", "--evaluate-from {source} is --out; allowed: another --out"),
        ("weights", "override MODEL.WEIGHTS after -- is set per cell by --evaluate-from"),
        ("no data", "--data {tmp}/nothing holds no toy set to evaluate on; allowed: a folder"),
        ("not a sweep", "--evaluate-from {tmp} is not a sweep folder (no sweep.json)"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(trained, tmp_path, capsys, case, message):
    data, source = trained
    out = tmp_path / "new"

    def grid(budget="0.01", sources=(source,), where=data, to=out):
        return ["detectron2", "--toy", "--schedules", "linear", "--budgets", budget,
                "--evaluate-from", *sources, "--data", where, "--out", to]  # fmt: skip

    args = {
        "mmseg": ["mmseg", "--toy", "--evaluate-from", source, "--out", out],
        "unfinished": grid(budget="0.05"),
        "twice": grid(sources=(source, source)),
        "same": grid(to=source),
        "weights": [*grid(), "--", "MODEL.WEIGHTS", "x.pth"],
        "no data": grid(where=tmp_path / "nothing"),
        "not a sweep": grid(sources=(tmp_path,)),
    }[case]
    before = {p: p.stat().st_mtime_ns for p in source.rglob("*")}
    code = main([str(a) for a in args])  # in this process: the checks run before any subprocess
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err, err
    assert err.startswith("sweep: error: ")
    assert message.format(source=source, tmp=tmp_path) in err
    assert not out.exists() and not (tmp_path / "nothing").exists()
    assert {p: p.stat().st_mtime_ns for p in source.rglob("*")} == before
