"""Run Detectron2's own setup.py without its C++ extension (the sdist has no C++ sources).

Usage, from the unpacked sdist: ``python build_wheel.py bdist_wheel -d DIST``. setup.py has no
switch to skip the extension, so ``setuptools.setup`` is wrapped to drop ``ext_modules`` and
``cmdclass``, and to name the distribution ``detectron2`` (as a full build is named, so that
``detectron2>=0.6`` requirements see it).

One file of the unpacked sdist gets lines appended (:func:`fall_back_to_pycocotools`):
``detectron2/evaluation/fast_eval_api.py``, whose ``COCOeval_opt`` (the default of
``COCOEvaluator``, ``use_fast_impl=True``) needs the compiled ``_C``; in a lite build it becomes
pycocotools' ``COCOeval`` (the official API, as ``use_fast_impl=False``), so Detectron2's own
``tools/train_net.py`` evaluates instead of failing with ``MissingCompiledOp``.
"""

from __future__ import annotations

import os
import runpy
import sys

import setuptools

_setup = setuptools.setup


def setup_without_extensions(**kwargs):
    kwargs.pop("ext_modules", None)
    kwargs.pop("cmdclass", None)
    kwargs["name"] = "detectron2"
    return _setup(**kwargs)


FAST_EVAL_API = "detectron2/evaluation/fast_eval_api.py"
FALLBACK_MARK = "# budgeted-training lite build"
FALLBACK = f"""

{FALLBACK_MARK}: no compiled evaluator, so COCOeval_opt is pycocotools' COCOeval
if getattr(_C, "__budgeted_lite__", False):

    class COCOeval_opt(COCOeval):  # noqa: F811
        \"\"\"pycocotools' COCOeval: this lite Detectron2 has no compiled detectron2._C.\"\"\"

        def evaluate(self):
            logger.info(
                "lite Detectron2 build without compiled ops: COCO evaluation with pycocotools' "
                "COCOeval (the official API)"
            )
            super().evaluate()
"""


def fall_back_to_pycocotools(root: str = ".") -> None:
    """Append :data:`FALLBACK` to the sdist's ``fast_eval_api.py`` under ``root`` (once)."""
    path = os.path.join(root, FAST_EVAL_API)
    with open(path, encoding="utf-8") as f:
        if FALLBACK_MARK in f.read():
            return
    with open(path, "a", encoding="utf-8") as f:
        f.write(FALLBACK)


if __name__ == "__main__":
    fall_back_to_pycocotools()
    setuptools.setup = setup_without_extensions
    sys.argv = ["setup.py", *sys.argv[1:]]
    runpy.run_path("setup.py", run_name="__main__")
