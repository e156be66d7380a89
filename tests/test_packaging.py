"""``pip install .`` is a real install: wheel and sdist built from the checkout, installed into a
fresh venv with no framework (nothing downloaded: ``--no-deps --no-index``). One test resolves
the README's own-environment lines with pip against PyPI (``--dry-run``: metadata only).

The build runs on a copy of the build inputs (setup.py, pyproject.toml, MANIFEST.in, README.md,
LICENSE, plugins/, configs/) in a temporary folder, so that nothing is written into the checkout
and no stale ``build/`` folder can leak into the wheel. The venv is made with ``python -m venv
--without-pip`` and the wheel installed into it by this environment's pip (``pip --python``):
the same install as ``pip install`` inside it, seconds faster.
"""

from __future__ import annotations

import ast
import configparser
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
BUILD_INPUTS = ("setup.py", "pyproject.toml", "MANIFEST.in", "README.md", "LICENSE")
SCRIPTS = {
    "budgeted-train-net": "budgeted.entry_points:train_net",
    "budgeted-lazy-train-net": "budgeted.entry_points:lazy_train_net",
    "budgeted-train-seg": "budgeted.entry_points:train_seg",
    "budgeted-sweep": "budgeted.entry_points:sweep",
    "budgeted-report": "budgeted.entry_points:report",
    "budgeted-branch": "budgeted.entry_points:branch",
    "budgeted-rank": "budgeted.entry_points:rank",
    "budgeted-search": "budgeted.entry_points:search",
}
CONFIG_FOLDERS = (
    "detectron2",
    "detectron2/toy",
    "detectron2/lazy",
    "detectron2/_model_zoo",
    "detectron2/_model_zoo/COCO-InstanceSegmentation",
    "mmseg",
    "mmseg/_base_",
    "mmseg/toy",
    "mmseg/toy/_base_",
    *(f"{fw}{sub}" for fw in ("mmdet", "mmpretrain", "mmaction") for sub in ("", "/_base_", "/toy",
                                                                          "/toy/_base_")),
)  # fmt: skip
"""Folders of configs/ that must arrive, with their layout, in the installed package."""
ADAPTERS = (("budgeted.detectron2", "detectron2", ("detectron2",)),
            ("budgeted.mmengine", "mmseg", ("mmengine", "mmcv", "mmseg")),
            ("budgeted.lightning", "lightning", ("lightning",)),
            ("budgeted.transformers", "transformers", ("transformers",)))  # fmt: skip
"""(adapter, extra, framework modules one of which the one-line ImportError names)."""


def _skip_build_junk(folder: str, names: list[str]) -> set[str]:
    return {n for n in names if n == "__pycache__" or n.endswith((".pyc", ".egg-info"))}


def shipped_configs() -> list[str]:
    """Every file under the checkout's configs/, relative to it (no bytecode, no hidden files)."""
    return sorted(
        p.relative_to(REPO / "configs").as_posix()
        for p in (REPO / "configs").rglob("*")
        if p.is_file()
        and "__pycache__" not in p.parts
        and not p.name.startswith(".")
        and p.suffix not in (".pyc", ".pyo")
    )


def package_modules() -> list[str]:
    return sorted(
        p.relative_to(REPO / "plugins").as_posix()
        for p in (REPO / "plugins" / "budgeted").rglob("*.py")
        if "__pycache__" not in p.parts
    )


