"""Partitioning, per-rank parts with halo plans, and the on-disk part cache (real graphs, no mocks).

Here: the in-process cases (no process started); the others are in `tests/e2e/test_partition.py`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from gnnq.config.schema import SyntheticDatasetConfig
from gnnq.data.graph import Graph
from gnnq.data.loaders.synthetic import generate_sbm
from gnnq.data.part import Part, build_parts
from gnnq.data.part_cache import cache_key, load_part, prepare_parts
from gnnq.data.partition import PARTITIONERS, is_symmetric_canonical, metis_adjacency, partition_nodes
from gnnq.data.registry import load_dataset
from gnnq.errors import PartitionError
from tests.helpers import random_graph


def sbm(num_nodes: int = 2000, seed: int = 0) -> Graph:
    return generate_sbm(
        num_nodes=num_nodes, avg_degree=12.0, num_classes=8, feature_dim=16, homophily=0.9, feature_noise=3.0, seed=seed
    )


def edge_cut(g: Graph, parts: np.ndarray) -> int:
    return int((parts[g.edge_index[0]] != parts[g.edge_index[1]]).sum())


@pytest.fixture(scope="module")
def sbm2000() -> Graph:
    return sbm()


# --- partition_nodes --------------------------------------------------------------------


@pytest.mark.parametrize("method", PARTITIONERS)
@pytest.mark.parametrize("nparts", [1, 2, 3, 4, 7])
def test_every_node_gets_a_part_in_range(method, nparts):
    g = random_graph()
    parts = partition_nodes(g.edge_index, g.num_nodes, nparts, method, seed=0)
    assert isinstance(parts, np.ndarray) and parts.dtype == np.int64
    assert parts.shape == (g.num_nodes,)
    assert parts.min() >= 0 and parts.max() < nparts
    assert set(np.unique(parts).tolist()) == set(range(nparts)), "every part must get nodes"


@pytest.mark.parametrize("nparts", [2, 3, 4, 8])
def test_metis_is_balanced_and_cuts_far_fewer_edges_than_random(sbm2000, nparts):
    g = sbm2000
    metis = partition_nodes(g.edge_index, g.num_nodes, nparts, "metis", seed=0)
    rand = partition_nodes(g.edge_index, g.num_nodes, nparts, "random", seed=0)
    sizes = np.bincount(metis, minlength=nparts)
    assert sizes.max() <= 1.1 * sizes.mean(), sizes
    assert sizes.min() > 0
    rsizes = np.bincount(rand, minlength=nparts)
    assert rsizes.max() - rsizes.min() <= 1, rsizes
    assert rsizes.sum() == g.num_nodes
    cut_m, cut_r = edge_cut(g, metis), edge_cut(g, rand)
    # Random cuts about (1 - 1/k) of the edges; METIS on a homophilous SBM a small fraction.
    assert cut_r > 0.4 * g.num_edges
    assert cut_m < 0.5 * cut_r, (cut_m, cut_r)


@pytest.mark.parametrize("method", PARTITIONERS)
def test_same_seed_same_assignment(sbm2000, method):
    g = sbm2000
    a = partition_nodes(g.edge_index, g.num_nodes, 4, method, seed=3)
    b = partition_nodes(g.edge_index.copy(), g.num_nodes, 4, method, seed=3)
    np.testing.assert_array_equal(a, b)


def test_random_different_seed_different_assignment():
    g = random_graph()
    a = partition_nodes(g.edge_index, g.num_nodes, 3, "random", seed=0)
    b = partition_nodes(g.edge_index, g.num_nodes, 3, "random", seed=1)
    assert (a != b).any()


@pytest.mark.parametrize("nparts", [1, 4, 9])
def test_random_exactly_balanced(nparts):
    g = random_graph(num_nodes=91)
    sizes = np.bincount(partition_nodes(g.edge_index, g.num_nodes, nparts, "random", seed=5), minlength=nparts)
    assert sizes.max() - sizes.min() <= 1 and sizes.sum() == 91


@pytest.mark.parametrize("method", PARTITIONERS)
@pytest.mark.parametrize("nparts", [0, -1, 91, 1000])
def test_impossible_part_count_is_a_clear_error(method, nparts):
    g = random_graph(num_nodes=90)
    with pytest.raises(PartitionError) as excinfo:
        partition_nodes(g.edge_index, g.num_nodes, nparts, method, seed=0)
    msg = str(excinfo.value)
    assert "\n" not in msg
    assert "90" in msg and str(nparts) in msg, msg


def test_unknown_method_is_a_clear_error():
    g = random_graph()
    with pytest.raises(PartitionError) as excinfo:
        partition_nodes(g.edge_index, g.num_nodes, 2, "spectral", seed=0)
    msg = str(excinfo.value)
    assert "spectral" in msg and "metis" in msg and "random" in msg and "\n" not in msg


def test_metis_empty_parts_are_a_clear_error():
    # 10 nodes into 10 parts: METIS leaves parts empty; that must not reach the ranks.
    g = random_graph(num_nodes=10, num_edges=30)
    try:
        parts = partition_nodes(g.edge_index, g.num_nodes, 10, "metis", seed=0)
    except PartitionError as exc:
        assert "empty" in str(exc) and "\n" not in str(exc)
    else:
        assert np.bincount(parts, minlength=10).min() > 0


# --- build_parts invariants -------------------------------------------------------------


def check_parts(g: Graph, assignment: np.ndarray, parts: list[Part]) -> None:
    """Every invariant a rank's Part must satisfy, checked against the global graph."""
    n = g.num_nodes
    nparts = len(parts)
    src, dst = g.edge_index
    in_deg = np.bincount(dst, minlength=n)
    out_deg = np.bincount(src, minlength=n)
    assert [p.rank for p in parts] == list(range(nparts))

    # inner ids partition all nodes, and match the assignment
    all_inner = np.concatenate([p.inner_ids.numpy() for p in parts])
    assert all_inner.size == n and np.array_equal(np.sort(all_inner), np.arange(n))
    for p in parts:
        inner = p.inner_ids.numpy()
        assert np.array_equal(inner, np.flatnonzero(assignment == p.rank)), "inner ids sorted, owned by rank"

    for p in parts:
        r = p.rank
        inner, halo = p.inner_ids.numpy(), p.halo_ids.numpy()
        for name in ("inner_ids", "halo_ids", "halo_counts", "indptr", "indices", "send_idx", "send_counts"):
            assert getattr(p, name).dtype == torch.int64, name
        assert p.nparts == nparts and p.num_global_nodes == n
        assert p.num_classes == g.num_classes and p.multilabel == g.multilabel and p.metric == g.metric

        # halo = remote in-neighbours of inner nodes, ordered by (owner, global id)
        mine = assignment[dst] == r
        expected = np.unique(src[mine & (assignment[src] != r)])
        expected = sorted(expected.tolist(), key=lambda v: (assignment[v], v))
        assert halo.tolist() == expected
        assert np.array_equal(p.halo_counts.numpy(), np.bincount(assignment[halo], minlength=nparts))
        assert int(p.halo_counts[r]) == 0 and int(p.halo_counts.sum()) == p.num_halo

        # the local CSR reproduces exactly the global in-edges of inner nodes
        node_ids = np.concatenate([inner, halo])
        indptr, indices = p.indptr.numpy(), p.indices.numpy()
        assert indptr.shape == (inner.size + 1,) and indptr[0] == 0 and (np.diff(indptr) >= 0).all()
        assert indptr[-1] == indices.size == int(mine.sum())
        assert indices.size == 0 or (indices.min() >= 0 and indices.max() < node_ids.size)
        local = set()
        for i, v in enumerate(inner):
            row = node_ids[indices[indptr[i] : indptr[i + 1]]]
            assert len(set(row.tolist())) == row.size, "no duplicated in-edges"
            local.update(zip(row.tolist(), [int(v)] * row.size))
        glob = set(zip(src[mine].tolist(), dst[mine].tolist()))
        assert local == glob
        # every halo row is used by at least one edge (no useless rows on the wire)
        assert set(indices[indices >= inner.size].tolist()) == set(range(inner.size, node_ids.size))

        # degrees are global, not local
        assert p.in_degree.dtype == torch.float32 and p.out_degree.dtype == torch.float32
        assert np.array_equal(p.in_degree.numpy(), in_deg[inner].astype(np.float32))
        assert np.array_equal(p.out_degree.numpy(), out_deg[node_ids].astype(np.float32))

        # features, labels and masks are the inner rows' ones; no global data in a part
        assert p.x.shape == (inner.size, g.num_features)
        assert np.array_equal(p.x.numpy(), g.x[inner])
        assert np.array_equal(p.y.numpy(), g.y[inner])
        for m in ("train_mask", "val_mask", "test_mask"):
            assert getattr(p, m).dtype == torch.bool
            assert np.array_equal(getattr(p, m).numpy(), getattr(g, m)[inner])
        rows = {
            "inner_ids": inner.size,
            "x": inner.size,
            "y": inner.size,
            "in_degree": inner.size,
            "train_mask": inner.size,
            "val_mask": inner.size,
            "test_mask": inner.size,
            "out_degree": node_ids.size,
            "halo_ids": halo.size,
            "indptr": inner.size + 1,
            "indices": int(mine.sum()),
            "halo_counts": nparts,
            "send_counts": nparts,
        }
        tensors = {k: t for k, t in p.to_dict().items() if isinstance(t, torch.Tensor)}
        assert set(tensors) == set(rows) | {"send_idx"}, "unexpected tensors in a part"
        for name, size in rows.items():
            assert tensors[name].shape[0] == size, f"{name}: {tuple(tensors[name].shape)}, expected {size} rows"

    # send plan: rows r sends to q equal q's halo block owned by r, in order
    for p in parts:
        r = p.rank
        counts = p.send_counts.numpy()
        assert counts.shape == (nparts,) and counts[r] == 0
        assert counts.sum() == p.send_idx.numel()
        offsets = np.concatenate([[0], np.cumsum(counts)])
        send_global = p.inner_ids.numpy()[p.send_idx.numpy()] if p.send_idx.numel() else np.empty(0, np.int64)
        for q in parts:
            qc = q.halo_counts.numpy()
            start = int(qc[:r].sum())
            block = q.halo_ids.numpy()[start : start + int(qc[r])]
            assert counts[q.rank] == int(qc[r])
            assert np.array_equal(send_global[offsets[q.rank] : offsets[q.rank + 1]], block), (r, q.rank)


