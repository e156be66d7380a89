"""The one pre-flight of every training tool (:func:`preflight`): every check before anything
is written, in the tool's order.

A :class:`Tool` reads its config and names its output folder; its ``ORDER`` names its checks:
its own (``inputs``, ``budget``, ``file``: the file the run loads, ...) and the output folder's
(``writable``, ``new_run``, ``in_use``: :class:`~budgeted.control.folder.OutputFolder`). When two
inputs are bad, the first in the tool's order is the line: each tool keeps its own order.

Example:
    >>> import argparse, tempfile
    >>> from budgeted.runs import detectron2
    >>> class Demo(Tool):
    ...     ORDER = ("writable", "inputs", "new_run")
    ...     def load(self, args): return {"out": args.out}
    ...     def folder(self, cfg): return OutputFolder(cfg["out"], detectron2, "OUTPUT_DIR")
    ...     def inputs(self, cfg, args): print("inputs checked")
    >>> cfg = preflight(Demo(), argparse.Namespace(out=tempfile.mkdtemp(), resume=False))
    inputs checked
"""

from __future__ import annotations

import argparse
from typing import Any, ClassVar

from .folder import OutputFolder

__all__ = ["Tool", "preflight"]


class Tool:
    """What a training tool tells the pre-flight: its config, output folder and checks.

    Subclasses give :meth:`load` and :meth:`folder`, and override the checks they have (each
    ``(cfg, args) -> None``, refusing in one line); the folder's checks are here.
    """

    ORDER: ClassVar[tuple[str, ...]] = ("inputs", "writable", "budget", "new_run", "in_use", "file")
    """The checks, in the order in which the tool runs them."""

    def load(self, args: argparse.Namespace) -> Any:
        """The config of ``args``, every option applied."""
        raise NotImplementedError

    def folder(self, cfg: Any) -> OutputFolder:
        """The run's output folder."""
        raise NotImplementedError

    def training(self, args: argparse.Namespace) -> bool:
        """Whether ``args`` trains (a folder only evaluated is neither a new run nor locked)."""
        return not getattr(args, "eval_only", False)

    def inputs(self, cfg: Any, args: argparse.Namespace) -> None:
        """The data, model files and workers ``cfg`` and ``args`` name."""

    def budget(self, cfg: Any, args: argparse.Namespace) -> None:
        """The budget, schedule and loop length."""

    def file(self, cfg: Any, args: argparse.Namespace) -> None:
        """The file the run loads (weights, or the checkpoint it resumes)."""

    def writable(self, cfg: Any, args: argparse.Namespace) -> None:
        """Something can be created in the output folder."""
        self.folder(cfg).check_writable()

    def new_run(self, cfg: Any, args: argparse.Namespace) -> None:
        """No other run in the output folder, unless this one resumes."""
        if self.training(args):
            resume = bool(args.resume or getattr(args, "resume_from", None))
            self.folder(cfg).check_new_run(resume)

    def in_use(self, cfg: Any, args: argparse.Namespace) -> None:
        """No live process trains in the output folder."""
        if self.training(args):
            self.folder(cfg).check_not_in_use()


def preflight(tool: Tool, args: argparse.Namespace) -> Any:
    """The config of ``args`` after every check of ``tool``, in ``tool.ORDER``; nothing written.

    Raises:
        ValueError, FileNotFoundError: one line saying what is wrong and what is allowed.
    """
    cfg = tool.load(args)
    for check in tool.ORDER:
        getattr(tool, check)(cfg, args)
    return cfg
