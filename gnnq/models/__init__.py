from gnnq.models.gnn import GNN, MODELS
from gnnq.models.graph_ops import LocalGraph, local_graph_for

__all__ = ["GNN", "MODELS", "LocalGraph", "local_graph_for"]