@pytest.mark.parametrize("method", PARTITIONERS)
@pytest.mark.parametrize("nparts", [1, 2, 3, 4])
@pytest.mark.parametrize("directed", [True, False])
def test_build_parts_invariants(method, nparts, directed):
    g = random_graph(num_nodes=90, num_edges=400, seed=nparts, directed=directed)
    assignment = partition_nodes(g.edge_index, g.num_nodes, nparts, method, seed=0)
    check_parts(g, assignment, build_parts(g, assignment, nparts))


@pytest.mark.parametrize("nparts", [2, 4])
def test_build_parts_invariants_on_sbm(nparts):
    g = sbm(num_nodes=600, seed=1)
    assignment = partition_nodes(g.edge_index, g.num_nodes, nparts, "metis", seed=0)
    check_parts(g, assignment, build_parts(g, assignment, nparts))


def test_build_parts_with_an_arbitrary_assignment():
    # An interleaved, unbalanced assignment stresses the (owner, id) halo order and the send plan.
    g = random_graph(num_nodes=60, num_edges=300, seed=7)
    assignment = (np.arange(60) * 7 % 3).astype(np.int64)
    assignment[:5] = 2
    check_parts(g, assignment, build_parts(g, assignment, 3))


def test_build_parts_multilabel():
    g = random_graph(num_nodes=50, num_edges=200, seed=2)
    rng = np.random.default_rng(0)
    g = dataclasses.replace(
        g, y=(rng.random((50, 5)) < 0.3).astype(np.float32), num_classes=5, multilabel=True, metric="micro_f1"
    )
    g.validate()
    assignment = partition_nodes(g.edge_index, g.num_nodes, 3, "random", seed=0)
    parts = build_parts(g, assignment, 3)
    check_parts(g, assignment, parts)
    assert all(p.y.shape == (p.num_inner, 5) and p.y.dtype == torch.float32 for p in parts)


