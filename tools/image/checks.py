#!/usr/bin/env python
"""The smoke checks of the cluster image, run inside it (``make image-smoke``, docs/docker.md).

    python tools/image/checks.py            # in the image's /workspace/budgeted-training

1. ``import budgeted, torch, mmcv.ops, mmseg, detectron2`` (and their versions);
2. ``--help`` of every console script setup.py declares (the installed ones must be the same);
3. the toy Mask R-CNN (``budgeted-train-net``, 5 % budget: 20 iterations) and the toy PSPNet
   (``budgeted-train-seg``, 1 %: 32 iterations) trained to their end on toy data written here
   (Detectron2's set under ``$DETECTRON2_DATASETS``, default ``/datasets``; MMSeg's passed as
   ``data_root``), evaluated, and the LR of every iteration equal to
   ``BASE_LR x budgeted.lr_multiplier(...)`` of the run's own saved config (Detectron2:
   metrics.json at iteration i; MMEngine: scalars.json at i + 1);
4. a refusal in one line: ``budgeted-train-seg ... --budget 1.5`` exits 2 with one stderr line.

Each check prints one ``[check]`` line; the first failure ends it with exit status 1. Only the
console scripts, ``import budgeted`` and the frameworks' own file formats are used, plus the
toy-data scripts and configs in this checkout. CPU only: it runs the same on a GPU node.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from importlib.metadata import distribution
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
D2_CONFIG = REPO / "configs/detectron2/toy/mask_rcnn_toy_budget5.yaml"
SEG_CONFIG = REPO / "configs/mmseg/toy/pspnet_r18-toy_cityscapes_budget1.py"


class CheckFailed(Exception):
    """A smoke check failed; the message says which and why."""


def passed(message: str) -> None:
    print(f"[check] ok: {message}", flush=True)


def run(cmd: list[str], *, timeout: float = 900) -> subprocess.CompletedProcess:
    """``cmd`` from the checkout, output captured (printed only when a check fails)."""
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2")}
    return subprocess.run(
        cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def run_ok(cmd: list[str], what: str) -> subprocess.CompletedProcess:
    """``cmd`` that must exit 0; else :class:`CheckFailed` with the end of its output."""
    result = run(cmd)
    if result.returncode != 0:
        tail = (result.stdout + result.stderr)[-3000:]
        raise CheckFailed(f"{what}: {' '.join(cmd)} exited {result.returncode}:\n{tail}")
    return result


def check_imports() -> None:
    code = (
        "import budgeted, torch, mmcv, mmcv.ops, mmengine, mmseg, detectron2\n"
        "print(f'budgeted {budgeted.__version__} | torch {torch.__version__} | "
        "mmcv {mmcv.__version__} (ops) | mmengine {mmengine.__version__} | "
        "mmseg {mmseg.__version__} | detectron2 {detectron2.__version__}')"
    )
    versions = run_ok([sys.executable, "-c", code], "imports").stdout.strip().splitlines()[-1]
    passed(f"imports: {versions}")


def declared_console_scripts() -> list[str]:
    """The console scripts setup.py declares (``name = module:function`` strings)."""
    return sorted(re.findall(r'"([\w-]+) = [\w.]+:\w+"', (REPO / "setup.py").read_text()))


def check_console_scripts() -> None:
    declared = declared_console_scripts()
    installed = sorted(
        ep.name for ep in distribution("budgeted-training").entry_points
        if ep.group == "console_scripts"
    )  # fmt: skip
    if not declared or installed != declared:
        raise CheckFailed(f"console scripts: setup.py declares {declared}, installed {installed}")
    for script in declared:
        result = run_ok([script, "--help"], f"{script} --help")
        if "usage:" not in result.stdout:
            raise CheckFailed(f"{script} --help printed no usage:\n{result.stdout[-1000:]}")
    passed(f"--help of all {len(declared)} console scripts: {', '.join(declared)}")


def check_lr_trace(logged: dict[int, float], expected: dict[int, float], what: str) -> None:
    """Every iteration's LR logged, each equal to the core's (relative 1e-9)."""
    if sorted(logged) != sorted(expected):
        raise CheckFailed(f"{what}: LR logged at {sorted(logged)}, expected {sorted(expected)}")
    for key, lr in expected.items():
        if not math.isclose(logged[key], lr, rel_tol=1e-9, abs_tol=1e-15):
            raise CheckFailed(
                f"{what}: LR {logged[key]!r} at {key}, budgeted.lr_multiplier says {lr!r}"
            )


def check_toy_mask_rcnn(work: Path) -> None:
    import yaml

    import budgeted

    datasets = os.environ.setdefault("DETECTRON2_DATASETS", "/datasets")  # the image's default
    run_ok([sys.executable, "tools/make_toy_coco.py"], "toy COCO set")
    out = work / "mask_rcnn"
    start = time.monotonic()
    run_ok(
        ["budgeted-train-net", "--config-file", str(D2_CONFIG),
         "SOLVER.BUDGET.WRITER_PERIOD", "1", "OUTPUT_DIR", str(out)],
        "toy Mask R-CNN",
    )  # fmt: skip
    seconds = time.monotonic() - start
    solver = yaml.safe_load((out / "config.yaml").read_text())["SOLVER"]
    if solver["LR_SCHEDULER_NAME"] != "BudgetLinear":
        raise CheckFailed(f"toy Mask R-CNN: scheduler {solver['LR_SCHEDULER_NAME']}")
    iters = solver["MAX_ITER"]
    rows = [json.loads(line) for line in (out / "metrics.json").read_text().splitlines()]
    expected = {
        i: solver["BASE_LR"] * budgeted.lr_multiplier(
            "linear", i, iters, warmup_iters=solver["WARMUP_ITERS"],
            warmup_factor=solver["WARMUP_FACTOR"], warmup_method=solver["WARMUP_METHOD"],
        )
        for i in range(iters)
    }  # fmt: skip
    check_lr_trace({r["iteration"]: r["lr"] for r in rows if "lr" in r}, expected, "Mask R-CNN")
    final = rows[-1]
    if not (out / "model_final.pth").is_file() or not math.isfinite(final.get("bbox/AP", math.nan)):
        raise CheckFailed(f"toy Mask R-CNN: no final checkpoint or box AP in {out}: {final}")
    passed(
        f"toy Mask R-CNN (budgeted-train-net, {D2_CONFIG.name}, data in {datasets}): {iters} "
        f"iterations in {seconds:.0f} s, LR = {solver['BASE_LR']:g} x lr_multiplier at all "
        f"{iters}, box AP {final['bbox/AP']:.2f}, mask AP {final['segm/AP']:.2f}"
    )


def mmengine_logged(work_dir: Path, key: str) -> dict[int, float]:
    """``{iteration (1-based): value}`` from MMEngine's ``vis_data/scalars.json``."""
    values = {}
    for path in sorted(work_dir.glob("*/vis_data/scalars.json")):
        for record in map(json.loads, path.read_text().splitlines()):
            if key in record:
                values[record.get("iter", record.get("step"))] = record[key]
    return values


