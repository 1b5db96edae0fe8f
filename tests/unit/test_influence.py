"""Row influence α: gnnq's backward weight is exact for its returned gradients (checked against the
whole graph's operator), and AdaQP's published SAGE weight (quantizer.backward_influence=adaqp) differs.

Here: the in-process cases (no process started); the others are in `tests/integration/test_influence.py`.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gnnq.adaptive.influence import adaqp_backward_sums, local_sums
from gnnq.data.part import build_parts
from gnnq.data.partition import partition_nodes
from gnnq.models import local_graph_for
from tests.helpers import random_graph


def _parts(nparts: int):
    graph = random_graph(num_nodes=150, num_edges=1200, seed=5)
    return graph, build_parts(graph, partition_nodes(graph.edge_index, graph.num_nodes, nparts, "metis", 1), nparts)


def _global_backward_weight(graph, model_name: str) -> torch.Tensor:
    """Through the whole graph's operator: the total weight with which a unit error in the gradient of
    node u's aggregation output reaches the aggregation's inputs (autograd through the real backward)."""
    (whole,) = build_parts(graph, np.zeros(graph.num_nodes, dtype=np.int64), 1)
    op = local_graph_for(model_name, whole)
    n = whole.num_inner
    x = torch.zeros(n, n, requires_grad=True)
    op.aggregate(x).backward(torch.eye(n))  # column u of the output gradient: a unit error at node u only
    weight = torch.zeros(graph.num_nodes)
    weight[whole.inner_ids] = x.grad.sum(dim=0)
    return weight


@pytest.mark.parametrize("model_name", ["gcn", "sage"])
def test_returned_gradient_weight_is_exact_against_the_whole_graph(model_name):
    """gnnq returns halo u's partial gradient to its owner, which adds it to dL/dh_u and sends it on
    through its operator transposed: the owner's local row sum must equal the global weight."""
    graph, parts = _parts(3)
    exact = _global_backward_weight(graph, model_name)
    for part in parts:
        local = local_sums(local_graph_for(model_name, part))["inner_row_sums"]
        torch.testing.assert_close(local.double(), exact[part.inner_ids].double(), rtol=1e-5, atol=1e-6)
    if model_name == "sage":  # the mean operator's rows sum to 1 wherever a node has in-edges
        has_in = torch.from_numpy(np.bincount(graph.edge_index[1], minlength=graph.num_nodes) > 0)
        torch.testing.assert_close(exact[has_in], torch.ones(int(has_in.sum())))


def test_adaqp_backward_weight_is_the_published_formula():
    """AdaQP (SAGE): Σ_{w→u} 1/deg_out(w) with global degrees; not the exact weight of gnnq's exchange.
    GCN: AdaQP's formula is the operator's row sum, so there is nothing to replace (None)."""
    graph, parts = _parts(3)
    src, dst = graph.edge_index
    deg_out = np.bincount(src, minlength=graph.num_nodes)
    published = np.zeros(graph.num_nodes)
    np.add.at(published, dst, 1.0 / np.maximum(deg_out[src], 1))
    exact = _global_backward_weight(graph, "sage")
    for part in parts:
        ours = adaqp_backward_sums("sage", part)
        np.testing.assert_allclose(ours.numpy(), published[part.inner_ids.numpy()], rtol=1e-6)
        assert adaqp_backward_sums("gcn", part) is None
    assert not np.allclose(published, exact.numpy()), "the labelled option must change α"
