"""The toy-data tools (tools/make_toy_*.py): their --help says the defaults they use."""

from __future__ import annotations

import argparse
import importlib.util
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
TOOLS = sorted(ROOT.glob("tools/make_toy_*.py"))


class _Parsed(Exception):
    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self.parser = parser


def tool_parser(path: Path, monkeypatch: pytest.MonkeyPatch) -> argparse.ArgumentParser:
    """The parser ``path``'s ``main`` builds, caught as it starts parsing (nothing is written)."""

    def catch(self, *args, **kwargs):
        raise _Parsed(self)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", catch)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(_Parsed) as parsed:
        module.main([])
    return parsed.value.parser


@pytest.mark.parametrize("path", TOOLS, ids=[p.stem for p in TOOLS])
def test_every_default_in_the_help_is_the_default_used(path, monkeypatch):
    """A number in parentheses in an option's help is its default, said by argparse itself
    (``%(default)s``), so the help cannot drift from the code (make_toy_kinetics said "(4)" where
    the default was 8)."""
    parser = tool_parser(path, monkeypatch)
    assert len(TOOLS) == 5
    for action in parser._actions:
        if not action.help or action.help == argparse.SUPPRESS:
            continue
        written = re.findall(r"\((?:default:? )?(-?[\d.]+)\)", action.help)
        assert not written, f"{path.name} {action.dest}: hand-written default in {action.help!r}"