def run(cmd: list[str], cwd: Path, **kwargs) -> subprocess.CompletedProcess:
    """Run ``cmd``; on failure the assertion shows its output."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "BUDGETED_CONFIGS")}
    done = subprocess.run(
        cmd, cwd=cwd, capture_output=True, text=True, env={**env, **kwargs.pop("env", {})}
    )
    if kwargs.get("check", True):
        assert done.returncode == 0, f"{cmd} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The wheel (``pip wheel .``), the sdist, the wheel built from that sdist and the editable
    wheel, all from a copy of the build inputs."""
    tmp = tmp_path_factory.mktemp("packaging")
    src = tmp / "src"
    src.mkdir()
    for name in BUILD_INPUTS:
        shutil.copy2(REPO / name, src / name)
    for folder in ("plugins", "configs"):
        shutil.copytree(REPO / folder, src / folder, ignore=_skip_build_junk)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    wheel_args = ["wheel", "--no-deps", "--no-build-isolation", "--no-index"]
    run([*pip, *wheel_args, ".", "-w", str(tmp / "wheel")], cwd=src)
    hooks = (
        "import sys, setuptools.build_meta as b; _, sdist, editable = sys.argv; "  # the hooks
        "print(b.build_sdist(sdist) + ' ' + b.build_editable(editable))"  # rewrite sys.argv
    )
    sdist, editable = run(
        [sys.executable, "-c", hooks, str(tmp / "sdist"), str(tmp / "editable")], cwd=src
    ).stdout.split()[-2:]
    run([*pip, *wheel_args, str(tmp / "sdist" / sdist), "-w", str(tmp / "from_sdist")], cwd=tmp)
    (wheel,) = (tmp / "wheel").glob("*.whl")
    (from_sdist,) = (tmp / "from_sdist").glob("*.whl")
    return {
        "src": src,
        "wheel": wheel,
        "sdist": tmp / "sdist" / sdist,
        "from_sdist": from_sdist,
        "editable": tmp / "editable" / editable,
    }


