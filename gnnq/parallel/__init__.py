"""Parallel strategies: when and how halo rows move between ranks during training."""

from gnnq.parallel.overlap import OverlapStrategy
from gnnq.parallel.sampling import SamplingStrategy
from gnnq.parallel.stale import StaleStrategy
from gnnq.parallel.sync import SyncStrategy

STRATEGIES = {"sync": SyncStrategy, "overlap": OverlapStrategy, "stale": StaleStrategy, "sampling": SamplingStrategy}


def make_strategy(pcfg, exchange, graph, x_inner, seed: int):
    """The strategy ``parallel.name`` names, with its own keys from ``parallel.*``."""
    if pcfg.name == "stale":
        return StaleStrategy(exchange, graph, x_inner, momentum=pcfg.momentum)
    if pcfg.name == "sampling":
        return SamplingStrategy(exchange, graph, x_inner, rate=pcfg.sampling_rate, seed=seed)
    return STRATEGIES[pcfg.name](exchange, graph, x_inner)


__all__ = ["STRATEGIES", "OverlapStrategy", "SamplingStrategy", "StaleStrategy", "SyncStrategy", "make_strategy"]
