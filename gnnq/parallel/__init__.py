from gnnq.parallel.overlap import OverlapStrategy
from gnnq.parallel.stale import StaleStrategy
from gnnq.parallel.sync import SyncStrategy

STRATEGIES = {"sync": SyncStrategy, "overlap": OverlapStrategy, "stale": StaleStrategy}

__all__ = ["STRATEGIES", "OverlapStrategy", "StaleStrategy", "SyncStrategy"]