def test_build_parts_edgeless_graph():
    g = random_graph(num_nodes=20, num_edges=40)
    g.edge_index = np.zeros((2, 0), dtype=np.int64)
    assignment = partition_nodes(g.edge_index, g.num_nodes, 3, "random", seed=0)
    parts = build_parts(g, assignment, 3)
    check_parts(g, assignment, parts)
    assert all(p.num_halo == 0 and p.send_idx.numel() == 0 for p in parts)


# --- part cache -------------------------------------------------------------------------


def assert_parts_equal(a: Part, b: Part) -> None:
    for f in dataclasses.fields(Part):
        va, vb = getattr(a, f.name), getattr(b, f.name)
        if isinstance(va, torch.Tensor):
            assert isinstance(vb, torch.Tensor) and va.dtype == vb.dtype and torch.equal(va, vb), f.name
        else:
            assert va == vb and type(va) is type(vb), f.name


def synthetic_graph(tmp_path: Path, **kw) -> Graph:
    return load_dataset(SyntheticDatasetConfig(num_nodes=kw.pop("num_nodes", 400), root=str(tmp_path), **kw))


def leftovers(cache_root: Path) -> list[str]:
    return [p.name for p in Path(cache_root).iterdir() if p.name.startswith(".") or "tmp" in p.name]


