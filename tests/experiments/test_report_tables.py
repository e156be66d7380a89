"""The report's tables (issue 52): a verdict only where the paired interval can tell (not from
two seeds, not from a zero-width interval), numbers shown by the metric's scale (a 0-1 metric
keeps its digits), and the ``*`` of a heading explained where it is written."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from run_folders import call_tool, toy_data, write_sweep

from budgeted.experiments.report import main

HEAD = ["framework", "family", "schedule", "budget", "lr", "seed", "iterations", "{metric}",
        "wall_s", "run_dir", "status"]  # fmt: skip


def write_pairs(path: Path, values: dict[str, list[float]], metric: str = "top-1") -> Path:
    """A report CSV of ``linear`` and ``step`` at budget 0.1, one LR: schedule -> each seed's
    value."""
    with path.open("w", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow([h.format(metric=metric) for h in HEAD])
        for schedule, seeds in values.items():
            for seed, value in enumerate(seeds):
                writer.writerow(["pytorch", "mine.py", schedule, 0.1, 0.1, seed, 100, value, 1.0,
                                 "", "finished"])  # fmt: skip
    return path


def verdicts(out: str) -> dict[str, str]:
    """The paired table's ``linear − step`` and verdict cells of the row of budget 0.1."""
    lines = out.split("paired differences", 1)[1].split("\n\n", 2)[1].splitlines()
    row = [c.strip() for c in lines[2].strip("|").split("|")]
    return {"difference": row[1], "verdict": row[2]}


@pytest.mark.unit
@pytest.mark.parametrize(
    ("linear", "step", "difference", "says"),
    [
        ([90.25, 91.25], [89.25, 90.25], "+1.00 [+1.00, +1.00] (2)",
         "not resolved: 2 seeds (3 needed)"),
        ([90.5, 91.0], [89.0, 90.0], "+1.25 [-1.93, +4.43] (2)",
         "not resolved: 2 seeds (3 needed)"),
        ([97.23, 96.89, 97.57], [96.89, 96.55, 97.23], "+0.34 [+0.34, +0.34] (3)",
         "not resolved: every difference equal"),
        ([90.0, 91.0, 92.0], [85.0, 85.5, 86.0], "+5.50 [+4.26, +6.74] (3)", "linear ahead"),
    ],
)  # fmt: skip
def test_no_verdict_from_two_seeds_or_a_zero_width_interval(
    linear, step, difference, says, tmp_path, capsys
) -> None:
    """Issue 52/8: with two seeds, or differences all equal (accuracies on a small set are
    quantized: 0.34 three times, equal but for float rounding), the interval cannot call a
    winner ("linear ahead" from n = 2 and from [+1.00, +1.00] before)."""
    data = write_pairs(tmp_path / "runs.csv", {"linear": linear, "step": step})
    code, out, err = call_tool(main, [str(data)], capsys)
    assert code == 0, err
    assert verdicts(out) == {"difference": difference, "verdict": says}


@pytest.mark.unit
def test_a_metric_on_a_0_1_scale_keeps_its_digits(tmp_path, capsys) -> None:
    """A metric of the user's on a 0-1 scale (an F1) is shown to four significant digits
    (``0.97 ± 0.00 (2)`` and ``-0.00 [-0.01, -0.00]`` before), a metric in percent as before."""
    values = {"linear": [0.9712, 0.9743, 0.9705], "step": [0.9731, 0.9788, 0.9716]}
    data = write_pairs(tmp_path / "runs.csv", values, metric="val_f1")
    code, out, err = call_tool(main, [str(data)], capsys)
    assert code == 0, err
    assert "| 0.1 | 100 | 0.9720 ± 0.0020 (3) | 0.9745 ± 0.0038 (3) |" in out, out
    assert verdicts(out)["difference"] == "-0.0025 [-0.0069, +0.0019] (3)"
    assert "the best schedule's at budget 0.1, the largest run (0.9745)" in out
    percent = {s: [100 * v for v in x] for s, x in values.items()}
    out = call_tool(main, [str(write_pairs(tmp_path / "pct.csv", percent))], capsys)[1]
    assert "| 0.1 | 100 | 97.20 ± 0.20 (3) | 97.45 ± 0.38 (3) |" in out, out


@pytest.mark.unit
def test_the_star_of_a_family_heading_is_explained(tmp_path, capsys) -> None:
    """A shipped family is named by its budget configs' prefix and a ``*``, which the heading now
    says stands for the budget; a family that is one file (a script) has no ``*``."""
    write_sweep(tmp_path / "mmseg", "mmseg", {("linear", 0.05, None): 30.0}, toy_data(
        "mmseg", tmp_path / "data"))  # fmt: skip
    write_sweep(tmp_path / "digits", "pytorch", {("linear", 0.05, 0.1): 80.0}, tmp_path)
    code, out, err = call_tool(main, [str(tmp_path / "mmseg"), str(tmp_path / "digits")], capsys)
    assert code == 0, err
    heading = next(ln for ln in out.splitlines() if ln.startswith("### mIoU"))
    assert heading.startswith(
        "### mIoU: mmseg configs/mmseg/toy/pspnet_r18-toy_cityscapes_budget* ("
    ), heading
    assert heading.endswith(
        "; 1/1 runs finished; `*`: the budget, one config each "
        "(pspnet_r18-toy_cityscapes_budget5.py, ...))"
    ), heading
    assert "### top-1: pytorch examples/digits_budget.py (" in out


@pytest.mark.unit
def test_a_key_the_runs_logged_is_reported_where_the_default_metric_is_not(tmp_path, capsys):
    """``--metric KEY`` reads the sweep with that key alone (the route ``budgeted-rank --metric``
    shares): runs whose final line logs no ``val_accuracy`` but an F1 report the F1, on its
    0-1 scale."""
    out = tmp_path / "sweep"
    write_sweep(out, "pytorch", {("linear", 0.1, 0.3, s): 90.0 for s in (0, 1)}, tmp_path)
    for seed, f1 in ((0, 0.8125), (1, 0.8375)):
        log = out / f"linear_budget10_lr0.3_seed{seed}" / "metrics.jsonl"
        lines = log.read_text().splitlines()
        lines[-1] = json.dumps({"iteration": 172, "f1": f1, "final": True})
        log.write_text("\n".join(lines) + "\n")
    code, out_text, err = call_tool(main, [str(out), "--metric", "f1"], capsys)
    assert code == 0, err
    assert "| 0.1 | 172 | 0.8250 ± 0.0177 (2) |" in out_text, out_text
