"""budgeted-training: budget-aware learning-rate schedules for Detectron2, MMEngine and PyTorch."""

from pathlib import Path

from setuptools import find_packages, setup

version = {}
exec((Path(__file__).parent / "plugins/budgeted/version.py").read_text(), version)

setup(
    name="budgeted-training",
    version=version["__version__"],
    description="Budget-aware learning-rate schedules (Li, Yumer, Ramanan, ICLR 2020) "
    "for Detectron2, MMEngine/MMSegmentation and plain PyTorch",
    long_description=(Path(__file__).parent / "README.md").read_text(),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.9",
    package_dir={"": "plugins"},
    packages=find_packages("plugins"),
    install_requires=["torch>=1.10"],
    extras_require={
        "detectron2": ["detectron2>=0.6"],
        "mmseg": ["mmengine>=0.10", "mmcv>=2.0.0rc4,<2.2.0", "mmsegmentation>=1.0"],
    },
)
