"""Before anything starts: every point of the run or sweep composed and validated (gnnq.config), then the checks
that need more than the config's values: the dataset's node count (gnnq.data) and, for cluster=slurm, this
install's launcher plugins and one set of resources for all of a sweep's jobs.

Each failure is one ConfigError line; a sweep's names its point (``sweep point #3 of 8 (model=sage ...)``,
numbered from 0 as its job directory ``3_...``).
"""

from __future__ import annotations

from omegaconf import DictConfig

from gnnq.config.clusters import world_size
from gnnq.config.compose import check_config_name, compose_config, compose_point, outside_sweep, sweep_points
from gnnq.data.registry import expected_num_nodes
from gnnq.errors import ConfigError
from gnnq.launch.clusters import cluster_class
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
        cluster_class(cfg).check_install(cfg)
        return [(overrides, cfg)]
    points = sweep_points(overrides, config_name, config_dir)
    n = len(points)
    composed = [(point, compose_point(point, i, n, config_name, config_dir)) for i, point in enumerate(points)]
    for i, (point, cfg) in enumerate(composed):
        try:
            check_point(cfg)
        except ConfigError as exc:
            raise ConfigError(f"sweep point #{i} of {n} ({' '.join(point)}): {exc}") from None
    kinds = {cluster_class(cfg) for _, cfg in composed}
    if any(kind.one_job_per_run for kind in kinds):  # every job gets the resources of the config outside the sweep
        outside = compose_config(outside_sweep(overrides), config_name, config_dir)
        cluster_class(outside).check_install(outside)
        for kind in kinds:
            kind.check_sweep(outside, [cfg.cluster for _, cfg in composed])
    return composed


def check_point(cfg: DictConfig) -> None:
    """What one validated config needs of the data: no more partitions (ranks) than the dataset has nodes,
    where the count is known before loading (gnnq.data.registry.expected_num_nodes)."""
    if cfg.logger.name == "wandb":  # a bad WANDB_MODE is a config error: nothing runs, nothing is written
        check_wandb_mode_env()
    nparts = world_size(cfg)
    num_nodes = expected_num_nodes(cfg.dataset)
    if num_nodes is not None and nparts > num_nodes:
        raise ConfigError(
            f"cluster.nproc={cfg.cluster.nproc} x cluster.hosts={cfg.cluster.hosts} = {nparts} partitions, "
            f"but dataset {cfg.dataset.name} has only {num_nodes} nodes; use at most {num_nodes} ranks"
        )
