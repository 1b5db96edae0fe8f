"""The launcher's memory estimates count sparse input features (features.npz, CSR) by their non-zeros: a wide
graph whose dense features would not fit under cluster.memory_limit_gib is not refused when its sparse ones do."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from gnnq.config.compose import compose_config
from gnnq.data.graph import Graph
from gnnq.errors import ConfigError
from gnnq.launch.partition_memory import check_before_partitioning
from gnnq.launch.resources import (
    SPARSE_NONZERO_BYTES,
    SPARSE_ROW_BYTES,
    check_launch_resources,
    feature_row_bytes,
    resource_plan,
)

NODES, FEATURES, WORDS = 20_000, 60_000, 10  # dense: 4.5 GiB of features; sparse: 2.6 MB


def _wide_sparse_graph() -> Graph:
    rng = np.random.default_rng(0)
    cols = rng.choice(FEATURES, (NODES, WORDS)).reshape(-1)
    x = sp.csr_matrix(
        (np.ones(NODES * WORDS, np.float32), (np.repeat(np.arange(NODES), WORDS), cols)), shape=(NODES, FEATURES)
    )
    x.sum_duplicates()
    x.sort_indices()
    edges = rng.integers(0, NODES, (2, 5 * NODES)).astype(np.int64)
    y = rng.integers(0, 4, NODES).astype(np.int64)
    split = rng.random(NODES)
    graph = Graph("wide", edges, x, y, split < 0.6, (split >= 0.6) & (split < 0.8), split >= 0.8, 4)
    graph.validate()
    return graph


def _plan():
    return resource_plan(
        compose_config(["logger=none", "model.hidden=16", "cluster.nproc=2", "cluster.memory_limit_gib=3"])
    )


def test_a_sparse_row_costs_its_non_zeros_and_a_dense_one_its_width():
    graph = _wide_sparse_graph()
    nnz = graph.feature_nonzeros
    assert nnz is not None and NODES * WORDS * 0.99 < nnz <= NODES * WORDS  # a word drawn twice is kept once
    row = feature_row_bytes(FEATURES, nnz, NODES)
    assert row == pytest.approx(SPARSE_NONZERO_BYTES * nnz / NODES + SPARSE_ROW_BYTES)
    assert row < 130 < 4 * FEATURES  # about 128 B against 240,000 B dense
    assert feature_row_bytes(FEATURES, None, NODES) is None  # dense: Shape counts 4 B x features


def test_a_wide_sparse_graph_fits_where_its_dense_features_would_not():
    plan, graph = _plan(), _wide_sparse_graph()
    before = check_before_partitioning(plan, graph, 2, metis=True)  # the ranks' floor: 10,000 inner rows each, no halo
    assert before["rank_floor_mib"] < 600, before
    meta = {"num_nodes": NODES, "num_edges": graph.num_edges, "inner_nodes": [10_000] * 2, "halo_nodes": [8_000] * 2}
    row = feature_row_bytes(graph.num_features, graph.feature_nonzeros, NODES)
    sparse = check_launch_resources(plan, meta, FEATURES, classes=4, feature_bytes=row)
    assert max(sparse) < 600, sparse
    # the same parts counted dense: 18,000 rows x 240 kB, 4.0 GiB of features in each rank
    with pytest.raises(ConfigError, match=r"not enough memory: the 2 rank\(s\) on this host need about 9\.1 GiB"):
        check_launch_resources(plan, meta, FEATURES, classes=4)
