from gnnq.parallel.sync import SyncStrategy

STRATEGIES = {"sync": SyncStrategy}

__all__ = ["STRATEGIES", "SyncStrategy"]
