"""The console scripts of setup.py (:data:`budgeted.entry_points.SCRIPTS`): every option a tool
takes is in its ``--help`` (issue 40/7: ``budgeted-sweep --status`` worked but its help did not
name it). The parsers are the tools' own objects, taken in this process as each tool parses
its command line."""

from __future__ import annotations

import argparse
import ast
import hashlib
import importlib
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from budgeted.entry_points import SCRIPTS

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[1]
ROUTES: dict[str, list[list[str]]] = {"budgeted-sweep": [["--status", "OUT"]]}
"""Command lines, beside ``--help``, that a tool parses another way: each parser they reach must
be in the help too."""


def setup_scripts() -> dict[str, str]:
    """``console_scripts`` of setup.py: script -> ``module:function``."""
    for node in ast.walk(ast.parse((REPO / "setup.py").read_text())):
        if isinstance(node, ast.Dict) and any(
            isinstance(k, ast.Constant) and k.value == "console_scripts" for k in node.keys
        ):
            lines = ast.literal_eval(node.values[0])
            return dict(tuple(p.strip() for p in line.split("=", 1)) for line in lines)
    raise AssertionError("setup.py names no console_scripts")


class _Parsed(BaseException):
    """Raised where a tool parses its command line (not an Exception: no tool catches it)."""

    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self.parser = parser


def parser_of(script: str, argv: list[str], monkeypatch: pytest.MonkeyPatch):
    """The parser ``script``'s tool parses ``argv`` with, stopped there (nothing runs)."""
    module, function = SCRIPTS[script]
    tool = getattr(importlib.import_module(module), function)

    def stop(self: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
        raise _Parsed(self)

    with monkeypatch.context() as patch:
        patch.setattr(argparse.ArgumentParser, "parse_known_args", stop)
        try:
            tool(argv)
        except _Parsed as parsed:
            return parsed.parser
    raise AssertionError(f"{script} {' '.join(argv)} parsed no command line")


def options(parser: argparse.ArgumentParser) -> Iterator[str]:
    for action in parser._actions:  # argparse keeps them there; no public list
        yield from action.option_strings


def test_the_scripts_are_setup_pys():
    assert sorted(setup_scripts()) == sorted(SCRIPTS)
    assert {s: f"budgeted.entry_points:{s.removeprefix('budgeted-').replace('-', '_')}"
            for s in SCRIPTS} == setup_scripts()  # fmt: skip


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_every_option_a_tool_takes_is_in_its_help(script, monkeypatch):
    shown = parser_of(script, ["--help"], monkeypatch).format_help()
    parsers = [parser_of(script, argv, monkeypatch) for argv in [["--help"], *ROUTES.get(script,
               [])]]  # fmt: skip
    taken = {option for parser in parsers for option in options(parser)}
    missing = sorted(
        o for o in taken if not re.search(rf"(?<![\w-]){re.escape(o)}(?![\w-])", shown)
    )
    assert missing == [], f"{script} --help does not name {missing}"
    assert len(taken) > 1


def _without(monkeypatch: pytest.MonkeyPatch, framework: str) -> None:
    """This process as if ``framework`` were not installed: its modules (and our adapter of it,
    imported again) not found."""
    import sys

    for name in [n for n in sys.modules if n.split(".")[0] == framework]:
        monkeypatch.setitem(sys.modules, name, None)  # import of it halted; find_spec: None
    monkeypatch.setitem(sys.modules, framework, None)
    for name in [n for n in sys.modules if n.startswith(f"budgeted.{framework}")]:
        monkeypatch.delitem(sys.modules, name)


@pytest.mark.parametrize(
    ("framework", "make", "hint"),
    [
        ("mmengine", "fcn_config", 'pip install "budgeted-training[mmseg]" (or [mmdet], '
         "[mmpretrain], [mmaction]: your codebase's)"),
        ("detectron2", "d2_yaml", 'pip install "budgeted-training[detectron2]" (Detectron2 '
         "itself is not on PyPI: see the README)"),
    ],
)  # fmt: skip
def test_a_config_whose_framework_is_missing_names_its_extra_in_one_line(
    framework, make, hint, tmp_path, monkeypatch, capsys
):
    """Issue 52 (confusions): ``--config`` of an MMEngine config without MMEngine said
    ``needs No module named 'mmengine'; allowed: ... pip install "budgeted-training[...]"``, and
    of a Detectron2 yaml ``needs budgeted.detectron2 needs 'detectron2', ...``."""
    import own_configs

    from budgeted import sweep

    config = getattr(own_configs, make)(
        *[tmp_path, tmp_path / "no_data"][: 1 + (make != "d2_yaml")]
    )
    files = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in tmp_path.rglob("*")}
    _without(monkeypatch, framework)
    try:
        code = sweep.main(["--config", str(config), "--out", str(tmp_path / "out")])
    except SystemExit as done:
        code = done.code
    printed, err = capsys.readouterr()
    assert (code, printed) == (2, "")
    assert err == (
        f"sweep: error: --config {config} needs {framework!r}, which is not installed; install it "
        f"with {hint}\n"
    )
    assert {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in tmp_path.rglob("*")} == files
