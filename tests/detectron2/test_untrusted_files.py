"""Every file Detectron2 loads is untrusted; refusals write nothing; damaged checkpoints are named
with the newest intact one offered (issue 8, items 1-3); bad input, read-only folders and a
full disk are one line (issue 30). Real payloads, real truncated checkpoints, real file systems,
the real trainer and tools/train_net.py."""

from __future__ import annotations

import json
import os
import pickle
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from d2_testutils import (
    EIGHT,
    REPO,
    TINY,
    TOY_CONFIG,
    copy_run,
    edited_checkpoint,
    finish,
    folder_hashes,
    last_line,
    logged_lrs,
    read_only_folder,
    refusal,
    small_file_system,
    start_tool,
    truncate,
    write_payload,
)

from budgeted.detectron2 import BudgetTrainer, SafeCheckpointer, load_config
from budgeted.detectron2.cli import run
from budgeted.detectron2.lazy_cli import run as lazy_run
from budgeted.safety import (
    DamagedCheckpointError,
    UnsafeCheckpointError,
    load_checkpoint,
    save_weights_subset,
)

NO_EVAL = ["DATASETS.TEST", "()"]
REFUSED = "it names the global posix.system, outside the allow-list"


# --- 1. every file is untrusted --------------------------------------------------------------


@pytest.mark.e2e
@pytest.mark.parametrize("suffix", [".pkl", ".pth"])
def test_a_payload_in_model_weights_runs_nothing_through_tools_train_net(
    toy_root, tmp_path, suffix
) -> None:
    marker = tmp_path / "payload_ran"
    evil = write_payload(tmp_path / f"evil{suffix}", marker)
    out = tmp_path / "out"
    proc = start_tool(["--config-file", TOY_CONFIG, *TINY, "MODEL.WEIGHTS", str(evil),
                       "OUTPUT_DIR", str(out)])  # fmt: skip
    rc, _, err = finish(proc)
    assert rc == 1 and "Traceback" not in err, err[-3000:]
    assert last_line(err).startswith(f"train_net: MODEL.WEIGHTS: refusing to load {str(evil)!r}: ")
    assert REFUSED in last_line(err)
    assert not marker.exists()  # nothing of the file ran
    assert not out.exists()  # and nothing was written


@pytest.mark.integration
@pytest.mark.parametrize("suffix", [".pkl", ".pth"])
def test_a_payload_behind_last_checkpoint_is_refused_on_resume(toy_run, tmp_path, suffix) -> None:
    marker = tmp_path / "payload_ran"
    out = copy_run(toy_run, tmp_path / "run")
    write_payload(out / f"model_0000007{suffix}", marker)
    (out / "last_checkpoint").write_text(f"model_0000007{suffix}")
    before = folder_hashes(out)
    message = refusal(["--config-file", TOY_CONFIG, "--resume", *TINY, *EIGHT,
                       "OUTPUT_DIR", str(out)])  # fmt: skip
    bad = str(out / f"model_0000007{suffix}")
    assert message.startswith(f"train_net: cannot resume: refusing to load {bad!r}: ")
    assert REFUSED in message
    assert message.endswith(
        f"the newest intact checkpoint there is {str(out / 'model_0000003.pth')!r}: resume "
        f"from it with --resume-from {out / 'model_0000003.pth'}"
    )
    assert not marker.exists() and folder_hashes(out) == before
    # the trainer itself refuses it too (a user's script, or a file swapped after the checks)
    trainer = BudgetTrainer(load_config(TOY_CONFIG, [*TINY, *EIGHT, "OUTPUT_DIR", str(out)]))
    with pytest.raises(UnsafeCheckpointError, match=r"posix\.system"):
        trainer.resume_or_load(resume=True)
    assert not marker.exists()


