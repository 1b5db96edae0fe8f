"""Hydra launcher for local multiruns (gnnq's default, ``hydra/launcher=gnnq_warm``): Hydra's basic launcher, one
point after another in this process, with the ranks kept warm across points (gnnq.launch.warm_pool).

Hydra instantiates launchers only from the ``hydra_plugins`` package, so this class lives here; conf/cluster/local.yaml
selects it and gnnq.config.compose registers it. Points it cannot keep warm (``cluster=emulated``,
``multinode``, a GPU's nccl) run as with the basic launcher, one torchrun each. ``hydra/launcher=basic`` opts out.
A sweeper that launches one batch at a time (Hydra's Optuna sweeper: one trial per batch) keeps the same pool across
its batches; it is stopped when the process exits.
"""

from __future__ import annotations

import atexit
from contextlib import ExitStack
from typing import Sequence

from hydra._internal.core_plugins.basic_launcher import BasicLauncher


class GnnqWarmLauncher(BasicLauncher):
    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int):
        from gnnq.launch.warm_pool import warm_pools

        if self._batched():
            if getattr(self, "_kept", None) is None:
                self._kept = ExitStack()
                self._kept.enter_context(warm_pools())
                atexit.register(self._kept.close)
            return super().launch(job_overrides, initial_job_idx)
        with warm_pools():
            return super().launch(job_overrides, initial_job_idx)

    def _batched(self) -> bool:
        """Whether the sweeper launches batch after batch (Optuna's), so the pool outlives one ``launch``."""
        sweeper = self.config.hydra.sweeper if self.config is not None else None
        return sweeper is not None and "optuna" in str(sweeper.get("_target_", "")).lower()
