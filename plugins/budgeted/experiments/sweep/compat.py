"""The one place the sweep reads a framework's private name (issue 42, item 7).

submitit offers no public list of the parameters ``SlurmExecutor.update_parameters`` takes; its
own ``AutoExecutor`` reads them with the private ``SlurmExecutor._valid_parameters()``, and so
does the sweep, here only. tests/experiments/test_sweep_compat.py fails when submitit changes it.
"""

from __future__ import annotations

__all__ = ["SUBMITIT_VERSION", "submitit_parameters"]

SUBMITIT_VERSION = "1.5.4"
"""The submitit version :func:`submitit_parameters` was written for."""


def submitit_parameters() -> frozenset[str]:
    """The Slurm parameters submitit names itself (``SlurmExecutor._valid_parameters()``, private
    in submitit 1.5.4): ``mem``, ``gpus_per_node``, ``constraint``, ... ."""
    from submitit.slurm.slurm import SlurmExecutor

    return frozenset(SlurmExecutor._valid_parameters())
