"""Amazon / Coauthor npz loaders: PyG's file format read from small files written here, the authors' split."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from gnnq.data.loaders.npz import NPZ_FILES, authors_split, npz_path
from gnnq.data.registry import load_dataset
from gnnq.errors import DatasetError


def _write_npz(path, labels: np.ndarray, num_features: int = 6, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """An npz in the Amazon/Coauthor format: CSR adjacency (with one self loop) and counts as features."""
    rng = np.random.default_rng(seed)
    n = labels.size
    adj = (rng.random((n, n)) < 3 / n).astype(np.float32)
    adj[0, 0] = 1.0
    attr = rng.integers(0, 3, size=(n, num_features)).astype(np.float32) * (rng.random((n, num_features)) < 0.5)

    def csr(m):
        rows, cols = np.nonzero(m)
        return (
            m[rows, cols],
            cols.astype(np.int32),
            np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=m.shape[0]))]).astype(np.int32),
        )

    a_data, a_idx, a_ptr = csr(adj)
    x_data, x_idx, x_ptr = csr(attr)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(
        path,
        adj_data=a_data,
        adj_indices=a_idx,
        adj_indptr=a_ptr,
        adj_shape=np.array(adj.shape),
        attr_data=x_data,
        attr_indices=x_idx,
        attr_indptr=x_ptr,
        attr_shape=np.array(attr.shape),
        labels=labels,
    )
    return adj, attr


def _cfg(name: str, root) -> object:
    return OmegaConf.create({"name": name, "root": str(root), "download": False, "to_undirected": True})


@pytest.mark.parametrize("name", sorted(NPZ_FILES))
def test_each_loader_reads_its_npz_as_pyg_does(tmp_path, name):
    labels = np.repeat(np.arange(3), 700)  # 2100 nodes, 3 classes: room for 60 train, 1000 test, 1000 val
    adj, attr = _write_npz(npz_path(name, tmp_path), labels)
    assert npz_path(name, tmp_path).parent == tmp_path / NPZ_FILES[name][0] / "raw"  # PyG's layout
    graph = load_dataset(_cfg(name, tmp_path))
    assert graph.num_nodes == 2100 and graph.num_classes == 3 and np.array_equal(graph.y, labels)
    assert np.array_equal(graph.x, (attr > 0).astype(np.float32))  # binarized, as PyG reads them
    src, dst = graph.edge_index
    expected = {(int(a), int(b)) for a, b in zip(*np.nonzero(adj)) if a != b}
    assert set(zip(src.tolist(), dst.tolist())) == expected | {(b, a) for a, b in expected}  # no self loops, undirected
    assert graph.train_mask.sum() == 60 and graph.test_mask.sum() == 1000 and graph.val_mask.sum() == 1000
    assert np.array_equal(graph.train_mask, authors_split(labels, 3)[0])


def test_the_split_is_the_authors_rule_exactly():
    """Their input_data.py: per class, seed 100 then a permutation of that class's nodes, its first 20 train;
    the other nodes permuted after seeding 100 again: the first 1000 test, the next 1000 validation."""
    labels = np.random.default_rng(1).integers(0, 5, size=2600)
    train, val, test = authors_split(labels, 5)
    y = torch.as_tensor(labels)
    expected_train = torch.zeros(2600, dtype=torch.bool)
    state = torch.random.get_rng_state()
    try:
        for c in range(5):
            idx = (y == c).nonzero().view(-1)
            torch.manual_seed(100)
            expected_train[idx[torch.randperm(idx.numel())[:20]]] = True
        rest = (~expected_train).nonzero().view(-1)
        torch.manual_seed(100)
        rest = rest[torch.randperm(rest.numel())]
    finally:
        torch.random.set_rng_state(state)
    assert np.array_equal(train, expected_train.numpy())
    assert np.flatnonzero(test).tolist() == sorted(rest[:1000].tolist())
    assert np.flatnonzero(val).tolist() == sorted(rest[1000:2000].tolist())
    assert [int(train[labels == c].sum()) for c in range(5)] == [20] * 5
    assert not (train & val).any() and not (train & test).any() and not (val & test).any()


def test_missing_or_foreign_file_is_one_line_naming_it(tmp_path):
    with pytest.raises(
        DatasetError, match=r"amazon-photo: files missing in .*Photo/raw: need amazon_electronics_photo.npz"
    ):
        load_dataset(_cfg("amazon-photo", tmp_path))
    path = npz_path("coauthor-cs", tmp_path)
    path.parent.mkdir(parents=True)
    np.savez(path, labels=np.zeros(3))
    with pytest.raises(DatasetError, match=r"coauthor-cs: .*ms_academic_cs.npz lacks the arrays adj_data"):
        load_dataset(_cfg("coauthor-cs", tmp_path))