@pytest.mark.integration
@pytest.mark.parametrize("suffix", [".pkl", ".pth"])
def test_eval_only_refuses_a_payload(toy_root, tmp_path, suffix) -> None:
    marker = tmp_path / "payload_ran"
    evil = write_payload(tmp_path / f"evil{suffix}", marker)
    out = tmp_path / "out"
    message = refusal(["--config-file", TOY_CONFIG, "--eval-only", *TINY,
                       "MODEL.WEIGHTS", str(evil), "OUTPUT_DIR", str(out)])  # fmt: skip
    assert message.startswith(f"train_net: MODEL.WEIGHTS: refusing to load {str(evil)!r}")
    assert REFUSED in message and not out.exists()
    # what --eval-only's worker loads with: refused there too
    model = BudgetTrainer.build_model(load_config(TOY_CONFIG, TINY))
    with pytest.raises(UnsafeCheckpointError, match=r"posix\.system"):
        SafeCheckpointer(model).load(str(evil))
    # and a new training run's MODEL.WEIGHTS, in the trainer itself
    trainer = BudgetTrainer(load_config(TOY_CONFIG, [*TINY, "MODEL.WEIGHTS", str(evil),
                                                     "OUTPUT_DIR", str(out)]))  # fmt: skip
    with pytest.raises(UnsafeCheckpointError, match=r"posix\.system"):
        trainer.resume_or_load(resume=False)
    assert not marker.exists()


@pytest.mark.unit
def test_lazyconfig_train_net_refuses_a_payload_as_init_checkpoint(toy_root, tmp_path) -> None:
    marker = tmp_path / "payload_ran"
    evil = write_payload(tmp_path / "evil.pkl", marker)
    with pytest.raises(SystemExit) as err:
        lazy_run(["--config", "mask_rcnn_toy_budget10.py", f"train.init_checkpoint={evil}",
                  f"train.output_dir={tmp_path / 'out'}"])  # fmt: skip
    message = str(err.value.code)
    assert message.startswith(
        f"lazyconfig_train_net: train.init_checkpoint: refusing to load {str(evil)!r}: "
    )
    assert REFUSED in message and "\n" not in message
    assert not marker.exists() and not (tmp_path / "out").exists()


def model_zoo_pkl(model: torch.nn.Module, path: Path, **extra) -> dict[str, np.ndarray]:
    """``model``'s weights in Detectron2's model-zoo format: a pickled dict of numpy arrays under
    "model", with "__author__" and "matching_heuristics" (as tools/convert-*-to-d2.py write)."""
    weights = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    weights = {k: v + 0.5 if v.dtype == np.float32 else v for k, v in weights.items()}  # not init
    data = {"model": weights, "__author__": "Detectron2 Model Zoo", "matching_heuristics": True}
    path.write_bytes(pickle.dumps({**data, **extra}, protocol=2))
    return weights


@pytest.mark.integration
def test_a_model_zoo_pkl_still_loads_and_trains(toy_root, tmp_path) -> None:
    cfg = load_config(TOY_CONFIG, [*TINY, "SOLVER.BUDGET.FRACTION", "0.01", *NO_EVAL,
                                   "OUTPUT_DIR", str(tmp_path / "out")])  # fmt: skip
    zoo = tmp_path / "model_final_toy.pkl"
    weights = model_zoo_pkl(BudgetTrainer.build_model(cfg), zoo)
    cfg.defrost()
    cfg.MODEL.WEIGHTS = str(zoo)
    trainer = BudgetTrainer(cfg)
    trainer.resume_or_load(resume=False)
    loaded = trainer.model.state_dict()
    for key in ("backbone.bottom_up.stem.conv1.weight", "roi_heads.box_predictor.cls_score.bias"):
        assert torch.equal(loaded[key], torch.from_numpy(weights[key]))
    # and the CLI trains from it (the 1 % toy budget: 4 iterations)
    out = tmp_path / "cli"
    assert run(["--config-file", TOY_CONFIG, *TINY, "SOLVER.BUDGET.FRACTION", "0.01", *NO_EVAL,
                "MODEL.WEIGHTS", str(zoo), "OUTPUT_DIR", str(out)]) == 0  # fmt: skip
    assert sorted(logged_lrs(out)) == [0, 1, 2, 3]
    assert "Reading a file from 'Detectron2 Model Zoo'" in (out / "log.txt").read_text()


