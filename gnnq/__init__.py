"""gnnq: communication-efficient distributed full-graph GNN training and benchmarking."""

__version__ = "0.1.0"
