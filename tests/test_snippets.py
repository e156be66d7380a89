"""Each fenced ```python block of README.md and docs/*.md runs verbatim (test id: file, ordinal).

Two kinds of blocks:

- A block whose first line is ``# MMEngine config`` is a config file. It is written to a temporary
  ``.py`` file, loaded with ``mmengine.Config.fromfile`` exactly as written (its ``_base_``, e.g.
  ``mmseg::...``, resolved; its ``custom_imports`` imported), and trained for
  :data:`TRAIN_ITERS` iterations with MMEngine's real ``Runner``. To run on a CPU in seconds, the
  model and the data (:data:`TOY_KEYS`) are those of the toy PSPNet
  (``configs/mmseg/toy/pspnet_r18-toy_cityscapes_base.py``) on a small toy Cityscapes set;
  everything else (schedulers, train loop and its ``max_iters``, optimizer, hooks) is the
  block's, and keys the block does not have at all (a block without ``_base_``) come from the toy
  config. Training stops after those iterations (a hook), so the schedulers are built for the
  budget the block states. The test checks the iterations ran and the schedulers built are the
  block's, their ``end`` the train loop's ``max_iters``.
- Every other block is a script: written to a file and run with this environment's python in a
  subprocess, which must exit 0.

Where scripts run: a temporary folder that mirrors the repository root (a symlink to each of its
top-level entries: ``configs/``, ``tools/``, ``plugins/``, ...) except the git-ignored output
folders, so that a snippet's relative paths (``configs/detectron2/...``) work and whatever it
writes (``./output/...``, ``work_dirs/``) lands in that temporary folder, never in the checkout.
``datasets/`` there is the session's toy data: ``toy_coco`` (:func:`make_toy_coco`, 64 px, a few
images; ``DETECTRON2_DATASETS`` points at it) and ``toy_cityscapes`` (the toy configs'
``data_root``). ``HOME`` and ``TMPDIR`` are temporary folders too.

A block that cannot be made runnable must not be fenced as ``python`` (use ``text``, ``yaml``,
``bash``, ...).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
CONFIG_MARK = "# MMEngine config"
TRAIN_ITERS = 2
TOY_BASE = REPO / "configs/mmseg/toy/pspnet_r18-toy_cityscapes_base.py"
TOY_KEYS = (
    "norm_cfg", "crop_size", "data_preprocessor", "model", "data_root", "train_pipeline",
    "test_pipeline", "train_dataloader", "val_dataloader", "test_dataloader", "val_evaluator",
    "test_evaluator", "env_cfg", "randomness",
)  # fmt: skip
"""The toy config's model and data, which replace a config block's."""
NOT_MIRRORED = {"output", "work_dirs", "datasets", "data"}
"""Top-level folders of the checkout a script's working folder does not link (written there)."""
TIMEOUT_S = 900


def python_blocks(path: Path) -> list[tuple[int, str]]:
    """``(line number, code)`` of each fenced ```python block of a Markdown file, in order."""
    blocks, code, start, indent = [], None, 0, ""
    for number, line in enumerate(path.read_text().splitlines(), 1):
        fence = re.match(r"^(\s*)```\s*(\S*)\s*$", line)
        if code is None:
            if fence and fence.group(2) == "python":
                code, start, indent = [], number, fence.group(1)
        elif fence and not fence.group(2):
            blocks.append((start, textwrap.dedent("\n".join(code)) + "\n"))
            code = None
        else:
            code.append(line[len(indent) :] if line.startswith(indent) else line)
    return blocks


SNIPPETS = [
    pytest.param(doc, line, code, id=f"{doc.relative_to(REPO)}#{ordinal}")
    for doc in DOCS
    for ordinal, (line, code) in enumerate(python_blocks(doc), 1)
]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The scripts' working folder (the repository mirrored), its toy datasets and HOME."""
    from budgeted.detectron2.toy import make_toy_coco
    from budgeted.toys.cityscapes import make_toy_cityscapes

    tmp = tmp_path_factory.mktemp("snippets")
    datasets = tmp / "datasets"
    make_toy_coco(str(datasets), num_train=8, num_val=4, size=64)
    make_toy_cityscapes(datasets / "toy_cityscapes", train_per_city=2, val_per_city=2)
    cwd = tmp / "repo"
    cwd.mkdir()
    for entry in REPO.iterdir():
        if entry.name not in NOT_MIRRORED and not entry.name.startswith("."):
            (cwd / entry.name).symlink_to(entry)
    (cwd / "datasets").symlink_to(datasets)
    for folder in ("home", "tmpdir"):
        (tmp / folder).mkdir()
    return {"cwd": cwd, "datasets": datasets, "home": tmp / "home", "tmpdir": tmp / "tmpdir",
            "tmp": tmp}  # fmt: skip