@pytest.mark.unit
def test_caffe2_and_pycls_files_keep_detectron2s_handling(tmp_path) -> None:
    ckpt = SafeCheckpointer(torch.nn.Linear(2, 2))
    blobs = tmp_path / "R-50.pkl"  # Caffe2's ImageNet models: weights under "blobs", momenta
    blobs.write_bytes(pickle.dumps({"blobs": {"conv1_w": np.ones(2), "conv1_w_momentum": 0}}))
    data = ckpt._load_file(str(blobs))
    assert data["__author__"] == "Caffe2" and data["matching_heuristics"] is True
    assert list(data["model"]) == ["conv1_w"]
    pycls = tmp_path / "regnet.pyth"
    torch.save({"model_state": {"w": torch.ones(1), "bn.num_batches_tracked": torch.zeros(1)}},
               pycls)  # fmt: skip
    assert list(ckpt._load_file(str(pycls))["model"]) == ["w"]
    plain = tmp_path / "plain.pth"
    torch.save({"w": torch.ones(1)}, plain)
    assert list(ckpt._load_file(str(plain))) == ["model"]  # wrapped, as Detectron2 does
    with pytest.raises(DamagedCheckpointError, match=r"'.*nope\.pth' does not exist"):
        ckpt.load(str(tmp_path / "nope.pth"))


# --- 2. refusals write nothing --------------------------------------------------------------


def _busy(out: Path, tmp: Path) -> list[str]:
    return [*TINY, *EIGHT]  # a new run (no --resume) into a folder that holds one


def _other_budget(out: Path, tmp: Path) -> list[str]:
    return ["--resume", *TINY, "SOLVER.BUDGET.FRACTION", "0.03"]


def _unsafe_last(out: Path, tmp: Path) -> list[str]:
    write_payload(out / "model_0000007.pth", tmp / "payload_ran")
    (out / "last_checkpoint").write_text("model_0000007.pth")
    return ["--resume", *TINY, *EIGHT]


def _damaged_last(out: Path, tmp: Path) -> list[str]:
    (out / "model_0000007.pth").write_bytes(b"PK\x03\x04 torn")
    (out / "last_checkpoint").write_text("model_0000007.pth")
    return ["--resume", *TINY, *EIGHT]


def _unsafe_eval_weights(out: Path, tmp: Path) -> list[str]:
    return ["--eval-only", *TINY, "MODEL.WEIGHTS",
            str(write_payload(tmp / "evil.pkl", tmp / "payload_ran"))]  # fmt: skip


def _damaged_resume_from(out: Path, tmp: Path) -> list[str]:
    (tmp / "torn.pth").write_bytes(b"")
    return ["--resume-from", str(tmp / "torn.pth"), *TINY, *EIGHT]


def _other_budget_resume_from(out: Path, tmp: Path) -> list[str]:
    return ["--resume-from", str(out / "model_0000003.pth"), *TINY,
            "SOLVER.BUDGET.FRACTION", "0.03"]  # fmt: skip


def _earlier_resume_from(out: Path, tmp: Path) -> list[str]:
    shutil.copy2(out / "model_0000003.pth", out / "model_0000007.pth")  # an intact later one
    return ["--resume-from", str(out / "model_0000003.pth"), *TINY, *EIGHT]


def _weights_only_resume_from(out: Path, tmp: Path) -> list[str]:
    # what tools/extract_weights.py writes: {"model": weights}, no trainer state
    save_weights_subset(out / "model_0000003.pth", tmp / "weights.pth", prefix="")
    return ["--resume-from", str(tmp / "weights.pth"), *TINY, *EIGHT]


def _edited_last_epoch(out: Path, tmp: Path) -> list[str]:
    # the LR scheduler says 15 steps in a checkpoint of iteration 4: LR 0 from iteration 11 on
    edited_checkpoint(out / "model_0000003.pth", out / "edited.pth", last_epoch=15)
    (out / "last_checkpoint").write_text("edited.pth")
    return ["--resume", *TINY, *EIGHT]


def _edited_iteration(out: Path, tmp: Path) -> list[str]:
    # the iteration says 7 of 8 where the LR scheduler is 4 steps in: the run would end undecayed
    edited_checkpoint(out / "model_0000003.pth", out / "edited.pth", iteration=6)
    (out / "last_checkpoint").write_text("edited.pth")
    return ["--resume", *TINY, *EIGHT]