@pytest.fixture(scope="module")
def venv(built: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv (no system site-packages, no framework, no torch) holding only the wheel."""
    root = tmp_path_factory.mktemp("venv") / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", str(root)], cwd=root.parent)
    python = root / "bin" / "python"
    run([sys.executable, "-m", "pip", "--disable-pip-version-check", "--python", str(python),
         "install", "--no-deps", "--no-index", str(built["wheel"])], cwd=root.parent)  # fmt: skip
    return root


def in_venv(venv: Path, code: str, check: bool = True) -> subprocess.CompletedProcess:
    return run([str(venv / "bin" / "python"), "-c", code], cwd=venv.parent, check=check)


@pytest.mark.e2e
def test_wheel_holds_the_package_the_configs_license_and_scripts(built):
    with zipfile.ZipFile(built["wheel"]) as whl:
        names = whl.namelist()
        dist_info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
        license_text = whl.read(f"{dist_info}/licenses/LICENSE")
        entry_points = whl.read(f"{dist_info}/entry_points.txt").decode()
        metadata = whl.read(f"{dist_info}/METADATA").decode()
    print("\n".join(names))  # the listing, for the record (pytest -s)
    configs = shipped_configs()
    prefix = "budgeted/configs/"
    installed = sorted(n[len(prefix) :] for n in names if n.startswith(prefix))
    for folder in CONFIG_FOLDERS:  # the layout is kept, folder by folder, file by file
        expected = [f for f in configs if f.rpartition("/")[0] == folder]
        assert expected, folder
        assert [f for f in installed if f.rpartition("/")[0] == folder] == expected, folder
    assert installed == configs
    assert sorted(n for n in names if n.endswith(".py") and not n.startswith("budgeted/configs/"))\
        == package_modules()  # fmt: skip
    assert not [n for n in names if "__pycache__" in n or n.startswith(("tests/", "tools/"))]
    assert license_text == (REPO / "LICENSE").read_bytes()
    assert b"Apache License" in license_text and b"Version 2.0, January 2004" in license_text
    parser = configparser.ConfigParser()
    parser.optionxform = str  # keep the scripts' names as they are
    parser.read_string(entry_points)
    assert dict(parser["console_scripts"]) == SCRIPTS
    assert "Requires-Dist: torch>=1.10\n" in metadata and "License: Apache-2.0" in metadata
    for extra in ("detectron2", "mmseg", "mmdet", "mmpretrain", "mmaction", "plot", "rank"):
        assert f"Provides-Extra: {extra}\n" in metadata
    for requirement in ('PyYAML>=5.1; extra == "detectron2"', 'numpy; extra == "mmseg"',
                        'mmdet>=3.0; extra == "mmdet"', 'mmpretrain>=1.0; extra == "mmpretrain"',
                        'mmaction2>=1.0; extra == "mmaction"', 'matplotlib; extra == "plot"',
                        'scipy; extra == "rank"'):  # fmt: skip
        assert f"Requires-Dist: {requirement}\n" in metadata


@pytest.mark.e2e
def test_sdist_holds_the_license_and_configs_and_builds_the_same_wheel(built):
    with tarfile.open(built["sdist"]) as sdist:
        names = {n.split("/", 1)[1] for n in sdist.getnames() if "/" in n}
    assert {"LICENSE", "README.md", "setup.py", "pyproject.toml", "MANIFEST.in"} <= names
    assert {f"configs/{f}" for f in shipped_configs()} <= names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    with zipfile.ZipFile(built["wheel"]) as a, zipfile.ZipFile(built["from_sdist"]) as b:
        assert sorted(a.namelist()) == sorted(b.namelist())


@pytest.mark.e2e
def test_editable_wheel_copies_no_configs(built):
    """``pip install -e .`` (tools/setup_env.sh) keeps reading the checkout's configs/."""
    with zipfile.ZipFile(built["editable"]) as whl:
        names = whl.namelist()
        (pth,) = [n for n in names if n.endswith(".pth")]
        assert whl.read(pth).decode().strip() == str(built["src"] / "plugins")
    assert not [n for n in names if "configs" in n]


@pytest.mark.e2e
def test_this_checkout_uses_its_own_configs():
    code = (
        "import json, budgeted, budgeted.config_files as c; "
        "print(json.dumps([budgeted.__file__, str(c.config_root())]))"
    )
    module, root = json.loads(run([sys.executable, "-c", code], cwd=REPO).stdout)
    if not Path(module).is_relative_to(REPO / "plugins"):
        pytest.skip(f"budgeted is imported from {module}, not from this checkout")
    assert Path(root) == REPO / "configs"


@pytest.mark.e2e
@pytest.mark.parametrize("tool", ["sweep", "report"])
def test_the_old_module_paths_of_the_tools_run_with_python_m(tool, tmp_path):
    """issue 40/2: ``python -m budgeted.sweep`` (the path before the layers) ran into
    ``'_AliasFinder' object has no attribute 'get_code'``."""
    old = run([sys.executable, "-m", f"budgeted.{tool}", "--help"], cwd=tmp_path)
    new = run([sys.executable, "-m", f"budgeted.experiments.{tool}", "--help"], cwd=tmp_path)
    assert old.stdout == new.stdout and old.stdout.startswith(f"usage: budgeted-{tool} ")
    assert old.stderr == ""


@pytest.mark.e2e
def test_fresh_venv_core_works_and_finds_the_installed_configs(venv):
    code = """
import json, sys
import budgeted
from budgeted.config_files import config_root, find_config
print(json.dumps({
    "m": budgeted.lr_multiplier("linear", iteration=700, total_iters=900),
    "iters": budgeted.budget_iters(fraction=0.1, full_iters=90000),
    "file": budgeted.__file__,
    "root": str(config_root()),
    "found": str(find_config("mask_rcnn_budget10.yaml", "detectron2")),
    "toy": str(find_config("pspnet_r18-toy_cityscapes_budget10_step", "mmseg")),
    "frameworks": sorted({"torch", "detectron2", "mmengine", "numpy", "yaml"} & set(sys.modules)),
}))
"""
    got = json.loads(in_venv(venv, code).stdout)
    assert got["m"] == pytest.approx(0.5) and got["iters"] == 9000
    site = Path(got["file"]).parent.parent
    assert site.name == "site-packages" and site.is_relative_to(venv)
    root = Path(got["root"])
    assert root == site / "budgeted" / "configs"
    installed = [p.relative_to(root) for p in root.rglob("*") if p.is_file()]
    assert sorted(p.as_posix() for p in installed if "__pycache__" not in p.parts) == (
        shipped_configs()  # pip compiles the .py configs too: __pycache__ is pip's
    )
    assert Path(got["found"]) == root / "detectron2" / "mask_rcnn_budget10.yaml"
    assert Path(got["toy"]) == root / "mmseg" / "toy" / "pspnet_r18-toy_cityscapes_budget10_step.py"
    assert got["frameworks"] == []
    assert in_venv(venv, "import torch", check=False).returncode != 0  # really no torch there
    star = in_venv(
        venv, "from budgeted import *; print(lr_multiplier('linear', 1, 2, warmup_iters=0))"
    )
    assert star.stdout.strip() == "0.5"  # __all__ names no torch-only class where torch is absent
    for name in ("BudgetLR", "BudgetTimeLR"):
        no_torch = in_venv(venv, f"import budgeted; budgeted.{name}", check=False)
        assert no_torch.returncode == 1
        assert no_torch.stderr.strip().splitlines()[-1] == (
            f"budgeted._require.MissingFrameworkError: budgeted.{name} needs 'torch', which is "
            "not installed; install it with pip install torch"
        )


@pytest.mark.e2e
@pytest.mark.parametrize(("adapter", "extra", "frameworks"), ADAPTERS)
def test_fresh_venv_adapter_without_its_framework_fails_in_one_line(venv, adapter, extra,
                                                                    frameworks):  # fmt: skip
    code = f"""
try:
    import {adapter}
except ImportError as err:
    print(repr(str(err)))
else:
    print("imported")
"""
    out = in_venv(venv, code).stdout.strip()
    assert out != "imported"
    message = ast.literal_eval(out)
    assert "\n" not in message
    assert message.startswith(tuple(f"{adapter} needs {m!r}" for m in frameworks)), message
    assert f'pip install "budgeted-training[{extra}]"' in message


@pytest.mark.e2e
def test_fresh_venv_console_scripts(venv, tmp_path):
    bin_dir = venv / "bin"
    for script in SCRIPTS:
        path = bin_dir / script
        assert path.is_file() and os.access(path, os.X_OK), script
        assert path.read_text().splitlines()[0] == f"#!{bin_dir / 'python'}"
    for script in ("budgeted-sweep", "budgeted-report", "budgeted-branch", "budgeted-rank",
                   "budgeted-search"):  # fmt: skip
        help_run = run([str(bin_dir / script), "--help"], cwd=tmp_path)
        assert help_run.stdout.startswith(f"usage: {script} ")
    (tmp_path / "mine.py").write_text("print('trains')\n")  # a search needs Optuna: its extra
    search = run([str(bin_dir / "budgeted-search"), "--script", "mine.py", "--full-iters", "1000",
                  "--budget", "0.1", "--lr-range", "0.01", "1", "--out", "found"], cwd=tmp_path,
                 check=False)  # fmt: skip
    assert (search.returncode, search.stderr) == (2, "search: error: budgeted.experiments.search "
        "needs 'optuna', which is not installed; install it with pip install "
        '"budgeted-training[search]"\n')  # fmt: skip
    assert not (tmp_path / "found").exists()
    dry = run([str(bin_dir / "budgeted-sweep"), "mmseg", "--toy", "--budgets", "0.05",
               "--data", str(tmp_path / "data"), "--out", str(tmp_path / "sweep"), "--dry-run"],
              cwd=tmp_path)  # fmt: skip
    head, *lines = dry.stdout.splitlines()
    assert head.startswith("[sweep] grid: 3 runs (0 finished, 3 to run or resume, 480 iterations)")
    assert lines.pop(0) == f"[sweep] would write the toy set in {tmp_path / 'data'}"
    configs = next(venv.glob("lib/python*/site-packages/budgeted/configs"))
    assert [line.split()[:3] for line in lines] == [
        [f"{s}_budget5:", "budgeted-train-seg",
         str(configs / f"mmseg/toy/pspnet_r18-toy_cityscapes_budget5{suffix}.py")]
        for s, suffix in (("linear", ""), ("poly", "_poly"), ("step", "_step"))
    ]  # fmt: skip
    for script, (adapter, extra, _) in (
        ("budgeted-train-net", ADAPTERS[0]),
        ("budgeted-lazy-train-net", ADAPTERS[0]),
        ("budgeted-train-seg", ADAPTERS[1]),
    ):
        failed = run([str(bin_dir / script), "--help"], cwd=tmp_path, check=False)
        assert failed.returncode == 1 and failed.stdout == ""
        assert failed.stderr.count("\n") == 1, failed.stderr[-2000:]  # one line, no traceback
        assert failed.stderr.startswith(f"{script}: {adapter} needs "), failed.stderr
        assert f'pip install "budgeted-training[{extra}]"' in failed.stderr


@pytest.mark.e2e
def test_fresh_venv_report_of_a_sweep_needs_no_framework(venv, tmp_path):
    """Reading results is reading files: a Detectron2 sweep's report needs no Detectron2 (or
    torch; budgeted.runs reads run folders as data), only PyYAML for its config.yaml: without
    it, one line says what to install."""
    sweep = tmp_path / "sweep"
    run_dir = sweep / "linear_budget1"
    run_dir.mkdir(parents=True)
    (sweep / "sweep.json").write_text(json.dumps({
        "framework": "detectron2",
        "family": "configs/detectron2/toy/mask_rcnn_toy_budget",
        "cells": [["linear", 0.01]],
    }))  # fmt: skip
    (run_dir / "config.yaml").write_text("SOLVER:\n  MAX_ITER: 4\n")
    records = [{"iteration": i, "lr": 0.01, "total_loss": 1.0} for i in range(4)]
    records.append({"iteration": 3, "bbox/AP": 12.5, "segm/AP": 10.0})
    (run_dir / "metrics.json").write_text("".join(json.dumps(r) + "\n" for r in records))
    assert in_venv(venv, "import detectron2", check=False).returncode != 0
    report = run([str(venv / "bin" / "budgeted-report"), str(sweep)], cwd=tmp_path, check=False)
    assert report.returncode == 2 and report.stdout == ""
    assert report.stderr == (
        "report: error: reading a Detectron2 run folder (its config.yaml) needs 'yaml', which is "
        "not installed; install it with pip install pyyaml\n"
    )
    # PyYAML alone (a copy of this environment's pure-Python yaml package), nothing else
    only_yaml = tmp_path / "only_yaml"
    shutil.copytree(Path(yaml.__file__).parent, only_yaml / "yaml")
    pth = next(venv.glob("lib/python*/site-packages")) / "only_yaml.pth"
    pth.write_text(f"{only_yaml}\n")
    try:
        report = run([str(venv / "bin" / "budgeted-report"), str(sweep)], cwd=tmp_path, check=False)
        assert report.returncode == 0 and report.stderr == "", report.stderr
        assert "1/1 runs finished" in report.stdout and "12.50" in report.stdout
        assert in_venv(venv, "import detectron2", check=False).returncode != 0  # still none
    finally:
        pth.unlink()


@pytest.mark.e2e
def test_installed_configs_load_by_name_with_the_frameworks(built, tmp_path):
    """The wheel's configs, installed (``pip install --target``) beside this environment's
    frameworks, load by bare name: their ``_BASE_`` / ``_base_`` paths survived the move."""
    target = tmp_path / "site"
    run([sys.executable, "-m", "pip", "--disable-pip-version-check", "install", "--no-deps",
         "--no-index", "--target", str(target), str(built["wheel"])], cwd=tmp_path)  # fmt: skip
    code = """
import json, warnings
warnings.simplefilter("ignore")
from mmengine.config import Config
import budgeted.detectron2 as bd2
from budgeted.config_files import config_root, find_config
mask = bd2.load_config("mask_rcnn_budget10.yaml")
toy = bd2.load_config("mask_rcnn_toy_budget10_step")
seg_path = find_config("pspnet_r18-toy_cityscapes_budget10_step", "mmseg")
seg = Config.fromfile(str(seg_path))
real = Config.fromfile(str(find_config("pspnet_r50-d8_cityscapes_budget10", "mmseg")))
print(json.dumps({
    "root": str(config_root()), "seg": str(seg_path),
    "mask": [mask.SOLVER.MAX_ITER, mask.SOLVER.LR_SCHEDULER_NAME, mask.MODEL.META_ARCHITECTURE],
    "toy": [toy.SOLVER.MAX_ITER, toy.SOLVER.LR_SCHEDULER_NAME],
    "seg_cfg": [seg.train_cfg.max_iters, seg.param_scheduler[0]["type"], seg.model.type],
    "real": [real.train_cfg.max_iters, real.model.backbone.depth],
}))
"""
    out = run([sys.executable, "-c", code], cwd=tmp_path, env={"PYTHONPATH": str(target)})
    got = json.loads(out.stdout.strip().splitlines()[-1])
    root = target / "budgeted" / "configs"
    assert Path(got["root"]) == root
    assert Path(got["seg"]) == root / "mmseg/toy/pspnet_r18-toy_cityscapes_budget10_step.py"
    assert got["mask"] == [9000, "BudgetLinear", "GeneralizedRCNN"]
    assert got["toy"] == [40, "BudgetStep"]
    assert got["seg_cfg"] == [320, "BudgetStepLR", "EncoderDecoder"]
    assert got["real"] == [8000, 50]


DETECTRON2_0_6_RUNS_WITH = {"numpy": "<1.24", "pillow": "<10", "setuptools": "<82"}
"""What Detectron2 0.6 runs with, unpatched (../shared/ENVIRONMENT.md, "Measured"): numpy 1.24
removed ``np.int`` (``data/build.py``, every training loader), Pillow 10 ``Image.LINEAR`` (an
import-time default), setuptools 82 ``pkg_resources`` (``model_zoo``)."""


def _name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


class MetadataVenv:
    """A fresh venv whose site-packages holds installed distributions' metadata only (a
    ``.dist-info`` with METADATA each): what pip resolves a next ``pip install`` against, without
    downloading or installing a package. ``install(requirement)`` resolves it there
    (``pip install --dry-run --report``, the real resolver against the real indexes) and records
    what pip would install, replacing the versions it would replace."""

    def __init__(self, root: Path) -> None:
        run([sys.executable, "-m", "venv", "--without-pip", str(root)], cwd=root.parent)
        self.python = root / "bin" / "python"
        self.site = next(root.glob("lib/python*/site-packages"))
        self.versions: dict[str, str] = {}
        self.folders: dict[str, Path] = {}
        self.steps = 0

    def pip(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
        return run([*pip, "--python", str(self.python), *args], cwd=self.site, check=check)

    def install(self, requirement: str) -> dict[str, str]:
        self.steps += 1
        report = self.site.parent / f"report{self.steps}.json"
        self.pip("install", "--dry-run", "--quiet", "--report", str(report), requirement)
        installed = {}
        for item in json.loads(report.read_text())["install"]:
            meta = item["metadata"]
            name = _name(meta["name"])
            if name in self.folders:  # pip would replace it
                shutil.rmtree(self.folders[name])
            info = self.site / f"{meta['name'].replace('-', '_')}-{meta['version']}.dist-info"
            info.mkdir()
            self.folders[name] = info
            lines = [
                "Metadata-Version: 2.1",
                f"Name: {meta['name']}",
                f"Version: {meta['version']}",
            ]
            lines += [f"Requires-Dist: {r}" for r in meta.get("requires_dist", [])]
            lines += [f"Provides-Extra: {e}" for e in meta.get("provides_extra", [])]
            (info / "METADATA").write_text("\n".join(lines) + "\n")
            (info / "RECORD").write_text("")
            installed[name] = self.versions[name] = meta["version"]
        return installed


def _readme_installs(wheel: Path) -> dict[str, str]:
    """The README's ``pip install`` lines (Install), each as the requirement it installs from
    the built wheel: ``{".": "<wheel>", ".[detectron2]": "<wheel>[detectron2]", ...}``."""
    install = (REPO / "README.md").read_text().split("\n## Install\n", 1)[1].split("\n## ", 1)[0]
    found = re.findall(r'^pip install ("?)(\.(?:\[[\w,]+\])?)\1\s', install, flags=re.M)
    return {target: f"{wheel}{target[1:]}" for _, target in found}


def _detectron2_stand_in(folder: Path) -> Path:
    """A wheel holding this environment's Detectron2 metadata only (Detectron2 is not on PyPI):
    "installing Detectron2 itself" resolves its real requirements."""
    from importlib.metadata import distribution

    d2 = distribution("detectron2")
    wheel = folder / f"detectron2-{d2.version}-py3-none-any.whl"
    info = f"detectron2-{d2.version}.dist-info"
    with zipfile.ZipFile(wheel, "w") as whl:
        whl.writestr(f"{info}/METADATA", d2.read_text("METADATA"))
        whl.writestr(
            f"{info}/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        )
        whl.writestr(f"{info}/RECORD", "")
    return wheel


@pytest.mark.e2e
def test_the_readmes_detectron2_route_ends_in_an_environment_detectron2_runs_in(built, tmp_path):
    """Issue 40, item 3: in a fresh venv, ``pip install .`` pulled numpy 2.4.6 and scipy 1.17.1,
    Detectron2's own install Pillow 13, and ``pip install ".[detectron2]"`` kept them: Detectron2
    0.6 does not run there. The README's lines, resolved in order by pip against PyPI (metadata
    only, nothing installed), now end with the numpy, Pillow and setuptools Detectron2 0.6 runs
    with, ``pip check`` clean; so do the other PyPI-only extras beside it, and the pinned stack
    (requirements/constraints.txt) meets every extra's requirements."""
    from packaging.requirements import Requirement
    from packaging.specifiers import SpecifierSet

    lines = _readme_installs(built["wheel"])
    assert {".", ".[detectron2]"} <= set(lines), lines
    venv = MetadataVenv(tmp_path / "venv")
    venv.install(lines["."])
    assert SpecifierSet(">=1.24").contains(venv.versions["numpy"])  # the case of the issue
    venv.install(str(_detectron2_stand_in(tmp_path)))  # "after installing Detectron2 itself"
    venv.install(lines[".[detectron2]"])
    for name, allowed in DETECTRON2_0_6_RUNS_WITH.items():
        assert SpecifierSet(allowed).contains(venv.versions[name]), (name, venv.versions[name])
    assert venv.pip("check", check=False).stdout == "No broken requirements found.\n"
    venv.install(f"{built['wheel']}[detectron2,plot,digits,mnist,rank,slurm,schedulefree]")
    for name, allowed in DETECTRON2_0_6_RUNS_WITH.items():
        assert SpecifierSet(allowed).contains(venv.versions[name]), (name, venv.versions[name])
    assert venv.pip("check", check=False).stdout == "No broken requirements found.\n"

    pins = dict(
        line.split("==", 1)
        for line in (REPO / "requirements/constraints.txt").read_text().splitlines()
        if "==" in line and not line.startswith("#")
    )
    pins = {_name(k): v.strip() for k, v in pins.items()}
    with zipfile.ZipFile(built["wheel"]) as whl:
        metadata = next(whl.read(n) for n in whl.namelist() if n.endswith("/METADATA")).decode()
    requires = [Requirement(line[len("Requires-Dist: ") :]) for line in metadata.splitlines()
                if line.startswith("Requires-Dist: ")]  # fmt: skip
    unmet = [str(r) for r in requires if _name(r.name) in pins
             and not r.specifier.contains(pins[_name(r.name)], prereleases=True)]  # fmt: skip
    assert unmet == []
