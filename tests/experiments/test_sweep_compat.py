"""The sweep's one private framework name (budgeted.experiments.sweep.compat) still means what it
meant: a change in submitit fails here, loudly, not in a user's ``--slurm-option``."""

from __future__ import annotations

import importlib.metadata

import pytest
import submitit
from submitit.slurm.slurm import SlurmExecutor

from budgeted.experiments.sweep.compat import SUBMITIT_VERSION, submitit_parameters
from budgeted.experiments.sweep.slurm_options import OWN_OPTIONS, SET_BY_SWEEP

pytestmark = pytest.mark.unit


def test_submitit_is_the_version_compat_was_written_for():
    assert importlib.metadata.version("submitit") == SUBMITIT_VERSION, (
        "submitit changed: check budgeted/experiments/sweep/compat.py against it, then update "
        "SUBMITIT_VERSION"
    )


def test_submitit_parameters_are_what_update_parameters_takes(tmp_path):
    names = submitit_parameters()
    assert callable(getattr(SlurmExecutor, "_valid_parameters", None)), "submitit renamed it"
    assert {"mem", "gpus_per_node", "constraint", "exclusive", "comment"} <= names
    assert set(OWN_OPTIONS) - {"time_min"} <= names | {"time"}
    assert {"signal_delay_s", "array_parallelism"} <= names & SET_BY_SWEEP
    executor = submitit.SlurmExecutor(folder=tmp_path)
    executor.update_parameters(constraint="a100", exclusive=True)  # a name it lists: taken
    with pytest.raises(ValueError, match="Unavailable parameter"):  # one it does not: refused
        executor.update_parameters(not_a_submitit_parameter=1)
