"""The Slurm options of ``budgeted-sweep --executor slurm`` (the usual sbatch flags and
``--slurm-option KEY=VALUE``), checked against the cluster before anything is written.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from typing import Any

from ...errors import SweepError
from .compat import submitit_parameters

__all__ = [
    "OWN_OPTIONS", "SET_BY_SWEEP", "SLURM_ARGUMENTS", "SLURM_FLAGS", "SLURM_FOLDER", "SlurmOptions",
    "add_slurm_arguments", "check_cluster", "parse_time", "sbatch_long_options", "slurm_options",
]  # fmt: skip

SLURM_FOLDER = ".slurm"
"""Under ``--out``: submitit's files (the jobs' submissions and their stdout / stderr)."""
SLURM_ARGUMENTS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("--partition", dict(help="sbatch --partition (default: the cluster's default)")),
    ("--nodes", dict(default="1", help="nodes per cell (default 1)")),
    ("--gpus-per-node", dict(default="0", help="GPUs per node of each cell (default 0: CPU)")),
    ("--cpus-per-task", dict(help="sbatch --cpus-per-task")),
    ("--mem", dict(help="memory per node, as sbatch --mem takes it (64G)")),
    ("--time", dict(default="60", help="time limit per job: minutes, HH:MM:SS or D-HH:MM:SS "
     "(default 60; a timed-out job saves, is requeued and resumes)")),
    ("--account", dict(help="sbatch --account")),
    ("--qos", dict(help="sbatch --qos")),
    ("--slurm-option", dict(action="append", default=[], metavar="KEY=VALUE",
     help="any other sbatch option, e.g. constraint=a100 or exclusive= (repeatable)")),
    ("--detach", dict(action="store_true", help="exit after submitting; rerun the same command "
     "to collect and resubmit")),
)  # fmt: skip
"""``--executor slurm``'s options, with the names sbatch gives them, and their argparse keywords."""
SLURM_FLAGS = {flag: flag[2:].replace("-", "_") for flag, _ in SLURM_ARGUMENTS}
"""The flags that only ``--executor slurm`` takes -> their argparse names."""
OWN_OPTIONS = {
    **{dest: flag for flag, dest in SLURM_FLAGS.items() if flag not in ("--slurm-option",
       "--detach")}, "num_gpus": "--gpus-per-node",
}  # fmt: skip
"""sbatch options the sweep has a flag of its own for: refused in ``--slurm-option``."""
SET_BY_SWEEP = frozenset({
    "array", "output", "error", "signal", "open_mode", "job_name", "wckey", "ntasks_per_node",
    "ntasks", "requeue", "no_requeue", "chdir", "wrap", "parsable", "folder", "setup",
    "teardown", "srun_args", "use_srun", "additional_parameters", "signal_delay_s",
    "stderr_to_stdout", "array_parallelism", "map_count", "command",
})  # fmt: skip
"""sbatch / submitit options the sweep sets per job itself (files, signal, array, tasks)."""


@dataclass
class SlurmOptions:
    """What each cell's job asks Slurm for."""

    partition: str | None = None
    nodes: int = 1
    gpus_per_node: int = 0
    cpus_per_task: int | None = None
    mem: str | None = None
    time_min: int = 60
    account: str | None = None
    qos: str | None = None
    named: dict[str, str] = field(default_factory=dict)  # submitit's own parameters
    extra: dict[str, str] = field(default_factory=dict)  # other sbatch options, as given


def add_slurm_arguments(parser: argparse.ArgumentParser) -> None:
    """``--executor``'s Slurm options (:data:`SLURM_ARGUMENTS`)."""
    group = parser.add_argument_group("Slurm (--executor slurm; one job per cell, via submitit)")
    for flag, keywords in SLURM_ARGUMENTS:
        group.add_argument(flag, **keywords)


