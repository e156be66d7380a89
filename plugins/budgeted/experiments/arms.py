"""A sweep's arms: the words of ``budgeted-sweep --schedules`` and ``--optimizers``, as data.

A cell's text (what its record keeps as ``schedule``) is ``ARM`` or ``ARM@OPTIMIZER``:

- ``NAME`` or ``NAME:KEY=VALUE[,KEY=VALUE...]``: a registered schedule with its parameters
  (:func:`~budgeted.schedules.parse_arm`), e.g. ``wsd:decay=sqrt``, ``sgdr:restarts=2``;
- ``schedulefree``: the schedule-free form of the cell's optimizer (default ``sgd``), no LR
  schedule (Defazio et al. 2024), at the budget's iterations;
- ``subset``: the step baseline at the budget's iterations on a random ``max(1, round(B N))`` of
  the ``N`` training images (the paper's data-subsampling baseline: the full schedule in epochs
  on ``B N`` images).

The cell's folder is its text with each of ``: = , @`` written ``-`` (:attr:`Arm.folder`).

>>> arm = parse_cell("wsd:decay=sqrt@adamw")
>>> arm.schedule, arm.params, arm.optimizer, arm.folder
('wsd', {'decay': 'sqrt'}, 'adamw', 'wsd-decay-sqrt-adamw')
>>> parse_cell("subset").schedule, parse_cell("schedulefree").tool_schedule
('step', 'constant')
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ..optimizers import OPTIMIZERS, SCHEDULE_FREE
from ..schedules import arm_text, parse_arm, schedule_names
from .families import FRAMEWORKS

__all__ = [
    "ARM_FRAMEWORKS", "SPECIAL_ARMS", "Arm", "arm_flags", "cell_texts", "check_arm", "folder_text",
    "lrs_for", "param_overrides", "parse_cell", "validate_overrides",
]  # fmt: skip

SPECIAL_ARMS: dict[str, str] = {"schedulefree": "constant", "subset": "step"}
"""An arm that is not a schedule -> the registered schedule its cells run under: schedule-free
has no LR schedule (the tools' ``--schedule constant``), the subset baseline is ``step``."""
ARM_FRAMEWORKS: tuple[str, ...] = tuple(f for f in (*FRAMEWORKS, "mmengine") if f != "detectron2")
"""Where ``schedulefree``, ``subset`` and ``--optimizers`` run: plain-PyTorch scripts (their
``--optimizer``, ``--schedule-free``, ``--subset``) and MMEngine codebases (those of
``budgeted-train-seg``); a Detectron2 trainer builds its optimizer and data loader itself."""
_TEXT = re.compile(r"[A-Za-z0-9_.+:=,@-]{1,200}")
_SYNTAX = "NAME[:KEY=VALUE,...][@OPTIMIZER], schedulefree or subset, e.g. wsd:decay=sqrt"


@dataclass(frozen=True)
class Arm:
    """One cell's text read: its arm ``word`` (without ``@optimizer``), the registered
    ``schedule`` it trains under with its ``params``, and its ``optimizer`` (None: the config's or
    script's own; ``schedulefree`` without one trains ``sgd``'s form)."""

    text: str
    word: str
    schedule: str
    params: dict[str, Any] = field(default_factory=dict)
    optimizer: str | None = None

    @property
    def kind(self) -> str:
        """``schedulefree``, ``subset`` or ``schedule``."""
        return self.word if self.word in SPECIAL_ARMS else "schedule"

    @property
    def tool_schedule(self) -> str:
        """What a tool's ``--schedule`` gets: the arm with its parameters, or the special arm's
        schedule (``constant``, ``step``)."""
        return SPECIAL_ARMS.get(self.word, self.word)

    @property
    def folder(self) -> str:
        """The cell folder's text (:func:`folder_text`)."""
        return folder_text(self.text)


def folder_text(text: str) -> str:
    """A cell's text as its folder names it: each of ``: = , @`` written ``-``."""
    return re.sub(r"[:=,@]", "-", text)


def parse_cell(text: Any) -> Arm:
    """A cell's text read and checked (``ValueError``, one line naming it and what is allowed),
    its schedule's text made the one text of that schedule (:func:`~budgeted.schedules.arm_text`:
    ``wsd:decay=linear`` and ``wsd:cooldown=0.2`` are ``wsd``), so one schedule is one cell.

    >>> parse_cell("sgdr:restarts=2").params, parse_cell("wsd:decay=sqrt,cooldown=0.2@sgd").text
    ({'restarts': 2}, 'wsd:decay=sqrt@sgd')
    >>> parse_cell("cosine@lion")
    Traceback (most recent call last):
    ValueError: optimizer 'lion' of 'cosine@lion' is not known; allowed: sgd, adamw, amsgrad
    """
    if not isinstance(text, str) or not _TEXT.fullmatch(text):
        raise ValueError(f"schedule {text!r} is invalid; allowed: {_SYNTAX}")
    word, at, optimizer = text.partition("@")
    if at and optimizer not in OPTIMIZERS:
        raise ValueError(
            f"optimizer {optimizer!r} of {text!r} is not known; allowed: {', '.join(OPTIMIZERS)}"
        )
    if word in SPECIAL_ARMS:
        if word == "schedulefree" and (optimizer or "sgd") not in SCHEDULE_FREE:
            forms = ", ".join(f"schedulefree@{name}" for name in SCHEDULE_FREE)
            raise ValueError(
                f"{text!r}: optimizer {optimizer!r} has no schedule-free form; allowed: {forms}"
            )
        return Arm(text, word, SPECIAL_ARMS[word], {}, optimizer or None)
    name = word.partition(":")[0]
    if name in SPECIAL_ARMS:
        raise ValueError(f"arm {word!r} takes no parameters; allowed: {name}")
    if name not in schedule_names():
        raise ValueError(
            f"schedule {name!r} is not a registered schedule or arm; allowed: "
            f"{', '.join((*schedule_names(), *SPECIAL_ARMS))} (NAME[:KEY=VALUE,...], e.g. "
            "wsd:decay=sqrt)"
        )
    name, params = parse_arm(word)
    word = arm_text(name, params)  # one text per schedule: its defaults dropped, keys in order
    return Arm(word + at + optimizer, word, name, parse_arm(word)[1], optimizer or None)


def cell_texts(schedules: list[str], optimizers: list[str] | None) -> list[str]:
    """The cells' texts of ``--schedules`` x ``--optimizers`` (``ARM@OPTIMIZER``; without
    ``--optimizers`` the arms alone), each checked and written as its one text
    (:func:`parse_cell`), each once.

    >>> cell_texts(["linear", "schedulefree"], ["sgd", "adamw"])
    ['linear@sgd', 'linear@adamw', 'schedulefree@sgd', 'schedulefree@adamw']
    """
    for name in optimizers or ():
        if name not in OPTIMIZERS:
            raise ValueError(f"--optimizers {name!r} is not a known optimizer; allowed: "
                             f"{', '.join(OPTIMIZERS)}")  # fmt: skip
    for word in schedules:
        if "@" in word:
            raise ValueError(f"--schedules {word!r} names an optimizer; allowed: the arm alone "
                             f"with --optimizers {word.rpartition('@')[2]}")  # fmt: skip
    texts = [f"{s}@{o}" for s in schedules for o in optimizers] if optimizers else list(schedules)
    return list(dict.fromkeys(parse_cell(text).text for text in texts))  # one text a cell


def check_arm(arm: Arm, framework: str) -> None:
    """Refuse (``ValueError``, one line) an arm ``framework``'s tools cannot train."""
    if framework in ARM_FRAMEWORKS:
        return
    what = "--optimizers" if arm.kind == "schedule" and arm.optimizer else arm.kind
    if what != "schedule":
        raise ValueError(
            f"{what} ({arm.text}) is refused for {framework} families: its trainer builds the "
            "optimizer and the training set itself; allowed: plain-PyTorch scripts and MMEngine "
            f"codebases ({', '.join(ARM_FRAMEWORKS)})"
        )


def lrs_for(given: list[str], texts: list[str]) -> dict[str, list[str]]:
    """``--lrs-for WORD=LR[,LR...]`` (repeatable) as WORD -> its LRs' texts; a WORD must be a
    cell's text, arm or optimizer of the grid, and given once (``ValueError``, one line).

    >>> lrs_for(["adamw=0.001,0.003"], ["linear@sgd", "linear@adamw"])
    {'adamw': ['0.001', '0.003']}
    """
    words = {p for t in texts for p in (t, *t.split("@"))}
    found: dict[str, list[str]] = {}
    for item in given:
        word, eq, values = item.partition("=")
        if not eq or not values:
            raise ValueError(f"--lrs-for {item!r} is invalid; allowed: WORD=LR[,LR...], e.g. "
                             "adamw=0.001,0.003")  # fmt: skip
        if word not in words:
            raise ValueError(f"--lrs-for {word!r} is no cell, arm or optimizer of the grid; "
                             f"allowed: {', '.join(sorted(words))}")  # fmt: skip
        if word in found:
            raise ValueError(f"--lrs-for {word!r} is given twice ({word}={','.join(found[word])} "
                             f"and {item}); allowed: one --lrs-for per word, its LRs together "
                             f"({word}={','.join([*found[word], values])})")  # fmt: skip
        found[word] = values.split(",")
    return found


def param_overrides(tool: str, schedule: str, params: dict[str, Any]) -> list[str]:
    """A schedule's parameters as ``tool``'s overrides: Detectron2's ``SOLVER.BUDGET.<NAME>_<KEY>``
    (:func:`budgeted.detectron2.config.param_key`), MMEngine's ``param_scheduler.0.KEY=VALUE``.

    >>> param_overrides("mmseg", "wsd", {"decay": "sqrt", "cooldown": 0.1})
    ['param_scheduler.0.decay=sqrt', 'param_scheduler.0.cooldown=0.1']
    """
    if not params:
        return []
    if tool == "detectron2":
        from ..detectron2.config import param_key  # a Detectron2 sweep: its tool imports it too

        return [t for k, v in params.items() for t in (param_key(schedule, k), _value(v))]
    return [f"param_scheduler.0.{k}={_value(v)}" for k, v in params.items()]


def _value(value: Any) -> str:
    """An override's value: a list as ``[a,b]``, else its text."""
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(f"{v:g}" for v in value) + "]"
    return str(value)


def arm_flags(arm: Arm, budget: float) -> list[str]:
    """The training tool's flags of an arm (plain-PyTorch scripts and ``budgeted-train-seg``
    alike): ``--optimizer O``, ``--schedule-free``, ``--subset B``.

    >>> arm_flags(parse_cell("schedulefree"), 0.1), arm_flags(parse_cell("subset@adamw"), 0.1)
    (['--optimizer', 'sgd', '--schedule-free'], ['--optimizer', 'adamw', '--subset', '0.1'])
    """
    optimizer = arm.optimizer or ("sgd" if arm.kind == "schedulefree" else None)
    flags = ["--optimizer", optimizer] if optimizer else []
    if arm.kind == "schedulefree":
        flags.append("--schedule-free")
    if arm.kind == "subset":
        flags += ["--subset", f"{budget:.12g}"]
    return flags


def validate_overrides(tool: str, every: int | None) -> list[str]:
    """``--validate-every K`` in ``tool``'s syntax (none without it).

    >>> validate_overrides("detectron2", 50), validate_overrides("detectron2-lazy", 50)
    (['TEST.EVAL_PERIOD', '50'], ['train.eval_period=50'])
    """
    if every is None:
        return []
    if tool == "detectron2":
        return ["TEST.EVAL_PERIOD", str(every)]
    if tool == "detectron2-lazy":
        return [f"train.eval_period={every}"]
    return ["--validate-every", str(every)]
