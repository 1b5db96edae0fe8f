"""GA-MLP inputs [X, AX, ..., A^K X]: the normalized adjacency, the cache, and the edgeless graph."""

from __future__ import annotations

import numpy as np
import pytest

from gnnq.data.gamlp import cache_key, cached_features, gamlp_graph, normalized_adjacency, propagated_features
from gnnq.data.graph import Graph
from gnnq.data.integrity import file_sha256


def _graph(seed: int = 0, n: int = 12) -> Graph:
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, n, 30), rng.integers(0, n, 30)
    edge_index = np.concatenate([np.stack([src, dst]), np.stack([dst, src])], axis=1).astype(np.int64)
    masks = [np.arange(n) % 3 == k for k in range(3)]
    return Graph(
        "toy",
        edge_index,
        rng.random((n, 5), dtype=np.float32),
        rng.integers(0, 3, n).astype(np.int64),
        *masks,
        num_classes=3,
    )


def _dense_normalized(g: Graph) -> np.ndarray:
    a = np.zeros((g.num_nodes, g.num_nodes))
    a[g.edge_index[1], g.edge_index[0]] = 1.0
    np.fill_diagonal(a, 1.0)  # A + I, an existing self loop counted once
    d = a.sum(axis=1)
    return a / np.sqrt(d)[:, None] / np.sqrt(d)[None, :]


def test_normalized_adjacency_matches_the_dense_formula():
    g = _graph()
    assert np.allclose(normalized_adjacency(g.edge_index, g.num_nodes).toarray(), _dense_normalized(g))


@pytest.mark.parametrize("hops", [0, 1, 4])
def test_features_are_the_powers_side_by_side(hops):
    g = _graph()
    a = _dense_normalized(g)
    expected = [g.x.astype(np.float64)]
    for _ in range(hops):
        expected.append(a @ expected[-1])
    got = propagated_features(g, hops)
    assert got.dtype == np.float32 and got.shape == (g.num_nodes, (hops + 1) * g.num_features)
    assert np.allclose(got, np.concatenate(expected, axis=1), atol=1e-6)


def test_cache_is_keyed_by_content_and_hops(tmp_path):
    g = _graph()
    first = cached_features(g, 2, tmp_path)
    assert (tmp_path / f"{cache_key(g, 2)}.npy").is_file()
    keys = {cache_key(g, 2), cache_key(g, 3), cache_key(_graph(seed=1), 2)}
    assert len(keys) == 3
    path = tmp_path / f"{cache_key(g, 2)}.npy"
    np.save(path, first * 2)  # a read, not a recompute: stored with its checksum, as the cache writes it
    path.with_suffix(".sha256").write_text(file_sha256(path))
    assert np.array_equal(cached_features(g, 2, tmp_path), first * 2)
    assert not list(tmp_path.glob(".*"))  # no temporary files left behind


def test_gamlp_graph_keeps_nodes_labels_and_split_and_drops_edges(tmp_path):
    g = _graph()
    h = gamlp_graph(g, 2, tmp_path)
    h.validate()
    assert h.num_edges == 0 and h.num_features == 3 * g.num_features
    assert np.array_equal(h.y, g.y) and np.array_equal(h.test_mask, g.test_mask)
    assert h.fingerprint() != g.fingerprint()


def test_gamlp_is_rowwise_so_training_rows_alone_give_the_same_logits():
    """The training loop runs a row-wise model on the training rows only (gnnq.train.full_graph.forward_backward)."""
    import torch

    from gnnq.models.gamlp import GAMLP

    torch.manual_seed(0)
    model = GAMLP(20, 16, 4, layers=3, dropout=0.0, norm="layer").eval()
    x = torch.randn(50, 20)
    rows = torch.rand(50) < 0.3
    assert GAMLP.rowwise
    assert torch.allclose(model(x)[rows], model(x[rows]), atol=1e-6)
