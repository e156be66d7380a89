"""A real one-node Slurm cluster for the tests in this folder (tools/slurm/local_cluster.sh).

``slurm_cluster`` yields the environment a Slurm client needs (``SLURM_CONF``): the cluster
``SLURM_CONF`` names when it answers (``.ci/run`` and ``make slurm-up`` start one before the tests),
else one this session starts (root, the Debian packages installed) and stops at its end. Where
none can start, the tests skip with one line that says why; on CI (``CI=true``) they fail instead.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CLUSTER_SCRIPT = REPO / "tools/slurm/local_cluster.sh"
DEFAULT_CONF = Path(os.environ.get("BUDGETED_SLURM_DIR", "/tmp/budgeted-slurm")) / "slurm.conf"
SLURM_COMMANDS = ("sbatch", "scontrol", "squeue", "scancel", "sinfo", "slurmctld", "slurmd")
SYSTEM_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])

# the helpers of the Detectron2 and MMEngine tests (toy configs, log readers, test hooks)
for folder in ("detectron2", "mmengine"):
    if str(REPO / "tests" / folder) not in sys.path:
        sys.path.insert(0, str(REPO / "tests" / folder))


def cluster_answers(conf: str) -> bool:
    """Whether the cluster of ``conf`` answers ``sinfo`` with a usable node."""
    if not Path(conf).is_file() or shutil.which("sinfo") is None:
        return False
    try:
        states = subprocess.run(
            ["sinfo", "-h", "-N", "-o", "%T"], env={**os.environ, "SLURM_CONF": conf},
            capture_output=True, text=True, timeout=30,
        ).stdout.split()  # fmt: skip
    except subprocess.TimeoutExpired:
        return False
    return any(s.rstrip("*~#").startswith(("idle", "mixed", "allocated")) for s in states)


def unavailable(why: str) -> None:
    """Skip with ``why``; on CI (``CI=true``), where these tests must run, fail."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI needs the local Slurm cluster: {why}", pytrace=False)
    pytest.skip(why)


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[dict[str, str]]:
    """``{"SLURM_CONF": path}`` of a running local cluster (partitions ``low``, the default, and
    ``high``, which preempts it; 2 stand-in GPUs)."""
    conf = os.environ.get("SLURM_CONF") or str(DEFAULT_CONF)
    if cluster_answers(conf):
        yield {"SLURM_CONF": conf}
        return
    missing = [name for name in SLURM_COMMANDS if shutil.which(name, path=SYSTEM_PATH) is None]
    if missing:
        unavailable(
            f"no Slurm cluster: {', '.join(missing)} not installed (as root, `make slurm-up` "
            "installs Debian's slurmctld, slurmd, slurm-client, munge and starts one)"
        )
    if os.geteuid() != 0:
        unavailable(f"no Slurm cluster: starting one needs root (this user is uid {os.geteuid()})")
    if "PYTEST_XDIST_WORKER" in os.environ:  # one worker must not stop it under the other
        unavailable("no Slurm cluster up: start it before pytest-xdist runs (`make slurm-up`)")
    started = subprocess.run(
        ["bash", str(CLUSTER_SCRIPT), "start"], capture_output=True, text=True, timeout=900
    )
    if started.returncode != 0:
        said = started.stderr.strip().splitlines() or [f"exit status {started.returncode}"]
        unavailable(f"the local Slurm cluster did not start: {said[-1]}")
    conf = started.stdout.strip().splitlines()[-1].split("=", 1)[1]
    yield {"SLURM_CONF": conf}
    subprocess.run(["bash", str(CLUSTER_SCRIPT), "stop"], capture_output=True, timeout=300)