def test_prepare_parts_reuses_its_entry(tmp_path):
    g = synthetic_graph(tmp_path)
    root = tmp_path / "parts"
    entry1, meta1 = prepare_parts(g, "metis", 0, 3, root)
    meta_file = entry1 / "meta.json"
    stamp = os.stat(meta_file).st_mtime_ns
    part_stamps = [os.stat(entry1 / f"part{r}.pt").st_mtime_ns for r in range(3)]
    time.sleep(0.02)
    g2 = synthetic_graph(tmp_path)  # same inputs, freshly generated
    entry2, meta2 = prepare_parts(g2, "metis", 0, 3, root)
    assert entry2 == entry1 and meta2 == meta1
    assert os.stat(meta_file).st_mtime_ns == stamp, "second call rebuilt the entry"
    assert [os.stat(entry1 / f"part{r}.pt").st_mtime_ns for r in range(3)] == part_stamps
    assert sorted(p.name for p in root.iterdir()) == [entry1.name]
    assert meta1["nparts"] == 3 and meta1["partitioner"] == "metis" and meta1["seed"] == 0
    assert meta1["num_nodes"] == g.num_nodes and meta1["num_edges"] == g.num_edges
    assert sum(meta1["inner_nodes"]) == g.num_nodes
    assert json.loads(meta_file.read_text()) == meta1
    assert sorted(p.name for p in entry1.iterdir()) == ["meta.json", "part0.pt", "part1.pt", "part2.pt"]


def test_cache_key_covers_every_input(tmp_path):
    g = synthetic_graph(tmp_path)
    root = tmp_path / "parts"
    base, _ = prepare_parts(g, "metis", 0, 2, root)

    extra_edge = dataclasses.replace(g, edge_index=g.edge_index.copy())
    n = g.num_nodes
    present = set((g.edge_index[0] * n + g.edge_index[1]).tolist())
    u, v = next((u, v) for u in range(n) for v in range(u + 1, n) if u * n + v not in present)
    extra_edge.edge_index = np.concatenate([g.edge_index, [[u], [v]]], axis=1)
    feat = dataclasses.replace(g, x=g.x.copy())
    feat.x[0, 0] += 1.0
    label = dataclasses.replace(g, y=g.y.copy())
    label.y[0] = (g.y[0] + 1) % g.num_classes
    split = dataclasses.replace(g, train_mask=g.train_mask.copy(), test_mask=g.test_mask.copy())
    i = int(np.flatnonzero(g.train_mask)[0])
    split.train_mask[i], split.test_mask[i] = False, True

    variants = {
        "edge": (extra_edge, "metis", 0, 2),
        "feature": (feat, "metis", 0, 2),
        "label": (label, "metis", 0, 2),
        "split": (split, "metis", 0, 2),
        "partitioner": (g, "random", 0, 2),
        "seed": (g, "metis", 1, 2),
        "nparts": (g, "metis", 0, 3),
    }
    entries = {base}
    for what, (graph, method, seed, nparts) in variants.items():
        entry, meta = prepare_parts(graph, method, seed, nparts, root)
        assert entry not in entries, f"a changed {what} reused a cache entry"
        entries.add(entry)
        assert meta["nparts"] == nparts and meta["partitioner"] == method and meta["seed"] == seed
        assert meta["num_edges"] == graph.num_edges
    assert len(list(root.iterdir())) == len(variants) + 1
    assert leftovers(root) == []
    # the key is a pure function of its inputs
    assert cache_key("abc", "metis", 0, 2) == cache_key("abc", "metis", 0, 2)
    assert (
        len(
            {
                cache_key("abc", "metis", 0, 2),
                cache_key("abd", "metis", 0, 2),
                cache_key("abc", "random", 0, 2),
                cache_key("abc", "metis", 1, 2),
                cache_key("abc", "metis", 0, 3),
            }
        )
        == 5
    )