REFUSALS = {
    "busy folder": (_busy, "already holds a run; pass --resume"),
    "another budget": (_other_budget, "cannot resume: the checkpoint's budget has"),
    "unsafe checkpoint": (_unsafe_last, "cannot resume: refusing to load"),
    "damaged checkpoint": (_damaged_last, "cannot resume: checkpoint"),
    "unsafe weights, --eval-only": (_unsafe_eval_weights, "MODEL.WEIGHTS: refusing to load"),
    "damaged --resume-from": (_damaged_resume_from, "--resume-from: checkpoint"),
    "--resume-from another budget": (_other_budget_resume_from, "SOLVER.MAX_ITER=8"),
    "--resume-from an earlier checkpoint": (
        _earlier_resume_from,
        "--resume-from model_0000003.pth would overwrite later checkpoints in",
    ),
    "--resume-from weights only": (
        _weights_only_resume_from,
        "weights.pth' holds weights only (no iteration, LR scheduler or optimizer state, as "
        "tools/extract_weights.py writes), so it cannot be resumed; a weights file starts a new "
        "run: MODEL.WEIGHTS ",
    ),
    "--resume, LR scheduler edited": (
        _edited_last_epoch,
        "edited.pth' is inconsistent: its iteration is 3, its trainer's 3 and its LR scheduler "
        "has stepped 15 times",
    ),
    "--resume, iteration edited": (
        _edited_iteration,
        "edited.pth' is inconsistent: its iteration is 6, its trainer's 6 and its LR scheduler "
        "has stepped 4 times",
    ),
}


@pytest.mark.integration
@pytest.mark.parametrize("case", list(REFUSALS))
def test_a_refusal_writes_nothing(toy_run, tmp_path, case) -> None:
    make, expected = REFUSALS[case]
    out = copy_run(toy_run, tmp_path / "run")
    argv = make(out, tmp_path)
    before = folder_hashes(out)
    message = refusal(["--config-file", TOY_CONFIG, *argv, "OUTPUT_DIR", str(out)])
    assert expected in message
    assert folder_hashes(out) == before  # not one byte changed, no file added
    assert not (tmp_path / "payload_ran").exists()


# --- 3. damaged checkpoints: named, with the newest intact one offered -------------------------


@pytest.mark.integration
@pytest.mark.parametrize("last", ["model_final.pth", "model_0000007.pth"])
def test_a_truncated_checkpoint_is_named_and_resume_from_the_intact_one_is_exact(
    toy_run, tmp_path, last
) -> None:
    out = copy_run(toy_run, tmp_path / "run", ("model_0000003.pth", "model_0000007.pth"))
    truncate(out / "model_0000007.pth")  # the latest periodic one is torn too
    if last == "model_final.pth":
        (out / last).write_bytes((toy_run / last).read_bytes()[:4096])
    (out / "last_checkpoint").write_text(last)
    argv = ["--config-file", TOY_CONFIG, *TINY, *EIGHT, *NO_EVAL, "OUTPUT_DIR", str(out)]
    message = refusal(["--resume", *argv])
    intact = str(out / "model_0000003.pth")
    assert message == (
        f"train_net: cannot resume: checkpoint {str(out / last)!r} cannot be read (truncated or "
        "damaged: PytorchStreamReader failed reading zip archive: failed finding central "
        f"directory); the newest intact checkpoint there is {intact!r}: resume from it with "
        f"--resume-from {intact}"
    )
    # a user's trainer on the same folder: the same one line, the same offer
    trainer = BudgetTrainer(load_config(TOY_CONFIG, [*TINY, *EIGHT, "OUTPUT_DIR", str(out)]))
    with pytest.raises(DamagedCheckpointError, match=r"newest intact checkpoint there is .*3\.pth"):
        trainer.resume_or_load(resume=True)
    # taking the offer resumes exactly: iterations 4-7 at the LR of the uninterrupted run
    (out / "metrics.json").unlink()
    assert run(["--resume-from", intact, *argv]) == 0
    resumed, full = logged_lrs(out), logged_lrs(toy_run)
    assert sorted(resumed) == [4, 5, 6, 7]
    assert [resumed[i] for i in range(4, 8)] == [full[i] for i in range(4, 8)]
    assert (out / "last_checkpoint").read_text() == "model_final.pth"
    assert load_checkpoint(out / "model_final.pth")["iteration"] == 7  # written whole


