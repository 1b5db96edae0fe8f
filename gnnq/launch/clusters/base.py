"""What every cluster class answers; a subclass overrides only what differs from ranks on one machine."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from omegaconf import DictConfig

from gnnq.config.clusters import world_size


class Cluster:
    """One run's cluster (``cfg.cluster``). The defaults: every rank of the first host runs on this machine."""

    keeps_ranks_warm = False  # a multirun may keep this cluster's ranks across points (gnnq.launch.warm_pool)
    one_job_per_run = False  # Hydra submits each point as its own job: a sweep's points share one set of resources

    def __init__(self, cfg: DictConfig):
        self.cfg, self.c = cfg, cfg.cluster

    @property
    def world_size(self) -> int:
        return world_size(self.cfg)

    def ranks_here(self, estimates: list[float]) -> list[float]:
        """The estimates (one per rank, rank order) of the ranks that share this machine's memory."""
        return estimates[: self.c.nproc]

    def checks_memory_here(self) -> bool:
        """Whether the ranks' memory is checked against this machine's."""
        return True

    def torchrun_agents_here(self) -> int:
        """torchrun agents on this machine beside the ranks (their memory counts too)."""
        return 1

    @classmethod
    def check_install(cls, cfg: DictConfig) -> None:
        """Before anything starts: what this install must provide for the cluster (ConfigError otherwise)."""

    @classmethod
    def check_sweep(cls, outside: DictConfig, points: list[DictConfig]) -> None:
        """one_job_per_run: the config without the sweep's values (``outside``) against every point's cluster."""

    def methods(self) -> str:
        """The run's choices as launch lines name them."""
        return f"({self.cfg.model.name}, {self.cfg.parallel.name}, {self.cfg.quantizer.name})"

    def start(self, run_dir: Path, parts_dir: Path, say: Callable[[str], None], follow: Callable[[dict], None]) -> dict:
        """Start the ranks, follow them (rank 0's epoch rows to ``follow``) and return rank 0's summary plus what the
        cluster adds; LaunchError naming the cause when they fail."""
        raise NotImplementedError
