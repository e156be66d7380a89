"""The README is for users (issue 31, item 7): at most 200 lines, "use it in your own" code within
its first 60, every relative link to a file that exists; its results are ``make paper``'s table of
the committed runs (issue 44)."""

from __future__ import annotations

import ast
import re
import shlex
from pathlib import Path

import pytest

from budgeted.experiments.families import budget_tag

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()
LINES = README.splitlines()


def section(text: str, heading: str) -> str:
    """The text of the ``## heading`` section, up to the next ``## ``."""
    return text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]


def test_the_readme_is_short_and_says_how_to_use_it_early() -> None:
    assert len(LINES) <= 200
    (first,) = [i for i, line in enumerate(LINES, 1) if line.startswith("## Use it in your own")]
    assert first <= 60


def test_every_relative_link_of_the_readme_exists() -> None:
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README)
    local = [link for link in links if "://" not in link]
    assert local and [link for link in local if not (REPO / link).exists()] == []


def test_the_results_are_make_papers_table_of_its_committed_runs() -> None:
    """Issue 44, item 3: the README's one results table (every arm, both real sets) is what
    ``make paper``'s table function makes of the per-run CSVs committed in docs/paper/, figure
    for figure, and it links docs/paper.md."""
    import sys

    sys.path.insert(0, str(REPO / "tools" / "paper"))
    import report  # tools/paper/report.py
    import run
    import tables

    from budgeted.experiments.report import group_sweeps
    from budgeted.experiments.report.model import load_report_csv

    results = section(README, "Results")
    assert "docs/paper.md" in results and "make paper" in results
    groups = {name: group_sweeps([load_report_csv(REPO / f"docs/paper/{data}_arms.csv")])[0]
              for name, data in (("digits", "digits"), ("MNIST-5k", "mnist5k"))}  # fmt: skip
    grid = run.load_grid(REPO / "tools" / "paper" / "grid.toml")
    expected = tables.readme_table(groups, report.arm_order(grid))
    assert expected in results


def plain_pytorch_block() -> str:
    """The README's plain-PyTorch ```python block."""
    text = README.split("\n**Plain PyTorch**", 1)[1]
    return text.split("```python\n", 1)[1].split("\n```", 1)[0] + "\n"


def test_the_plain_pytorch_snippet_prints_every_value_it_documents(capsys) -> None:
    """Issue 40, item 8: the snippet documented three values in comments (``# 0.5``) that it
    computed and threw away, printing only its last line. Every statement whose comment gives a
    value prints it, and what it prints is that value."""
    block = plain_pytorch_block()
    lines = block.splitlines()
    documented = []  # (statement, the value its comment states)
    for node in ast.parse(block).body:
        line = lines[node.end_lineno - 1]
        if isinstance(node, ast.Expr) and "  # " in line:
            documented.append((node, line.split("  # ", 1)[1]))
    assert len(documented) == 4, [line for _, line in documented]
    silent = [ast.unparse(n) for n, _ in documented if not _is_print(n)]
    assert silent == [], "a documented value is computed but not printed"
    exec(compile(block, "README.md", "exec"), {"__name__": "__main__"})
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == len(documented)
    for out, (_, comment) in zip(printed, documented):  # the README's own literals, evaluated
        assert eval(out) == pytest.approx(eval(comment), rel=1e-9), (out, comment)


def _is_print(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Call)
        and isinstance(node.value.func, ast.Name)
        and node.value.func.id == "print"
    )


def own_config_command() -> list[str]:
    """The README's ``budgeted-sweep --config`` line of an MMEngine config ("Sweep your own
    config"), its arguments split as a shell would, its comment left out."""
    block = section(README, "Sweep your own config")
    (line,) = [ln for ln in block.splitlines() if ln.startswith("budgeted-sweep --config my_fcn")]
    return shlex.split(line, comments=True)


