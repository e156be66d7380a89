"""Find the shipped configs: in a checkout (``configs/``) or in an installed wheel
(``budgeted/configs/``), by path or by bare file name.

>>> find_config("mask_rcnn_budget10.yaml", "detectron2").name
'mask_rcnn_budget10.yaml'
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

__all__ = ["SEARCH_FOLDERS", "config_root", "find_config"]

_MMENGINE_CODEBASES = ("mmseg", "mmdet", "mmpretrain", "mmaction")
_REAL_IMAGE_SETS = tuple(f"mmpretrain/{name}" for name in ("digits", "mnist5k"))  # toys.image_sets
SEARCH_FOLDERS: dict[str, tuple[str, ...]] = {
    "detectron2": ("detectron2", "detectron2/toy", "detectron2/lazy"),
    **{codebase: (codebase, f"{codebase}/toy") for codebase in _MMENGINE_CODEBASES},
    "mmpretrain": ("mmpretrain", "mmpretrain/toy", *_REAL_IMAGE_SETS),
    # every MMEngine codebase: what budgeted-train-seg looks in
    "mmengine": (
        *(f for c in _MMENGINE_CODEBASES for f in (c, f"{c}/toy")),
        *_REAL_IMAGE_SETS,
    ),
}
"""Where a bare config name is looked up, per framework, in this order."""


def config_root() -> Path:
    """The folder that holds ``detectron2/`` and ``mmseg/`` configs.

    ``$BUDGETED_CONFIGS`` if set; else the checkout's ``configs/`` (source or editable install);
    else the ``configs/`` folder installed inside the package (``pip install .``).
    """
    env = os.environ.get("BUDGETED_CONFIGS")
    if env:
        return Path(env)
    here = Path(__file__).resolve().parent
    for candidate in (here.parent.parent / "configs", here / "configs"):
        if (candidate / "detectron2").is_dir():
            return candidate
    return here / "configs"


def find_config(
    name: str | os.PathLike[str], framework: str, *, kinds: Sequence[str] | None = None
) -> Path:
    """The config file ``name`` stands for.

    An existing path is taken as it is; a path with a folder that does not exist is tried once
    relative to the config root (``detectron2/toy/x.yaml``) and never replaced by a shipped file
    of the same name. A bare file name (``mask_rcnn_budget10.yaml``, also without its extension)
    is looked up in :data:`SEARCH_FOLDERS` ``[framework]``. An unknown or ambiguous name raises
    a one-line ``FileNotFoundError`` listing the candidates.

    Args:
        name (str or PathLike): a path, or a shipped config's bare name.
        framework (str): a key of :data:`SEARCH_FOLDERS`.
        kinds (Sequence[str], optional): the extensions a name without one stands for first: a
            tool's own kind of config (``(".py",)`` for Detectron2's LazyConfig tool,
            ``(".yaml",)`` for its yaml one), so a stem shared by a yaml and a LazyConfig is
            not ambiguous there; a name with no file of these kinds is looked up among every
            kind of the framework (the tool then names the kind it takes). Default: every kind.

    Example:
        >>> find_config("mask_rcnn_toy_budget10", "detectron2", kinds=(".py",)).name
        'mask_rcnn_toy_budget10.py'
    """
    path = Path(os.path.expanduser(os.fspath(name)))
    if path.is_file():
        return path
    if framework not in SEARCH_FOLDERS:
        raise ValueError(f"unknown framework {framework!r}; allowed: {', '.join(SEARCH_FOLDERS)}")
    root = config_root()
    exts = (".yaml", ".py") if framework == "detectron2" else (".py",)
    if path.suffix in exts:
        groups = [[path.name]]
    else:  # the tool's own kinds first, then every kind
        own = [ext for ext in exts if ext in (kinds or exts)]
        groups = [[path.name + ext for ext in own], [path.name + ext for ext in exts]]
    if len(path.parts) > 1:  # a path: as given, or relative to the config root; no guessing
        for n in dict.fromkeys(n for names in groups for n in names):  # in that order, once
            candidate = root / path.parent / n
            if candidate.is_file():
                return candidate
        raise FileNotFoundError(
            f"config {os.fspath(name)!r} does not exist (neither from the current folder nor "
            f"under {root}); give an existing path or a shipped config's bare name"
        )
    for names in groups:
        found = [root / f / n for f in SEARCH_FOLDERS[framework] for n in names]
        found = [p for p in found if p.is_file()]
        if found:
            return _one(name, found, root)
    raise FileNotFoundError(
        f"config {os.fspath(name)!r} does not exist, neither as a path nor under "
        f"{', '.join(str(root / f) for f in SEARCH_FOLDERS[framework])}; "
        f"candidates: {', '.join(_closest(path.stem, root, SEARCH_FOLDERS[framework], exts))}"
    )


def _one(name: str | os.PathLike[str], found: Sequence[Path], root: Path) -> Path:
    """The one file of ``found`` (the matches of bare name ``name``); several are ambiguous."""
    if len(found) == 1:
        return found[0]
    raise FileNotFoundError(
        f"config {os.fspath(name)!r} is ambiguous; candidates: "
        f"{', '.join(str(p.relative_to(root)) for p in found)}"
    )


def _closest(stem: str, root: Path, folders: Sequence[str], exts: Sequence[str]) -> list[str]:
    import difflib

    shipped = sorted(
        str(p.relative_to(root))
        for f in folders
        for p in (root / f).glob("*")
        if p.suffix in exts and not p.name.startswith("_")
    )
    by_stem = {Path(s).stem: s for s in shipped}
    close = difflib.get_close_matches(stem, list(by_stem), n=5, cutoff=0.5)
    return [by_stem[c] for c in close] or shipped[:5] or ["(none shipped)"]