# --- 7. garbled configs and overrides: one line, nothing written ------------------------------


@pytest.mark.unit
def test_a_garbled_yaml_config_is_one_line(toy_root, tmp_path) -> None:
    bad = tmp_path / "garbled.yaml"
    bad.write_text("SOLVER:\n  MAX_ITER: [1,\n  : x\n")
    message = refusal(["--config-file", str(bad), "OUTPUT_DIR", str(tmp_path / "out")])
    assert message == (
        f"train_net: config {str(bad)!r} is not valid yaml (line 3, column 3): expected the node "
        "content, but found ':'"
    )
    assert not (tmp_path / "out").exists()


@pytest.mark.unit
@pytest.mark.parametrize(
    "text,opts,expected",
    [
        ("x = (\n", [], "is not valid python (line 1): '(' was never closed"),
        (None, ["train.max_iter"], "Error parsing override 'train.max_iter' missing EQUAL"),
    ],
)
def test_a_garbled_lazyconfig_or_override_is_one_line(toy_root, tmp_path, text, opts, expected):
    config = "mask_rcnn_toy_budget10.py"
    if text is not None:
        config = str(tmp_path / "garbled.py")
        Path(config).write_text(text)
    with pytest.raises(SystemExit) as err:
        lazy_run(["--config", config, *opts, f"train.output_dir={tmp_path / 'out'}"])
    message = str(err.value.code)
    assert message.startswith("lazyconfig_train_net: ") and expected in message
    assert "\n" not in message and not (tmp_path / "out").exists()


@pytest.mark.unit
def test_safe_checkpointer_saves_by_rename_never_in_place(tmp_path) -> None:
    """The checkpoint and last_checkpoint replace the old files (a new inode, renamed into
    place); an in-place write would change the file they were hard links to."""
    model = torch.nn.Linear(2, 2)
    ckpt = SafeCheckpointer(model, str(tmp_path), save_to_disk=True)
    for name in ("model_0000002.pth", "last_checkpoint"):
        (tmp_path / f"old_{name}").write_bytes(b"old")
        os.link(tmp_path / f"old_{name}", tmp_path / name)
    ckpt.save("model_0000002", iteration=2)
    for name in ("model_0000002.pth", "last_checkpoint"):
        assert (tmp_path / f"old_{name}").read_bytes() == b"old"
        assert (tmp_path / name).stat().st_ino != (tmp_path / f"old_{name}").stat().st_ino
    assert (tmp_path / "last_checkpoint").read_text() == "model_0000002.pth"
    assert load_checkpoint(tmp_path / "model_0000002.pth")["iteration"] == 2
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


# --- 8. bad input through the real tools: exactly one line on stderr, nothing written ---------


def _mmengine_weights(tmp: Path, out: Path) -> tuple[str, list[str], dict]:
    weights = tmp / "pspnet_iter_40.pth"  # the layout MMEngine saves weights in
    torch.save({"meta": {"iter": 40}, "state_dict": {"backbone.conv1.weight": torch.ones(1)}},
               weights)  # fmt: skip
    argv = ["--config-file", TOY_CONFIG, "MODEL.WEIGHTS", str(weights), "OUTPUT_DIR", str(out)]
    expected = (f"train_net: MODEL.WEIGHTS {str(weights)!r} is not a Detectron2 weights file: it "
                "holds keys 'meta', 'state_dict' (an MMEngine / MMCV checkpoint: its weights are "
                "under 'state_dict'); supported: ")  # fmt: skip
    return "train_net.py", argv, {"expected": expected}


def _empty_training_set(tmp: Path, out: Path) -> tuple[str, list[str], dict]:
    root = tmp / "datasets"
    shutil.copytree(Path(os.environ["DETECTRON2_DATASETS"]), root)
    annotations = root / "toy_coco" / "annotations" / "instances_train.json"
    data = json.loads(annotations.read_text())
    annotations.write_text(json.dumps({**data, "images": [], "annotations": []}))
    expected = ("train_net: training set toy_coco_train has nothing to train on (Dataset "
                "'toy_coco_train' is empty!); allowed: a dataset with at least one image with "
                "annotations")  # fmt: skip
    argv = ["--config-file", TOY_CONFIG, "OUTPUT_DIR", str(out)]
    return "train_net.py", argv, {"expected": expected, "DETECTRON2_DATASETS": str(root)}


