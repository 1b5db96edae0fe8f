"""What config knows of a cluster without the launcher: its world size and the checks of its own values.

A cluster choice is one registry line (``gnnq.config.registry.CLUSTERS``): its schema (``gnnq.config.schema``), its
class in ``gnnq/launch/clusters/<name>.py`` (placement, memory, how its ranks start, what it prepares) and the
function here that checks its own values (``check``, given the whole config). validate.py dispatches on the
registry, never on a name.
"""

from __future__ import annotations

from typing import Any, Mapping

from omegaconf import DictConfig, ListConfig

from gnnq.contract import EMULATED_MAX_HOSTS, MANAGED_SBATCH_OPTIONS
from gnnq.errors import ConfigError


def world_size(cfg: Any) -> int | None:
    """How many ranks a run has: ``cluster.nproc`` x ``cluster.hosts`` of a config (or a record's config dict);
    None when either is missing or not an integer (a record written by hand)."""
    cluster = cfg["cluster"] if isinstance(cfg, Mapping) or isinstance(cfg, DictConfig) else cfg.cluster
    nproc, hosts = cluster.get("nproc"), cluster.get("hosts")
    return nproc * hosts if isinstance(nproc, int) and isinstance(hosts, int) else None


def check_local(cfg: DictConfig) -> None:
    c = cfg.cluster
    if c.hosts != 1:
        raise ConfigError(f"cluster.hosts={c.hosts} is not allowed with cluster={c.name}; it must be 1")


def check_emulated(cfg: DictConfig) -> None:
    c = cfg.cluster
    if c.hosts > EMULATED_MAX_HOSTS:
        raise ConfigError(
            f"cluster.hosts={c.hosts} is not allowed with cluster={c.name}; it must be <= {EMULATED_MAX_HOSTS}"
        )
    if c.backend != "gloo":
        raise ConfigError(
            f"cluster.backend={c.backend} is not allowed with cluster={c.name}; it must be gloo "
            "(NCCL between processes on one machine goes through shared memory, around the shaped links)"
        )
    if c.link == "custom" and (c.bandwidth_mbit is None or c.bandwidth_mbit <= 0):
        raise ConfigError(
            f"cluster.bandwidth_mbit={c.bandwidth_mbit} is not allowed with cluster.link=custom; it must be > 0 "
            "(Mbit/s)"
        )
    if c.link != "custom" and c.bandwidth_mbit is not None:
        raise ConfigError(
            f"cluster.bandwidth_mbit={c.bandwidth_mbit} is not allowed with cluster.link={c.link} (a preset); "
            "use cluster.link=custom, or null"
        )
    if c.jitter_ms > 0 and c.latency_ms == 0:
        raise ConfigError(
            f"cluster.jitter_ms={c.jitter_ms} is not allowed with cluster.latency_ms=0; jitter varies a latency"
        )


def check_slurm(cfg: DictConfig) -> None:
    c = cfg.cluster
    for key, low in (("gpus_per_node", 0), ("cpus_per_node", 1)):
        if c[key] is not None and c[key] < low:
            raise ConfigError(f"cluster.{key}={c[key]} is not allowed; it must be null or >= {low}")
    if c.backend == "nccl" and c.gpus_per_node is not None and c.gpus_per_node < c.nproc:
        raise ConfigError(
            f"cluster.gpus_per_node={c.gpus_per_node} is not allowed with cluster.backend=nccl and "
            f"cluster.nproc={c.nproc}: "
            f"every rank needs a GPU of its own; it must be null or >= {c.nproc}"
        )
    for key, value in c.sbatch_extra.items():
        option = str(key).replace("-", "_")
        if option.startswith("_"):
            raise ConfigError(f"cluster.sbatch_extra.{key} is not allowed; name the option without leading dashes")
        if option in MANAGED_SBATCH_OPTIONS:
            raise ConfigError(
                f"cluster.sbatch_extra.{key} is not allowed: gnnq sets --{option.replace('_', '-')} from "
                f"{MANAGED_SBATCH_OPTIONS[option]}"
            )
        if isinstance(value, (DictConfig, ListConfig)) or value is None or value is False:
            raise ConfigError(
                f"cluster.sbatch_extra.{key}={value} is not allowed; give a string, a number or true (a flag "
                "without value), "
                "or leave the key out"
            )


def check_multinode(cfg: DictConfig) -> None:
    c = cfg.cluster
    endpoint = c.rendezvous
    host, _, port = (endpoint or "").rpartition(":")
    if not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ConfigError(
            f"cluster.rendezvous={'null' if endpoint is None else endpoint} is not allowed with "
            f"cluster={c.name}; give host:port of this node, "
            "which the other nodes reach (e.g. node1:29400)"
        )
