"""Hydra launcher for local multiruns (gnnq's default, ``hydra/launcher=gnnq_warm``): Hydra's basic launcher, one
point after another in this process, with the ranks kept warm across points (gnnq.launch.warm_pool).

Hydra instantiates launchers only from the ``hydra_plugins`` package, so this class lives here; conf/cluster/local.yaml
selects it and gnnq.config.compose registers it. Points it cannot keep warm (``cluster=emulated``,
``multinode``, a GPU's nccl) run as with the basic launcher, one torchrun each. ``hydra/launcher=basic`` opts out.
"""

from __future__ import annotations

from typing import Sequence

from hydra._internal.core_plugins.basic_launcher import BasicLauncher


class GnnqWarmLauncher(BasicLauncher):
    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int):
        from gnnq.launch.warm_pool import warm_pools

        with warm_pools():
            return super().launch(job_overrides, initial_job_idx)