@pytest.mark.unit
def test_the_docs_have_python_blocks():
    """The extraction finds the blocks (a broken parser must not pass as "nothing to run")."""
    assert len(SNIPPETS) >= 4
    readme = python_blocks(REPO / "README.md")
    assert readme and all(code.strip() for _, code in readme)


@pytest.mark.e2e
@pytest.mark.parametrize(("doc", "line", "code"), SNIPPETS)
def test_snippet_runs(doc: Path, line: int, code: str, workspace: dict[str, Path]):
    where = f"{doc.relative_to(REPO)}:{line}"
    name = re.sub(r"\W", "_", where)
    env = {
        **os.environ,
        "DETECTRON2_DATASETS": str(workspace["datasets"]),
        "HOME": str(workspace["home"]),
        "MPLBACKEND": "Agg",
        "TMPDIR": str(workspace["tmpdir"]),
    }
    env.pop("BUDGETED_CONFIGS", None)
    # not beside datasets/ (sys.path[0]): transformers would import that folder as its library
    snippet = workspace["tmp"] / "scripts" / f"{name}.py"
    snippet.parent.mkdir(exist_ok=True)
    snippet.write_text(code)
    if code.startswith(CONFIG_MARK):
        work_dir = workspace["tmp"] / f"work_{name}"
        data = workspace["datasets"] / "toy_cityscapes"
        cmd = [sys.executable, __file__, str(snippet), str(data), str(work_dir)]
    else:
        cmd = [sys.executable, str(snippet)]
    done = subprocess.run(
        cmd, cwd=workspace["cwd"], env=env, capture_output=True, text=True, timeout=TIMEOUT_S
    )
    assert done.returncode == 0, (
        f"the python block at {where} failed (exit {done.returncode}):\n"
        f"{done.stdout[-1500:]}\n{done.stderr[-3000:]}"
    )
    if code.startswith(CONFIG_MARK):
        trained = json.loads(done.stdout.strip().splitlines()[-1])
        assert trained["iters"] == TRAIN_ITERS, trained
        assert trained["built"] == trained["stated"], trained
        assert all(end == trained["max_iters"] for end in trained["budget_ends"]), trained


def train_config_block(snippet: str, data: str, work_dir: str) -> dict:
    """Load a ``# MMEngine config`` block and train it :data:`TRAIN_ITERS` iterations with the
    toy model and data (see the module docstring); what ran, as a dict."""
    from mmengine.config import Config
    from mmengine.hooks import Hook
    from mmengine.registry import PARAM_SCHEDULERS
    from mmengine.runner import Runner

    class Stop(Exception):
        pass

    class StopAfter(Hook):
        priority = "LOWEST"  # after the scheduler and logger hooks of the iteration

        def __init__(self) -> None:
            self.iters = 0

        def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None) -> None:
            self.iters += 1
            if self.iters >= TRAIN_ITERS:
                raise Stop

    cfg = Config.fromfile(snippet)
    stated = [s["type"] for s in cfg.get("param_scheduler", [])]
    toy = Config.fromfile(str(TOY_BASE))
    for key in TOY_KEYS:
        if key in toy:
            cfg[key] = toy[key]
    for key in toy:
        if key not in cfg:
            cfg[key] = toy[key]
    for split in ("train", "val", "test"):
        cfg[f"{split}_dataloader"].dataset.data_root = data
    cfg.work_dir = work_dir
    cfg.launcher = "none"
    runner = Runner.from_cfg(cfg)
    stop = StopAfter()
    runner.register_hook(stop)
    with contextlib.suppress(Stop):
        runner.train()
    schedulers = runner.param_schedulers
    if isinstance(schedulers, dict):  # one list per optimizer
        schedulers = [s for group in schedulers.values() for s in group]
    classes = [PARAM_SCHEDULERS.get(name) for name in stated]
    return {
        "iters": stop.iters,
        "stated": stated,
        "built": [
            name if cls is not None and isinstance(s, cls) else type(s).__name__
            for name, cls, s in zip(stated, classes, schedulers)
        ]
        + [type(s).__name__ for s in schedulers[len(stated) :]],
        "budget_ends": [s.end for s in schedulers if type(s).__module__.startswith("budgeted.")],
        "max_iters": runner.max_iters,
    }


if __name__ == "__main__":  # test_snippet_runs runs a config block here, in its own process
    print(json.dumps(train_config_block(*sys.argv[1:4])))
