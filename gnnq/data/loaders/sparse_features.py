"""Sparse input features: a SciPy CSR matrix saved with ``scipy.sparse.save_npz`` (``features.npz``).

The file's arrays are checked before any matrix is built, each failure one line naming the file: a CSR
matrix (not CSC/COO), a consistent shape (indptr of rows + 1 entries from 0 to nnz, indices inside the
columns), numbers that are finite and within float32's range, and column indices sorted and unique within
each row (SciPy's canonical format: what gnnq's products and halo messages assume, and what
``m.sort_indices(); m.sum_duplicates()`` makes).
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from gnnq.data.loaders import one_line
from gnnq.errors import DatasetError

FLOAT32_MAX = float(np.finfo(np.float32).max)
FIX = "save it with scipy.sparse.save_npz(path, m.tocsr()) after m.sum_duplicates() and m.sort_indices()"


def read_sparse_features(path: Path, name: str) -> sp.csr_matrix:
    """The float32 CSR matrix in ``path``; DatasetError (one line naming ``path``) for anything else."""
    arrays = _arrays(path, name)
    fmt = arrays.get("format")
    fmt = (
        fmt.item().decode()
        if fmt is not None and fmt.dtype.kind == "S"
        else str(fmt.item())
        if fmt is not None
        else None
    )
    if fmt != "csr":
        raise DatasetError(f"{name}: {path} holds a {fmt or 'non-SciPy'} matrix, not CSR; {FIX}")
    shape, data, indices, indptr = (arrays.get(k) for k in ("shape", "data", "indices", "indptr"))
    if shape is None or data is None or indices is None or indptr is None:
        raise DatasetError(f"{name}: {path} lacks shape, data, indices or indptr; {FIX}")
    if shape.shape != (2,) or shape.dtype.kind not in "iu" or shape[0] < 1 or shape[1] < 1:
        raise DatasetError(f"{name}: {path} has shape {shape.tolist()}: it must be an N x F matrix with N, F >= 1")
    rows, cols = int(shape[0]), int(shape[1])
    for arr, what in ((indices, "indices"), (indptr, "indptr")):
        if arr.ndim != 1 or arr.dtype.kind not in "iu":
            raise DatasetError(f"{name}: {path}: {what} must be a vector of integers, got {arr.dtype} {arr.shape}")
    nnz = indices.size
    if indptr.size != rows + 1 or indptr[0] != 0 or indptr[-1] != nnz or data.shape != (nnz,):
        raise DatasetError(
            f"{name}: {path} is not a consistent {rows} x {cols} CSR matrix (indptr has {indptr.size} entries from "
            f"{int(indptr[0]) if indptr.size else '-'} to {int(indptr[-1]) if indptr.size else '-'}, {nnz} indices, "
            f"{data.size} values); {FIX}"
        )
    if np.any(np.diff(indptr) < 0):
        raise DatasetError(f"{name}: {path}: indptr decreases at row {int(np.argmax(np.diff(indptr) < 0))}; {FIX}")
    if nnz and (indices.min() < 0 or indices.max() >= cols):
        raise DatasetError(f"{name}: {path} refers to column {int(indices.max())}, but the matrix has {cols} columns")
    if data.dtype.kind not in "biuf":
        raise DatasetError(f"{name}: {path} holds values of dtype {data.dtype}; save numbers (integers or floats)")
    row_of = np.repeat(np.arange(rows), np.diff(indptr))
    bad = ~np.isfinite(data) if data.dtype.kind == "f" else np.zeros(nnz, dtype=bool)
    if bad.any():
        at = int(np.argmax(bad))
        raise DatasetError(
            f"{name}: {path} holds {data[at]} (node {int(row_of[at])}, feature {int(indices[at])}); every feature "
            "must be a finite number"
        )
    if nnz and np.abs(data).max() > FLOAT32_MAX:
        at = int(np.argmax(np.abs(data)))
        raise DatasetError(
            f"{name}: {path} holds {data[at]:g} (node {int(row_of[at])}, feature {int(indices[at])}), beyond float32's "
            f"range (±{FLOAT32_MAX:.1e}), in which gnnq trains: rescale the features"
        )
    step = np.diff(indices.astype(np.int64))
    same_row = row_of[1:] == row_of[:-1]
    for wrong, what in ((step < 0, "unsorted"), (step == 0, "duplicate")):
        hit = wrong & same_row
        if hit.any():
            at = int(np.argmax(hit))
            raise DatasetError(
                f"{name}: {path} has {what} column indices in row {int(row_of[at])} (column {int(indices[at + 1])} "
                f"after {int(indices[at])}); {FIX}"
            )
    matrix = sp.csr_matrix(
        (data.astype(np.float32), indices.astype(np.int64), indptr.astype(np.int64)), shape=(rows, cols)
    )
    matrix.has_sorted_indices = True  # checked above
    return matrix


def _arrays(path: Path, name: str) -> dict[str, np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as npz:
            return {k: npz[k] for k in npz.files}
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as exc:
        raise DatasetError(
            f"{name}: {path} is not a readable .npz file ({one_line(exc)}); write it with scipy.sparse.save_npz"
        ) from None
