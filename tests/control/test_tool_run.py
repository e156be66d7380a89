"""budgeted.control.tool and budgeted.control.preflight: one tool life and one order of checks,
in each tool's words.

The lines are the literal lines the tools printed before the life moved here (Detectron2's
``cli.launch_checked`` and ``launcher._after_failure``, MMEngine's ``cli._train`` and
``dist_run.failure_line``); a refusal before training claims nothing and trains nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import doctest
import signal
from pathlib import Path

import pytest

from budgeted.control import preflight as preflight_module
from budgeted.control import tool as tool_module
from budgeted.control.folder import OutputFolder
from budgeted.control.preflight import Tool, preflight
from budgeted.control.tool import ToolRun, ToolWords
from budgeted.errors import Diverged, FolderBusyError
from budgeted.runs import detectron2
from budgeted.safety.preemption import Preempted, PreemptionGuard

pytestmark = pytest.mark.unit

D2 = ToolWords("train_net")
MM = ToolWords(
    "train_seg",
    refusal_status=2,
    error_prefix="error: ",
    preempted_early="preempted by {signal} before training started: nothing written; exit "
    "status 75, run the same command again",
    stops_said=True,
)


class Life:
    """What a run did: the steps called, in order."""

    def __init__(self) -> None:
        self.steps: list[str] = []
        self.guard = PreemptionGuard(signals=())  # request() sets it as a signal would

    def check(self, err: BaseException | None = None, signum: int | None = None):
        def check() -> str:
            self.steps.append("check")
            if signum is not None:
                self.guard.request(signum)
            if err is not None:
                raise err
            return "cfg"

        return check

    def claim(self, cfg: str, stack: contextlib.ExitStack) -> None:
        self.steps.append("claim")
        stack.callback(self.steps.append, "release")

    def train(self, err: BaseException | None = None):
        def train(cfg: str) -> str:
            self.steps.append("train")
            if err is not None:
                raise err
            return "trained"

        return train


def test_a_detectron2_refusal_exits_with_its_line_and_claims_nothing() -> None:
    life = Life()
    with pytest.raises(SystemExit) as err:
        ToolRun(D2, life.guard).run(life.check(ValueError("SOLVER.MAX_ITER=0 is invalid")),
                               life.claim, life.train())  # fmt: skip
    assert str(err.value.code) == "train_net: SOLVER.MAX_ITER=0 is invalid"
    assert life.steps == ["check"]


def test_an_mmengine_refusal_prints_error_and_returns_2(capsys: pytest.CaptureFixture) -> None:
    life = Life()
    run = ToolRun(MM, life.guard, claim_first=False)
    assert run.run(life.check(FileNotFoundError("config x.py not found")), life.claim,
                   life.train()) == 2  # fmt: skip
    assert capsys.readouterr().err == "train_seg: error: config x.py not found\n"
    assert life.steps == ["check"]


def test_a_busy_folder_at_the_claim_is_the_tools_refusal(capsys: pytest.CaptureFixture) -> None:
    def busy(cfg: str, stack: contextlib.ExitStack) -> None:
        raise FolderBusyError("--work-dir w is in use")

    life = Life()
    assert ToolRun(MM, life.guard, claim_first=False).run(life.check(), busy, life.train()) == 2
    assert capsys.readouterr().err == "train_seg: error: --work-dir w is in use\n"
    assert life.steps == ["check"]


def test_a_signal_before_training_ends_the_run_unclaimed_in_each_tools_words(
    capsys: pytest.CaptureFixture,
) -> None:
    life = Life()
    with pytest.raises(Preempted) as err:
        ToolRun(D2, life.guard).run(life.check(signum=signal.SIGTERM), life.claim, life.train())
    assert err.value.code == 75 and life.steps == ["check"]
    assert capsys.readouterr().err == (
        "train_net: preempted by SIGTERM before training started: nothing to save; run the same "
        "command again\n"
    )
    life = Life()
    status = ToolRun(MM, life.guard, claim_first=False).run(
        life.check(signum=signal.SIGUSR1), life.claim, life.train()
    )
    assert status == 75 and life.steps == ["check"]
    assert capsys.readouterr().err == (
        "train_seg: preempted by SIGUSR1 before training started: nothing written; exit status "
        "75, run the same command again\n"
    )


def test_a_stop_in_training_is_its_line_once_and_its_status(
    capsys: pytest.CaptureFixture,
) -> None:
    stop = Diverged("diverged: the loss is nan at iteration 3 (base LR 0.1)")
    life = Life()
    with pytest.raises(Diverged) as err:
        ToolRun(D2, life.guard).run(life.check(), life.claim, life.train(stop))
    assert err.value.code == 3
    assert capsys.readouterr().err == f"train_net: {stop.message}\n"
    assert life.steps == ["check", "claim", "train", "release"]
    life = Life()  # MMEngine's hook printed the line: the tool adds none
    run = ToolRun(MM, life.guard, claim_first=False, stops=(Diverged,))
    assert run.run(life.check(), life.claim, life.train(stop)) == 3
    assert capsys.readouterr().err == ""
    assert life.steps == ["check", "claim", "train", "release"]


def test_a_run_trains_after_its_claim_and_releases_the_folder() -> None:
    life = Life()
    assert ToolRun(D2, life.guard).run(life.check(), life.claim, life.train()) == "trained"
    assert life.steps == ["check", "claim", "train", "release"]


def test_the_failed_worker_lines_of_both_launchers() -> None:
    pytest.importorskip("detectron2")
    pytest.importorskip("mmengine")
    from budgeted.detectron2.launcher import EXITS as workers
    from budgeted.mmengine.dist_run import EXITS as torchrun

    tail = "; the other workers were stopped; resume from the last checkpoint with --resume"
    assert workers.line(-9, worker=1, n=2) == (f"worker 1 of 2 was killed by SIGKILL{tail}", 1)
    assert workers.line(7, worker=0, n=2) == (f"worker 0 of 2 exited with status 7{tail}", 1)
    assert workers.line(None, worker=0, n=2)[0].startswith("worker 0 of 2 exited with status None")
    assert torchrun.line(-9, rank=1, pid=4242, signal="SIGKILL") == (
        "rank 1 (pid 4242) was killed by SIGKILL; torchrun stopped the others",
        1,
    )
    assert torchrun.line(5, rank=0, pid=7, signal="<N/A>") == (
        "rank 0 (pid 7) failed with exit status 5 (its output above says why); torchrun stopped "
        "the others",
        5,
    )
    assert torchrun.line(300, rank=0, pid=7)[1] == 1
    for said in (2, 3, 4, 75):
        assert torchrun.line(said, rank=0, pid=7) == (None, said)


class TwoBad(Tool):
    """A tool whose inputs and output folder are both bad: which line wins is its order."""

    def load(self, args: argparse.Namespace) -> dict:
        return {"out": args.out}

    def folder(self, cfg: dict) -> OutputFolder:
        return OutputFolder(cfg["out"], detectron2, "OUTPUT_DIR")

    def inputs(self, cfg: dict, args: argparse.Namespace) -> None:
        raise ValueError("dataset 'x' is not registered")


def test_the_first_bad_input_in_a_tools_order_is_its_line(tmp_path: Path) -> None:
    (tmp_path / "metrics.json").write_text('{"iteration": 0}\n')
    (tmp_path / "last_checkpoint").write_text("model_final.pth")
    args = argparse.Namespace(out=str(tmp_path), resume=False)
    with pytest.raises(ValueError, match="dataset 'x' is not registered"):
        preflight(TwoBad(), args)
    folder_first = type("FolderFirst", (TwoBad,), {"ORDER": ("new_run", "inputs")})
    with pytest.raises(ValueError, match="OUTPUT_DIR"):
        preflight(folder_first(), args)
    args.eval_only = True  # evaluating only: the folder may hold a run
    with pytest.raises(ValueError, match="dataset 'x'"):
        preflight(folder_first(), args)


def test_the_examples_of_both_modules_run() -> None:
    for module in (tool_module, preflight_module):
        assert doctest.testmod(module).failed == 0
