"""Before anything starts: every point of the run or sweep composed and validated (gnnq.config), then the checks
that need more than the config's values: the dataset's node count (gnnq.data) and, for cluster=slurm, this
install's launcher plugins and one set of resources for all of a sweep's jobs.

Each failure is one ConfigError line; a sweep's names its point (``sweep point #3 of 8 (model=sage ...)``,
numbered from 0 as its job directory ``3_...``).
"""

from __future__ import annotations

import importlib.util

from omegaconf import DictConfig

from gnnq.config.compose import check_config_name, compose_config, compose_point, outside_sweep, sweep_points
from gnnq.data.registry import expected_num_nodes
from gnnq.errors import ConfigError
from gnnq.track.wandb_logger import check_wandb_mode_env


def preflight(overrides: list[str], multirun: bool, config_name: str = "config", config_dir: str | None = None) -> int:
    """Compose and check every point of the run or sweep; return the number of points."""
    return len(plan(overrides, multirun, config_name, config_dir))


def plan(
    overrides: list[str], multirun: bool, config_name: str = "config", config_dir: str | None = None
) -> list[tuple[list[str], DictConfig]]:
    """Every point of the run or sweep: its overrides and its composed, checked config (ConfigError otherwise)."""
    check_config_name(config_name, config_dir)
    if not multirun:
        cfg = compose_config(overrides, config_name, config_dir)
        check_point(cfg)
        check_slurm(cfg, [])
        return [(overrides, cfg)]
    points = sweep_points(overrides, config_name, config_dir)
    n = len(points)
    composed = [(point, compose_point(point, i, n, config_name, config_dir)) for i, point in enumerate(points)]
    for i, (point, cfg) in enumerate(composed):
        try:
            check_point(cfg)
        except ConfigError as exc:
            raise ConfigError(f"sweep point #{i} of {n} ({' '.join(point)}): {exc}") from None
    clusters = [cfg.cluster for _, cfg in composed]
    if any(c.name == "slurm" for c in clusters):
        check_slurm(compose_config(outside_sweep(overrides), config_name, config_dir), clusters)
    return composed


def check_point(cfg: DictConfig) -> None:
    """What one validated config needs of the data: no more partitions (ranks) than the dataset has nodes,
    where the count is known before loading (gnnq.data.registry.expected_num_nodes)."""
    if cfg.logger.name == "wandb":  # a bad WANDB_MODE is a config error: nothing runs, nothing is written
        check_wandb_mode_env()
    nparts = cfg.cluster.nproc * cfg.cluster.hosts
    num_nodes = expected_num_nodes(cfg.dataset)
    if num_nodes is not None and nparts > num_nodes:
        raise ConfigError(
            f"cluster.nproc={cfg.cluster.nproc} x cluster.hosts={cfg.cluster.hosts} = {nparts} partitions, "
            f"but dataset {cfg.dataset.name} has only {num_nodes} nodes; use at most {num_nodes} ranks"
        )


def check_slurm(cfg: DictConfig, sweep_clusters: list[DictConfig]) -> None:
    """cluster=slurm: its launcher is installed, and no sweep point asks for other resources than ``cfg``,
    the config without the sweep's values, from which Hydra's launcher takes every job's sbatch parameters."""
    if cfg.cluster.name != "slurm" and not sweep_clusters:
        return
    if cfg.cluster.name == "slurm" and importlib.util.find_spec("hydra_plugins.hydra_submitit_launcher") is None:
        raise ConfigError(
            "cluster=slurm needs hydra-submitit-launcher, which is not installed: pip install -e '.[slurm]'"
        )
    if cfg.cluster.name == "slurm" and importlib.util.find_spec("hydra_plugins.gnnq_slurm_launcher") is None:
        raise ConfigError(
            "cluster=slurm needs gnnq's launcher plugin (hydra_plugins/gnnq_slurm_launcher/), which this install "
            "of gnnq "
            "does not provide: reinstall it from the checkout, pip install -e '.[slurm]'"
        )
    for point in sweep_clusters:
        for key in point:
            if key != "timeout_s" and point[key] != cfg.cluster[key]:
                name = "cluster" if key == "name" else f"cluster.{key}"
                raise ConfigError(
                    f"{name}={point[key]} in a sweep point, {cfg.cluster[key]} outside the sweep: with "
                    "cluster=slurm every "
                    f"job of a sweep gets the resources of the config without the sweep's values; give {name} outside "
                    "the sweep (one gnnq command per value)"
                )