def _mmengine_config_to_lazy(tmp: Path, out: Path) -> tuple[str, list[str], dict]:
    config = REPO / "configs/mmseg/toy/pspnet_r18-toy_cityscapes_budget1.py"
    expected = (f"lazyconfig_train_net: config {str(config)!r} is not a Detectron2 LazyConfig: "
                "it defines no model, dataloader, optimizer, lr_multiplier, train; allowed: a "
                "LazyConfig defining model, dataloader, optimizer, lr_multiplier, train; this is "
                "an MMEngine config: train it with tools/train_seg.py")  # fmt: skip
    argv = ["--config-file", str(config), f"train.output_dir={out}"]
    return "lazyconfig_train_net.py", argv, {"expected": expected}


ONE_LINE = {
    "MODEL.WEIGHTS of MMEngine's layout": _mmengine_weights,
    "an empty training set": _empty_training_set,
    "an MMEngine config to the LazyConfig tool": _mmengine_config_to_lazy,
}


@pytest.mark.e2e
@pytest.mark.parametrize("case", list(ONE_LINE))
def test_bad_input_is_one_line_on_stderr_and_writes_nothing(toy_root, tmp_path, case) -> None:
    """Through the real tools: exit status 1 and stderr exactly that line (no traceback, no
    torch.jit.script FutureWarnings before it); the output folder is never made."""
    out = tmp_path / "out"
    tool, argv, extra = ONE_LINE[case](tmp_path, out)
    expected = extra.pop("expected")
    rc, _, err = finish(start_tool(argv, env=extra, tool=tool))
    assert rc == 1 and err.strip().splitlines() == [last_line(err)], err[-3000:]
    assert last_line(err).startswith(expected), last_line(err)
    assert not out.exists()


@pytest.mark.e2e
@pytest.mark.parametrize("tool", ["train_net.py", "lazyconfig_train_net.py"])
def test_a_read_only_output_folder_is_one_line(toy_root, tmp_path, tool) -> None:
    with read_only_folder(tmp_path / "ro") as folder:
        out = folder / "run"
        key = "OUTPUT_DIR" if tool == "train_net.py" else "train.output_dir"
        argv = (
            ["--config-file", TOY_CONFIG, "OUTPUT_DIR", str(out)]
            if tool == "train_net.py"
            else ["--config", "mask_rcnn_toy_budget10.py", f"train.output_dir={out}"]
        )
        rc, _, err = finish(start_tool(argv, tool=tool))
        assert rc == 1 and err.strip().splitlines() == [last_line(err)], err[-3000:]
        why = "Read-only file system" if os.geteuid() == 0 else "Permission denied"
        assert last_line(err) == (
            f"{tool[:-3]}: {key} {out} cannot be written ({folder}: {why}); allowed: a folder "
            f"this run can write (set another {key}, e.g. {key} ./output/run) (nothing was written)"
        ), last_line(err)
        assert list(folder.iterdir()) == []


@pytest.mark.e2e
def test_a_full_disk_is_one_line_naming_the_last_intact_checkpoint(toy_root, tmp_path) -> None:
    """A real full disk: a 150 MB tmpfs holds the first toy checkpoint (95 MB) but not the
    second; the write fails with ENOSPC inside torch.save."""
    with small_file_system(tmp_path / "disk", "150m") as disk:
        out = disk / "run"
        argv = ["--config-file", TOY_CONFIG, *TINY, *EIGHT, *NO_EVAL, "OUTPUT_DIR", str(out)]
        rc, _, err = finish(start_tool(argv))
        assert rc == 1 and "Traceback" not in err, err[-3000:]
        assert last_line(err) == (
            f"train_net: no space left on {disk} while writing {out / 'model_0000007.pth'}; "
            f"the last intact checkpoint is {str(out / 'model_0000003.pth')!r}: free space on "
            f"{disk} (or set another output folder), then resume with --resume"
        )
        assert not [p.name for p in out.iterdir() if ".tmp-" in p.name]  # the partial one went
        assert (out / "last_checkpoint").read_text() == "model_0000003.pth"
        assert not (out / "model_final.pth").exists()
