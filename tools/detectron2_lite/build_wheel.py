"""Run Detectron2's own setup.py without its C++ extension (the sdist has no C++ sources).

Usage, from the unpacked sdist: ``python build_wheel.py bdist_wheel -d DIST``. setup.py has no
switch to skip the extension, so ``setuptools.setup`` is wrapped to drop ``ext_modules`` and
``cmdclass``, and to name the distribution ``detectron2`` (as a full build is named, so that
``detectron2>=0.6`` requirements see it); no file of the sdist is edited.
"""

from __future__ import annotations

import runpy
import sys

import setuptools

_setup = setuptools.setup


def setup_without_extensions(**kwargs):
    kwargs.pop("ext_modules", None)
    kwargs.pop("cmdclass", None)
    kwargs["name"] = "detectron2"
    return _setup(**kwargs)


setuptools.setup = setup_without_extensions
sys.argv = ["setup.py", *sys.argv[1:]]
runpy.run_path("setup.py", run_name="__main__")
