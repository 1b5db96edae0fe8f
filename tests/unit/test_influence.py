"""Row influence α: gnnq's backward weight is exact for its returned gradients (checked against the
whole graph's operator), and AdaQP's published per-holder weight (quantizer.backward_influence=adaqp) differs.

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


def _published_backward_weights(graph, parts_of, model_name: str) -> dict[tuple[int, int], float]:
    """AdaQP's rule, from the whole edge list: for node u and holder q, the sum over q's nodes w with an edge
    w→u of deg_out(w)^-1/2 deg_in(u)^-1/2 (GCN, self loops counted) or 1/deg_out(w) (SAGE)."""
    src, dst = graph.edge_index
    deg_out = np.bincount(src, minlength=graph.num_nodes)
    deg_in = np.bincount(dst, minlength=graph.num_nodes)
    weights: dict[tuple[int, int], float] = {}
    for w, u in zip(src.tolist(), dst.tolist()):
        holder = int(parts_of[w])
        if holder == parts_of[u]:
            continue
        if model_name == "sage":
            value = 1.0 / max(deg_out[w], 1)
        else:
            value = (deg_out[w] + 1.0) ** -0.5 * (deg_in[u] + 1.0) ** -0.5
        weights[(u, holder)] = weights.get((u, holder), 0.0) + value
    return weights


def _sent_rows(part) -> list[tuple[int, int]]:
    """(global node id, holder rank) of every row ``part`` sends, in send order."""
    holders = torch.repeat_interleave(torch.arange(part.nparts), part.send_counts)
    return list(zip(part.inner_ids[part.send_idx].tolist(), holders.tolist()))


def _toy_parts():
    """The path 0-1-2-3-4-5 plus the edge 2-5, both directions, no self loops; parts {0,1,2} and {3,4,5}."""
    edges = [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (2, 5)]
    graph = random_graph(num_nodes=6, num_edges=1, seed=0)
    graph.edge_index = np.array(
        [[a for a, b in edges] + [b for a, b in edges], [b for a, b in edges] + [a for a, b in edges]]
    )
    return build_parts(graph, np.array([0, 0, 0, 1, 1, 1]), 2)


@pytest.mark.parametrize(
    "model_name, expected",
    [
        ("sage", {(2, 1): 1.0, (3, 0): 1 / 3, (5, 0): 1 / 3}),
        # GCN, degrees + 1 for the self loop (node 2: 4; nodes 3, 4, 5: 3): node 2 gets 2 x 3^-1/2 4^-1/2
        ("gcn", {(2, 1): 2 / (3**0.5 * 2), (3, 0): 1 / (2 * 3**0.5), (5, 0): 1 / (2 * 3**0.5)}),
    ],
)
def test_adaqp_backward_weight_per_holder_on_the_toy_graph(model_name, expected):
    """AdaQP's α_bwd is one value per holder, over the holder's own nodes w with an edge w→u: on the toy graph the
    boundary nodes 2, 3 and 5 get 1.0 / 0.333 / 0.333 for SAGE (the sum over all in-neighbours of u, which gnnq
    used before, gives 1.5 / 0.833 / 0.833); for GCN it is not the owner's row sum either."""
    got = {}
    for part in _toy_parts():
        got.update(zip(_sent_rows(part), adaqp_backward_sums(model_name, part).tolist()))
    assert got.keys() == expected.keys()
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, rel=1e-6), key


@pytest.mark.parametrize("model_name", ["gcn", "sage"])
def test_adaqp_backward_weight_is_the_published_formula(model_name):
    """On a random directed graph in 3 parts every sent row carries AdaQP's per-holder weight, which is not the
    exact weight of gnnq's returned gradients (the owner's whole row sum)."""
    graph, parts = _parts(3)
    parts_of = np.empty(graph.num_nodes, dtype=np.int64)
    for part in parts:
        parts_of[part.inner_ids.numpy()] = part.rank
    published = _published_backward_weights(graph, parts_of, model_name)
    exact = _global_backward_weight(graph, model_name)
    differs = False
    for part in parts:
        rows = _sent_rows(part)
        ours = adaqp_backward_sums(model_name, part).numpy()
        np.testing.assert_allclose(ours, [published.get(row, 0.0) for row in rows], rtol=1e-5, atol=1e-7)
        differs |= not np.allclose(ours, exact[[u for u, _ in rows]].numpy())
    assert differs, "the labelled option must change α"
