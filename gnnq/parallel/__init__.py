from gnnq.parallel.overlap import OverlapStrategy
from gnnq.parallel.sync import SyncStrategy

STRATEGIES = {"sync": SyncStrategy, "overlap": OverlapStrategy}

__all__ = ["STRATEGIES", "OverlapStrategy", "SyncStrategy"]
