"""Which launcher a multirun gets (gnnq_warm by default, basic to opt out, Slurm's for cluster=slurm) and which
points the warm pool serves (gnnq/launch/warm_pool.py). The pool's runs: tests/e2e/test_warm_sweep.py."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

from gnnq.config.compose import CONF_DIR, register_configs
from gnnq.launch.warm_pool import pool_key


def _compose(overrides: list[str]):
    register_configs()
    GlobalHydra.instance().clear()
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        return compose("config", overrides=overrides, return_hydra_config=True)


@pytest.mark.parametrize(
    "overrides, target",
    [
        ([], "hydra_plugins.gnnq_warm_launcher.gnnq_warm_launcher.GnnqWarmLauncher"),
        (["hydra/launcher=basic"], "hydra._internal.core_plugins.basic_launcher.BasicLauncher"),
        (["cluster=slurm"], "hydra_plugins.gnnq_slurm_launcher.gnnq_slurm_launcher.GnnqSlurmLauncher"),
    ],
)
def test_the_launcher_of_a_multirun(overrides, target):
    assert _compose(overrides).hydra.launcher._target_ == target


def test_the_pool_serves_local_gloo_points_keyed_by_world_size_and_timeout():
    local = _compose(["cluster.nproc=3", "cluster.timeout_s=60", "cluster.backend=gloo"])
    assert pool_key(local) == (3, 60.0)
    assert pool_key(_compose(["cluster.nproc=3", "cluster.timeout_s=60", "dataset=cora"])) == (3, 60.0)
    assert pool_key(_compose(["cluster.backend=nccl"])) is None
    assert pool_key(_compose(["cluster=emulated"])) is None
