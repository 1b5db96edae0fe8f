"""Distributed full-graph training computes exactly what one process computes on the whole graph.

Here: the in-process cases (no process started); the others are in `tests/integration/test_equivalence.py`.
"""

from __future__ import annotations

import pytest
import torch

from gnnq.data.part import build_parts
from gnnq.data.partition import partition_nodes
from gnnq.models import local_graph_for
from tests.helpers import random_graph


@pytest.mark.parametrize("model_name", ["gcn", "sage"])
def test_central_marginal_split_covers_the_operator(model_name):
    """Central rows have no halo column; the four pieces are exactly the blocks of A that overlap uses."""
    from gnnq.parallel.overlap import CentralMarginal

    graph = random_graph(num_nodes=400, num_edges=900, seed=5)
    for part in build_parts(graph, partition_nodes(graph.edge_index, graph.num_nodes, 3, "metis", 1), 3):
        op = local_graph_for(model_name, part)
        split = CentralMarginal(op)
        a, n = op.matrix.to_dense(), op.num_rows
        central, marginal = split.central_idx, split.marginal_idx
        assert central.numel() > 0 and marginal.numel() > 0, "the graph should have both kinds of rows"
        assert torch.equal(torch.sort(torch.cat([central, marginal])).values, torch.arange(n))
        assert not a[central][:, n:].any() and a[marginal][:, n:].any(dim=1).all()
        assert torch.equal(split.central.to_dense(), a[central][:, :n])
        assert torch.equal(split.marginal.to_dense(), a[marginal])
        assert torch.equal(split.inner_t.to_dense(), a[:, :n].T)
        assert torch.equal(split.halo_t.to_dense(), a[marginal][:, n:].T)
        assert torch.equal(split.inner_cols.to_dense(), a[:, :n]) and torch.equal(split.halo_cols.to_dense(), a[:, n:])
