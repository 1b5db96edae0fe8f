"""cluster=slurm: each run is one sbatch job Hydra's submitit launcher submits; inside it srun starts one torchrun
per node (gnnq.launch.slurm). The ranks run on the job's nodes: their memory is Slurm's to check unless
``cluster.memory_limit_gib`` says otherwise; a sweep's jobs all get the resources of the config outside the sweep."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Callable

from omegaconf import DictConfig

from gnnq.errors import ConfigError
from gnnq.launch.clusters.base import Cluster
from gnnq.launch.collect import collect_result
from gnnq.launch.run_dir import ranks_log
from gnnq.launch.slurm import current_job, srun_command
from gnnq.launch.torchrun import run_torchrun


class SlurmCluster(Cluster):
    one_job_per_run = True

    def ranks_here(self, estimates: list[float]) -> list[float]:
        c = self.c
        return max((estimates[h * c.nproc : (h + 1) * c.nproc] for h in range(c.hosts)), key=sum)

    def checks_memory_here(self) -> bool:
        return self.c.memory_limit_gib is not None  # else the ranks run on compute nodes, not on this (submit) host

    @classmethod
    def check_install(cls, cfg: DictConfig) -> None:
        if importlib.util.find_spec("hydra_plugins.hydra_submitit_launcher") is None:
            raise ConfigError(
                "cluster=slurm needs hydra-submitit-launcher, which is not installed: pip install -e '.[slurm]'"
            )
        if importlib.util.find_spec("hydra_plugins.gnnq_slurm_launcher") is None:
            raise ConfigError(
                "cluster=slurm needs gnnq's launcher plugin (hydra_plugins/gnnq_slurm_launcher/), which this install "
                "of gnnq "
                "does not provide: reinstall it from the checkout, pip install -e '.[slurm]'"
            )

    @classmethod
    def check_sweep(cls, outside: DictConfig, points: list[DictConfig]) -> None:
        """No sweep point asks for other resources than ``outside``, from which Hydra's launcher takes every job's
        sbatch parameters."""
        for point in points:
            for key in point:
                if key != "timeout_s" and point[key] != outside.cluster[key]:
                    name = "cluster" if key == "name" else f"cluster.{key}"
                    raise ConfigError(
                        f"{name}={point[key]} in a sweep point, {outside.cluster[key]} outside the sweep: with "
                        "cluster=slurm every "
                        f"job of a sweep gets the resources of the config without the sweep's values; give {name} "
                        "outside the sweep (one gnnq command per value)"
                    )

    def start(self, run_dir: Path, parts_dir: Path, say: Callable[[str], None], follow: Callable[[dict], None]) -> dict:
        c = self.c
        job = current_job(c.hosts)
        say(
            f"launching {c.hosts} node(s) x {c.nproc} rank(s) with srun and torchrun (Slurm job {job.job_id}) "
            f"{self.methods()}"
        )
        log = ranks_log(run_dir)
        code = run_torchrun(srun_command(c, job, run_dir, parts_dir), log, follow)
        return {**collect_result(run_dir, code, [log]), "slurm": job.describe()}
