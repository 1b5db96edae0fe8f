from gnnq.models.gnn import GNN
from gnnq.models.graph_ops import LocalGraph, local_graph_for

__all__ = ["GNN", "LocalGraph", "local_graph_for"]
