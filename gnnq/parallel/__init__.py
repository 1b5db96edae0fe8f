"""Parallel strategies: when and how halo rows move between ranks during training.

Which strategy ``parallel.name`` names is gnnq.config.registry.PARALLEL's to say.
"""

from gnnq.config.registry import PARALLEL
from gnnq.parallel.overlap import OverlapStrategy
from gnnq.parallel.sampling import SamplingStrategy
from gnnq.parallel.sancus import SancusStrategy
from gnnq.parallel.stale import StaleStrategy
from gnnq.parallel.sync import SyncStrategy

# The full-graph strategies by name (the choices of PARALLEL that have one).
STRATEGIES = {name: PARALLEL.target(name) for name in PARALLEL.names() if PARALLEL.choice(name).target is not None}


def _options(pcfg, seed: int) -> dict:
    """The strategy's own keyword arguments from its ``parallel.*`` keys."""
    if pcfg.name == "stale":
        return {"momentum": pcfg.momentum, "warmup": pcfg.warmup, "smooth": pcfg.smooth}
    if pcfg.name == "sampling":
        return {"rate": pcfg.sampling_rate, "seed": seed, "sample_size": pcfg.sample_size}
    if pcfg.name == "overlap":
        return {"split": pcfg.split}
    if pcfg.name == "sancus":
        return {"threshold": pcfg.threshold, "max_staleness": pcfg.max_staleness}
    return {}


def make_strategy(pcfg, exchange, graph, x_inner, seed: int):
    """The strategy ``parallel.name`` names, with its own keys from ``parallel.*``."""
    return PARALLEL.target(pcfg.name)(exchange, graph, x_inner, **_options(pcfg, seed))


__all__ = ["STRATEGIES", "OverlapStrategy", "SamplingStrategy", "SancusStrategy", "StaleStrategy", "SyncStrategy", "make_strategy"]
