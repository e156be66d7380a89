"""budgeted.mmengine.launch: gloo on CPUs, configured before MMEngine starts."""

from __future__ import annotations

import pytest
from mmengine.config import Config

from budgeted.mmengine.launch import (
    init_cpu_distributed,
    needs_cpu_distributed,
    prepare_cpu_distributed,
)

pytestmark = pytest.mark.unit


def test_cpu_distributed_config_uses_gloo_bn_and_no_device_ids():
    cfg = Config(
        dict(
            model=dict(
                backbone=dict(norm_cfg=dict(type="SyncBN")),
                heads=[dict(norm_cfg=dict(type="SyncBN")), dict(norm_cfg=dict(type="GN"))],
            ),
            env_cfg=dict(dist_cfg=dict(backend="nccl", timeout=60)),
        )
    )
    assert prepare_cpu_distributed(cfg) == 2
    assert cfg.model.backbone.norm_cfg.type == "BN" and cfg.model.heads[1].norm_cfg.type == "GN"
    assert cfg.env_cfg.dist_cfg == dict(backend="gloo", timeout=60)
    assert cfg.model_wrapper_cfg == dict(type="MMDistributedDataParallel", device_ids=None)


def test_launcher_without_its_environment_is_one_line(monkeypatch):
    for key in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(key, raising=False)
    with pytest.raises(ValueError, match="RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT are not set"):
        init_cpu_distributed("pytorch")
    with pytest.raises(ValueError, match="launcher='none' is invalid"):
        init_cpu_distributed("none")
    assert needs_cpu_distributed("none") is False


@pytest.mark.parametrize(
    ("launcher", "variables", "starter"),
    [
        ("slurm", "SLURM_PROCID, SLURM_NTASKS", "srun, as tools/slurm_train.sh does"),
        ("mpi", "OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE", "mpirun"),
    ],
)
def test_slurm_and_mpi_outside_their_jobs_are_one_line(monkeypatch, launcher, variables, starter):
    for key in ("RANK", "WORLD_SIZE", *variables.split(", ")):
        monkeypatch.delenv(key, raising=False)
    with pytest.raises(ValueError) as err:
        init_cpu_distributed(launcher)
    assert str(err.value) == (
        f"--launcher {launcher}: environment variables {variables} are not set; start the "
        f"processes with {starter}"
    )
