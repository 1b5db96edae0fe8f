"""The cluster choices, one class each (local, emulated, slurm, multinode): how many ranks, where they run,
which of them share this machine's memory, what starts them and what the run's summary says about them.

A cluster is one registry line (``gnnq.config.registry.CLUSTERS``: schema, this package's class, value checks in
``gnnq.config.clusters``), one file under conf/cluster/ and its class here; tests/unit/test_cluster_registry.py fails
when an entry lacks a part. Nothing else compares cluster names.
"""

from __future__ import annotations

from omegaconf import DictConfig

from gnnq.config.registry import CLUSTERS
from gnnq.launch.clusters.base import Cluster


def cluster_class(cfg: DictConfig) -> type[Cluster]:
    """The class of the run's ``cluster.name`` (its registry entry's target)."""
    return CLUSTERS.target(cfg.cluster.name)


def cluster_of(cfg: DictConfig) -> Cluster:
    return cluster_class(cfg)(cfg)