def test_the_readmes_own_config_sweep_plans_linear_and_step_at_its_budgets(
    tmp_path, capsys, monkeypatch
) -> None:
    """Issue 52, item 1: the README's own command, run as written (``--dry-run`` added) on an own
    MMSeg config, planned no cell and exited 0: the default schedules came from the shipped
    configs of a family, which one's own config has none of. Its default is ``linear step``
    (docs/sweeps.md), at each budget the line gives."""
    from own_configs import fcn_config

    from budgeted import sweep

    tool, *argv = own_config_command()
    config = argv[argv.index("--config") + 1]
    budgets = argv[argv.index("--budgets") + 1 :]
    assert (tool, config, budgets) == ("budgeted-sweep", "my_fcn_cityscapes.py", ["0.05", "0.1"])
    written = fcn_config(tmp_path, tmp_path / "cityscapes")  # warmup 4 of 400 iterations
    text = written.read_text().replace("max_iters=40,", "max_iters=400,")
    (tmp_path / config).write_text(text)
    monkeypatch.chdir(tmp_path)
    try:
        code = sweep.main([*argv, "--dry-run"])
    except SystemExit as done:
        code = done.code
    printed, err = capsys.readouterr()
    assert (code, err) == (0, ""), err
    cells = [line.split(":")[0] for line in printed.splitlines() if "budgeted-train-seg" in line]
    tags = [budget_tag(float(b)) for b in budgets]
    assert cells == [f"{s}_budget{t}" for t in tags for s in ("linear", "step")], printed
    assert not (tmp_path / "output").exists()


def test_the_readmes_search_plans_a_ladder_on_its_own_config(tmp_path, capsys, monkeypatch) -> None:
    """Issue 53: the README's ``budgeted-search`` line, run as written (``--dry-run`` added) on an
    own MMSeg config of 4,000 iterations, plans a ladder below its 10 % target within 4 target
    runs (its default search budget) and writes nothing."""
    from own_configs import fcn_config

    from budgeted.experiments import search

    block = section(README, "Sweep your own config")
    (line,) = [ln for ln in block.splitlines() if ln.startswith("budgeted-search --config")]
    tool, *argv = shlex.split(line, comments=True)
    config = argv[argv.index("--config") + 1]
    assert (tool, config, "--search-budget" in argv) == ("budgeted-search", "my_fcn_cityscapes.py",
                                                         False)  # fmt: skip
    written = fcn_config(tmp_path, tmp_path / "cityscapes")
    text = written.read_text().replace("max_iters=40,", "max_iters=4000,")
    (tmp_path / config).write_text(text)
    monkeypatch.chdir(tmp_path)
    try:
        code = search.main([*argv, "--dry-run"])
    except SystemExit as done:
        code = done.code
    printed, err = capsys.readouterr()
    assert (code, err) == (0, ""), err
    assert "(400 iterations of 4000), search budget 4x" in printed, printed
    assert "planned cost 3.88 target runs" in printed, printed
    assert (
        "budgeted-train-seg my_fcn_cityscapes.py --work-dir output/search/my_fcn_cityscapes/"
        in (printed)
    )
    assert not (tmp_path / "output").exists()


def test_the_readmes_detectron2_snippet_finds_its_config_from_any_folder(
    tmp_path, monkeypatch
) -> None:
    """Issue 52 (confusions): the Detectron2 snippet merged ``configs/detectron2/toy/...``, a
    path relative to the checkout's root, so it ran from there only. It now loads the config by
    its bare name (the package's config lookup), from any folder: here an empty one (the snippet
    itself trains in tests/test_snippets.py)."""
    block = (
        section(README, "Use it in your own Detectron2, MMEngine, Lightning, HF or PyTorch code")
        .split("```python\n", 1)[1]
        .split("```")[0]
    )
    (call,) = [
        node for node in ast.walk(ast.parse(block))
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "load_config"
    ]  # fmt: skip
    name = ast.literal_eval(call.args[0])
    assert "/" not in name, name
    import budgeted.detectron2 as bd2

    monkeypatch.chdir(tmp_path)
    cfg = bd2.load_config(name)
    assert (cfg.SOLVER.MAX_ITER, cfg.SOLVER.LR_SCHEDULER_NAME) == (4, "BudgetLinear")
