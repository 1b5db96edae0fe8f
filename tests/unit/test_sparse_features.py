"""features.npz (a SciPy CSR matrix) in the bring-your-own format: read sparse, equal to the same features dense,
kept sparse in the parts; bad sparse files are refused with one line naming the file."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from gnnq.data.loaders.files import load_files
from gnnq.data.part import build_parts
from gnnq.errors import DatasetError
from tests.reliability.files_graph import write_files_graph


def _sparse_graph(d, n: int = 40):
    """The tiny files graph with features.npz instead of features.npy; returns the CSR features."""
    write_files_graph(d, n=n)
    (d / "features.npy").unlink()
    rng = np.random.default_rng(3)
    x = sp.random(n, 30, density=0.1, format="csr", dtype=np.float32, random_state=rng)
    sp.save_npz(d / "features.npz", x)
    return x


def test_a_csr_npz_loads_sparse_and_equals_its_dense_form(tmp_path):
    x = _sparse_graph(tmp_path / "s")
    g = load_files(tmp_path / "s", 0.5, 0.25, 0)
    assert g.sparse_features and g.num_features == 30 and g.x.format == "csr" and g.x.dtype == np.float32
    assert np.array_equal(g.x.toarray(), x.toarray())
    g.validate()
    dense_dir = tmp_path / "d"
    _sparse_graph(dense_dir)
    (dense_dir / "features.npz").unlink()
    np.save(dense_dir / "features.npy", x.toarray())
    assert load_files(dense_dir, 0.5, 0.25, 0).fingerprint() != g.fingerprint(), "a sparse graph has parts of its own"
    parts = build_parts(g, np.arange(40) % 2, 2)
    for p in parts:
        assert p.x.layout == torch.sparse_csr
        assert torch.equal(p.x.to_dense(), torch.from_numpy(x.toarray()[p.inner_ids.numpy()]))


def _save_arrays(path, **arrays):
    base = {"format": np.array(b"csr"), "shape": np.array([40, 30])}
    np.savez(path, **{**base, **arrays})


def _fails(d, *needles):
    with pytest.raises(DatasetError) as e:
        load_files(d, 0.5, 0.25, 0)
    msg = str(e.value)
    assert "\n" not in msg and "features.npz" in msg, msg
    for needle in needles:
        assert needle in msg, msg


def test_bad_sparse_files_are_refused_with_one_line_naming_the_file(tmp_path):
    d = tmp_path / "g"
    x = _sparse_graph(d)
    npz = d / "features.npz"
    indptr, indices, data = x.indptr, x.indices, x.data

    sp.save_npz(npz, sp.random(41, 30, density=0.1, format="csr", dtype=np.float32))  # a row too many
    _fails(d, "features.npz has 41 rows", "labels.npy has 40")

    bad = data.copy()
    bad[5] = np.nan
    _save_arrays(npz, data=bad, indices=indices, indptr=indptr)
    _fails(d, str(npz), "nan", "finite")

    swapped = indices.copy()
    row = int(np.flatnonzero(np.diff(indptr) >= 2)[0])
    a = indptr[row]
    swapped[a], swapped[a + 1] = indices[a + 1], indices[a]
    _save_arrays(npz, data=data, indices=swapped, indptr=indptr)
    _fails(d, str(npz), f"unsorted column indices in row {row}")

    dup = indices.copy()
    dup[a + 1] = dup[a]
    _save_arrays(npz, data=data, indices=dup, indptr=indptr)
    _fails(d, str(npz), f"duplicate column indices in row {row}")

    _save_arrays(npz, data=data, indices=indices, indptr=indptr[:-1])
    _fails(d, str(npz), "not a consistent 40 x 30 CSR matrix")

    _save_arrays(npz, data=data, indices=indices + 30, indptr=indptr)
    _fails(d, str(npz), "column", "30 columns")

    sp.save_npz(npz, x.tocsc())
    _fails(d, str(npz), "csc matrix, not CSR")

    npz.write_bytes(b"not a zip file")
    _fails(d, str(npz), "not a readable .npz")

    sp.save_npz(npz, x)
    np.save(d / "features.npy", x.toarray())
    _fails(d, "features.npy and features.npz")