def check_toy_pspnet(work: Path) -> None:
    from mmengine.config import Config

    import budgeted

    data_root = Path(os.environ["DETECTRON2_DATASETS"]) / "toy_cityscapes"
    run_ok([sys.executable, "tools/make_toy_cityscapes.py", str(data_root)], "toy Cityscapes set")
    work_dir = work / "pspnet"
    options = [
        f"{split}_dataloader.dataset.data_root={data_root}" for split in ("train", "val", "test")
    ]
    start = time.monotonic()
    run_ok(
        ["budgeted-train-seg", str(SEG_CONFIG), "--work-dir", str(work_dir),
         "--cfg-options", *options, "default_hooks.logger.interval=1"],
        "toy PSPNet",
    )  # fmt: skip
    seconds = time.monotonic() - start
    cfg = Config.fromfile(str(work_dir / SEG_CONFIG.name))  # the run's own saved config
    (scheduler,) = cfg.param_scheduler
    if scheduler["type"] != "BudgetLinearLR":
        raise CheckFailed(f"toy PSPNet: scheduler {scheduler['type']}")
    iters, base_lr = cfg.train_cfg.max_iters, cfg.optim_wrapper.optimizer.lr
    expected = {
        i + 1: base_lr * budgeted.lr_multiplier(
            "linear", i, iters, warmup_iters=scheduler["warmup_iters"],
            warmup_factor=scheduler["warmup_factor"],
        )
        for i in range(iters)
    }  # fmt: skip
    check_lr_trace(mmengine_logged(work_dir, "lr"), expected, "PSPNet")
    miou = mmengine_logged(work_dir, "mIoU")
    if not (work_dir / f"iter_{iters}.pth").is_file() or not miou:
        raise CheckFailed(f"toy PSPNet: no iter_{iters}.pth or no mIoU in {work_dir}")
    passed(
        f"toy PSPNet (budgeted-train-seg, {SEG_CONFIG.name}, data_root {data_root}): {iters} "
        f"iterations in {seconds:.0f} s, LR = {base_lr:g} x lr_multiplier at all {iters}, "
        f"mIoU {list(miou.values())[-1]:.2f}"
    )


def check_refusal(work: Path) -> None:
    work_dir = work / "refused"
    result = run(
        ["budgeted-train-seg", str(SEG_CONFIG), "--budget", "1.5", "--work-dir", str(work_dir)]
    )
    lines = result.stderr.splitlines()
    if result.returncode != 2 or len(lines) != 1 or "--budget: 1.5 is invalid" not in lines[0]:
        raise CheckFailed(f"refusal: exit {result.returncode}, stderr:\n{result.stderr[-2000:]}")
    if work_dir.exists():
        raise CheckFailed(f"refusal: {work_dir} was written")
    passed(f"a refusal in one line (exit 2, nothing written): {lines[0]}")


def main() -> int:
    start = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="budgeted-image-checks-"))
    checks: list[Any] = [check_imports, check_console_scripts]
    checks += [lambda: check_toy_mask_rcnn(work), lambda: check_toy_pspnet(work)]
    checks += [lambda: check_refusal(work)]
    try:
        for check in checks:
            check()
    except (CheckFailed, subprocess.TimeoutExpired) as err:
        print(f"[check] FAILED: {err}\n[check] its files: {work}", file=sys.stderr, flush=True)
        return 1
    shutil.rmtree(work)
    print(f"[check] all passed in {time.monotonic() - start:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