def parse_time(text: str) -> int:
    """A time limit in minutes, from what sbatch ``--time`` takes: ``MM``, ``HH:MM:SS``,
    ``D-HH``, ``D-HH:MM``, ``D-HH:MM:SS`` (seconds round up).

    >>> parse_time("90"), parse_time("1:30:00"), parse_time("2-00:00:00"), parse_time("0:0:30")
    (90, 90, 2880, 1)
    """
    match = re.fullmatch(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?", text.strip())
    if match is None:
        raise SweepError(
            f"--time {text!r} is not a time limit; allowed: minutes (90), HH:MM:SS (48:00:00) "
            "or D-HH:MM:SS (2-00:00:00)"
        )
    days, first, second, third = match.groups()
    if days is None and second is None:
        seconds = int(first) * 60
    elif days is None:
        parts = [int(first), int(second), int(third or 0)]
        if third is None:  # MM:SS
            parts = [0, *parts[:2]]
        seconds = parts[0] * 3600 + parts[1] * 60 + parts[2]
    else:
        seconds = int(days) * 86400 + int(first) * 3600 + int(second or 0) * 60 + int(third or 0)
    minutes = -(-seconds // 60)
    if minutes < 1:
        raise SweepError(f"--time {text!r} is under a minute; allowed: 1 minute or more")
    return minutes


def _positive(flag: str, text: str | None, zero: bool = False) -> int | None:
    if text is None:
        return None
    if not (text.isascii() and text.isdigit()) or (int(text) == 0 and not zero):
        least = 0 if zero else 1
        raise SweepError(f"{flag} {text!r} is not an integer >= {least}; allowed: e.g. 1 2 8")
    return int(text)


def sbatch_long_options() -> frozenset[str]:
    """The long options this cluster's ``sbatch --help`` lists (``constraint``,
    ``mail-type``, ...)."""
    done = subprocess.run(["sbatch", "--help"], capture_output=True, text=True, timeout=60)
    return frozenset(re.findall(r"(?m)^\s+(?:-\w, )?--([a-z][a-z0-9-]*)", done.stdout))


def _slurm_option(text: str, known_sbatch: frozenset[str]) -> tuple[str, str, bool]:
    """(key, value, whether submitit names the key) of one ``--slurm-option KEY=VALUE``."""
    key, sep, value = text.partition("=")
    name = key.strip().lstrip("-").replace("-", "_")
    if not sep or not name:
        raise SweepError(
            f"--slurm-option {text!r} is not KEY=VALUE; allowed: an sbatch option as "
            "constraint=a100, exclusive= (a flag without a value), mail-type=END"
        )
    if name in OWN_OPTIONS:
        raise SweepError(
            f"--slurm-option {text!r} sets {key}, which the sweep has a flag for; allowed: "
            f"{OWN_OPTIONS[name]} {value or 'VALUE'}"
        )
    if name in SET_BY_SWEEP:
        raise SweepError(
            f"--slurm-option {text!r}: {key} is set by the sweep per job (its files, signal, "
            "array and tasks); allowed: any other sbatch option"
        )
    if name in submitit_parameters():
        return name, value, True
    if name.replace("_", "-") in known_sbatch:
        return name.replace("_", "-"), value, False
    raise SweepError(
        f"--slurm-option {text!r}: unknown Slurm option {key!r} (neither submitit's nor in "
        "`sbatch --help`); allowed: an sbatch long option, e.g. constraint, exclude, "
        "mail-type, reservation, gres"
    )


def slurm_options(args: argparse.Namespace) -> SlurmOptions:
    """The job options from the command line; :class:`SweepError` (one line) for a bad one."""
    options = SlurmOptions(
        partition=args.partition, nodes=_positive("--nodes", args.nodes) or 1,
        gpus_per_node=_positive("--gpus-per-node", args.gpus_per_node, zero=True) or 0,
        cpus_per_task=_positive("--cpus-per-task", args.cpus_per_task), mem=args.mem,
        time_min=parse_time(args.time), account=args.account, qos=args.qos,
    )  # fmt: skip
    if args.mem is not None and not re.fullmatch(r"\d+[KMGT]?", args.mem):
        raise SweepError(f"--mem {args.mem!r} is not a size; allowed: e.g. 64G, 500M, 16000")
    if args.slurm_option:
        known = sbatch_long_options()
        for text in args.slurm_option:
            key, value, named = _slurm_option(text, known)
            (options.named if named else options.extra)[key] = value
    return options


def _slurm_ok(command: list[str]) -> tuple[bool, str]:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return False, f"{' '.join(command)} did not answer within 60 s"
    said = (done.stderr.strip() or done.stdout.strip()).splitlines()
    return done.returncode == 0, (said[-1] if said else f"exit status {done.returncode}")


def _gpus_of(gres: str) -> int:
    """The GPUs a node's ``Gres`` field names (``gpu:2``, ``gpu:a100:8(S:0-1)``): 0 without."""
    total = 0
    for item in gres.split(","):
        parts = item.split("(")[0].split(":")
        if parts[0] == "gpu" and len(parts) > 1 and parts[-1].isdigit():
            total += int(parts[-1])
    return total


def check_cluster(options: SlurmOptions) -> None:
    """Refuse (:class:`SweepError`), before anything is written, what Slurm would not run: no
    submitit, no ``sbatch``, no controller answering, an unknown partition, too many GPUs or
    nodes."""
    if importlib.util.find_spec("submitit") is None:
        raise SweepError(
            "--executor slurm needs submitit, which is not installed; allowed: "
            'pip install "budgeted-training[slurm]", or --executor local'
        )
    if shutil.which("sbatch") is None or shutil.which("sinfo") is None:
        raise SweepError(
            "--executor slurm: sbatch is not on PATH (no Slurm client here); allowed: a machine "
            "that submits to your cluster (sbatch, sinfo, squeue), or --executor local"
        )
    ok, said = _slurm_ok(["sinfo", "-h", "-o", "%P"])
    if not ok:
        conf = os.environ.get("SLURM_CONF", "/etc/slurm/slurm.conf (the default)")
        raise SweepError(
            f"--executor slurm: no Slurm controller answers (SLURM_CONF={conf}): {said}; "
            "allowed: a machine whose Slurm client reaches the cluster, or --executor local"
        )
    listed = subprocess.run(["sinfo", "-h", "-o", "%P"], capture_output=True, text=True, timeout=60)
    partitions = [p.strip().rstrip("*") for p in listed.stdout.split()]
    default = next((p.rstrip("*") for p in listed.stdout.split() if p.endswith("*")), None)
    partition = options.partition or default
    if options.partition is not None and options.partition not in partitions:
        raise SweepError(
            f"--partition {options.partition!r} is not a partition of this cluster; allowed: "
            f"{', '.join(partitions)}"
        )
    if partition is None:
        return
    nodes = subprocess.run(
        ["sinfo", "-h", "-N", "-p", partition, "-o", "%N|%G"], capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    rows = [line.split("|", 1) for line in nodes.stdout.splitlines() if "|" in line]
    count = len({name for name, _ in rows})
    most = max((_gpus_of(gres) for _, gres in rows), default=0)
    if options.nodes > count:
        raise SweepError(
            f"--nodes {options.nodes}: partition {partition} has {count} node(s); allowed: "
            f"--nodes 1 to {count}, or a larger partition"
        )
    if options.gpus_per_node > most:
        raise SweepError(
            f"--gpus-per-node {options.gpus_per_node}: each cell would ask "
            f"{options.gpus_per_node} GPUs per node, and the nodes of partition {partition} have "
            f"at most {most}; allowed: --gpus-per-node 0 to {most}, or another partition"
        )