def test_changed_synthetic_config_changes_the_key(tmp_path):
    root = tmp_path / "parts"
    a, _ = prepare_parts(synthetic_graph(tmp_path, seed=0), "random", 0, 2, root)
    b, _ = prepare_parts(synthetic_graph(tmp_path, seed=1), "random", 0, 2, root)
    c, _ = prepare_parts(synthetic_graph(tmp_path, num_nodes=401), "random", 0, 2, root)
    assert len({a, b, c}) == 3


@pytest.mark.parametrize("method", PARTITIONERS)
def test_load_part_round_trips(tmp_path, method):
    g = synthetic_graph(tmp_path)
    entry, meta = prepare_parts(g, method, 0, 3, tmp_path / "parts")
    expected = build_parts(g, partition_nodes(g.edge_index, g.num_nodes, 3, method, 0), 3)
    loaded = [load_part(entry, r) for r in range(3)]
    for a, b in zip(loaded, expected):
        assert_parts_equal(a, b)
    assert meta["inner_nodes"] == [p.num_inner for p in expected]
    assert meta["halo_nodes"] == [p.num_halo for p in expected]
    assert meta["edge_cut"] == edge_cut(g, partition_nodes(g.edge_index, g.num_nodes, 3, method, 0))
    # what is on disk loads under weights_only (no pickled code)
    raw = torch.load(entry / "part0.pt", weights_only=True)
    assert set(raw) == {f.name for f in dataclasses.fields(Part)}


def test_failed_build_leaves_nothing_behind(tmp_path):
    g = random_graph(num_nodes=10, num_edges=20)
    root = tmp_path / "parts"
    with pytest.raises(PartitionError):
        prepare_parts(g, "random", 0, 11, root)
    assert not root.exists() or list(root.iterdir()) == []
    entry, _ = prepare_parts(g, "random", 0, 2, root)
    assert [p.name for p in root.iterdir()] == [entry.name]


def test_metis_gets_a_symmetric_graph_as_it_is_and_a_directed_one_symmetrized(sbm2000):
    g = sbm2000  # undirected: both directions, canonical
    assert is_symmetric_canonical(*g.edge_index, g.num_nodes)
    xadj, adjncy = metis_adjacency(g.edge_index, g.num_nodes)
    assert np.shares_memory(adjncy, g.edge_index)  # no copy of a products-size edge list
    assert xadj[-1] == g.num_edges and np.array_equal(
        np.diff(xadj), np.bincount(g.edge_index[0], minlength=g.num_nodes)
    )
    d = random_graph(directed=True)
    assert not is_symmetric_canonical(*d.edge_index, d.num_nodes)
    xadj, adjncy = metis_adjacency(d.edge_index, d.num_nodes)
    rows = np.repeat(np.arange(d.num_nodes), np.diff(xadj))
    got = set(zip(rows.tolist(), adjncy.tolist()))
    src, dst = d.edge_index.tolist()
    assert got == set(zip(src, dst)) | set(zip(dst, src)) and len(got) == adjncy.size
