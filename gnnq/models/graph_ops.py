"""Normalized aggregation over one partition's local CSR (columns: inner rows, then halo rows).

The operator and its transpose use int32 indices whenever they fit (torch's CSR matmul takes them on CPU and
GPU): a products-size part has tens of millions of entries, and every byte per entry counts four times (the
operator, its transpose, and the sort that builds each). Built one array at a time, dropping what is no longer
needed (docs/runs.md#resources).
"""

from __future__ import annotations

import torch

from gnnq.data.part import Part
from gnnq.data.sparse_rows import csr_tensor

INT32_LIMIT = 2**31 - 1


def index_dtype(entries: int, size: int) -> torch.dtype:
    """int32 when ``entries`` stored entries and ``size`` rows or columns fit in it, else int64."""
    return torch.int32 if max(entries, size) <= INT32_LIMIT else torch.int64


class LocalGraph:
    """A sparse operator A (inner rows × local columns) with a stored transpose for backward."""

    def __init__(self, indptr: torch.Tensor, indices: torch.Tensor, weights: torch.Tensor, num_cols: int):
        num_rows = indptr.numel() - 1
        self.num_rows, self.num_cols = num_rows, num_cols
        self.matrix = sparse_csr(indptr, indices, weights, (num_rows, num_cols))
        self.matrix_t = transposed(self.matrix)

    def aggregate(self, h_full: torch.Tensor) -> torch.Tensor:
        return _SpMM.apply(h_full, self)

    def coo(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(rows, cols, weights) of the stored entries, in row order; int64 indices."""
        m = self.matrix
        return row_of_each_entry(m).long(), m.col_indices().long(), m.values()


class _SpMM(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h_full, graph: LocalGraph):
        ctx.graph = graph
        return graph.matrix @ h_full

    @staticmethod
    def backward(ctx, grad_out):
        return ctx.graph.matrix_t @ grad_out.contiguous(), None


def sparse_csr(indptr, indices, values, shape) -> torch.Tensor:
    return csr_tensor(indptr, indices, values, shape)


def row_of_each_entry(matrix: torch.Tensor) -> torch.Tensor:
    """The row of every stored entry of a CSR ``matrix``, in its index dtype."""
    crow = matrix.crow_indices()
    return torch.repeat_interleave(torch.arange(matrix.shape[0], dtype=crow.dtype, device=crow.device), crow.diff())


def transposed(matrix: torch.Tensor) -> torch.Tensor:
    """``matrix``^T as CSR with the same index dtype: a stable sort of the columns keeps each column's entries in
    row order, the order coalescing the transposed COO matrix gives (the same tensors, bit for bit)."""
    num_rows, num_cols = matrix.shape
    cols = matrix.col_indices()
    order = torch.argsort(cols, stable=True)
    counts = torch.bincount(cols, minlength=num_cols)
    indptr = torch.zeros(num_cols + 1, dtype=cols.dtype, device=cols.device)
    indptr[1:] = torch.cumsum(counts, 0)
    del counts
    rows = row_of_each_entry(matrix)[order]
    return sparse_csr(indptr, rows, matrix.values()[order], (num_cols, num_rows))


def gcn_graph(part: Part) -> LocalGraph:
    """D_out^-1/2 (A + I) D_in^-1/2 with global degrees (self loop counted in both)."""
    n = part.num_inner
    return _from_coo(*_gcn_entries(part), n, n + part.num_halo)


def _gcn_entries(part: Part) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(rows, cols, weights): the part's in-edges, then one self loop per inner row."""
    n = part.num_inner
    idx = index_dtype(part.indices.numel() + n, n + part.num_halo)
    inner = torch.arange(n, dtype=idx, device=part.indptr.device)
    rows = torch.cat([torch.repeat_interleave(inner, part.indptr.diff()), inner])
    cols = torch.cat([part.indices.to(idx), inner])
    weights = (part.out_degree + 1.0)[cols].rsqrt_()
    weights *= (part.in_degree + 1.0)[rows].rsqrt_()
    return rows, cols, weights


def mean_graph(part: Part) -> LocalGraph:
    """Mean over in-neighbours: 1 / deg_in(v) (nodes without in-edges aggregate to zero)."""
    n = part.num_inner
    return _from_coo(*_mean_entries(part), n, n + part.num_halo)


def _mean_entries(part: Part) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    n = part.num_inner
    idx = index_dtype(part.indices.numel(), n + part.num_halo)
    rows = torch.repeat_interleave(torch.arange(n, dtype=idx, device=part.indptr.device), part.indptr.diff())
    return rows, part.indices.to(idx), part.in_degree.clamp(min=1.0).reciprocal()[rows]


def _from_coo(rows, cols, weights, num_rows, num_cols) -> LocalGraph:
    """The operator of entries (rows, cols, weights), sorted by row, then column; the caller hands the arrays
    over (this function drops each as soon as it is used)."""
    counts = torch.bincount(rows, minlength=num_rows)
    key = rows.to(torch.int64)
    del rows
    key.mul_(num_cols).add_(cols)
    order = torch.argsort(key)
    del key
    cols, weights = cols[order], weights[order].float()
    del order
    indptr = torch.zeros(num_rows + 1, dtype=cols.dtype, device=cols.device)
    indptr[1:] = torch.cumsum(counts, 0)
    return LocalGraph(indptr, cols, weights, num_cols)


def from_coo(rows, cols, weights, num_rows: int, num_cols: int) -> LocalGraph:
    """The operator of the entries (rows, cols, weights) of a ``num_rows`` x ``num_cols`` matrix (any order)."""
    return _from_coo(rows, cols, weights, num_rows, num_cols)


def local_graph_for(model_name: str, part: Part) -> LocalGraph:
    if model_name in ("gcn", "gamlp"):  # a GA-MLP part has no edges; the operator is never used
        return gcn_graph(part)
    if model_name == "sage":
        return mean_graph(part)
    raise ValueError(f"no aggregation operator for model {model_name!r}")
