"""Parallel strategies: when and how halo rows move between ranks during training.

Which strategy ``parallel.name`` names is gnnq.config.registry.PARALLEL's to say; each strategy class
builds itself from its ``parallel.*`` keys (``from_config``) and declares its ``resources``.
"""

from gnnq.config.registry import FULL_GRAPH_TRAINER, PARALLEL
from gnnq.parallel.overlap import OverlapStrategy
from gnnq.parallel.sampling import SamplingStrategy
from gnnq.parallel.sancus import SancusStrategy
from gnnq.parallel.stale import StaleStrategy
from gnnq.parallel.sync import SyncStrategy

# The full-graph strategies by name (the choices of PARALLEL that the full-graph trainer runs).
STRATEGIES = {
    name: PARALLEL.target(name) for name in PARALLEL.names() if PARALLEL.choice(name).trainer == FULL_GRAPH_TRAINER
}


def make_strategy(pcfg, exchange, graph, x_inner, seed: int):
    """The strategy ``parallel.name`` names, with its own keys from ``parallel.*``."""
    return PARALLEL.target(pcfg.name).from_config(pcfg, exchange, graph, x_inner, seed)


__all__ = [
    "STRATEGIES",
    "OverlapStrategy",
    "SamplingStrategy",
    "SancusStrategy",
    "StaleStrategy",
    "SyncStrategy",
    "make_strategy",
]
