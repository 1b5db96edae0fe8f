"""Normalized aggregation over one partition's local CSR (columns: inner rows, then halo rows)."""

from __future__ import annotations

import warnings

import torch

from gnnq.data.part import Part


class LocalGraph:
    """A sparse operator A (inner rows × local columns) with a stored transpose for backward."""

    def __init__(self, indptr: torch.Tensor, indices: torch.Tensor, weights: torch.Tensor, num_cols: int):
        num_rows = indptr.numel() - 1
        self.num_rows, self.num_cols = num_rows, num_cols
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
            self.matrix = torch.sparse_csr_tensor(indptr, indices, weights, (num_rows, num_cols), check_invariants=False)
        self.matrix_t = self.matrix.to_sparse_coo().t().coalesce().to_sparse_csr()

    def aggregate(self, h_full: torch.Tensor) -> torch.Tensor:
        return _SpMM.apply(h_full, self)

    def coo(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(rows, cols, weights) of the stored entries, in row order."""
        m = self.matrix
        rows = torch.repeat_interleave(torch.arange(self.num_rows, device=m.values().device), m.crow_indices().diff())
        return rows, m.col_indices(), m.values()


class _SpMM(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h_full, graph: LocalGraph):
        ctx.graph = graph
        return graph.matrix @ h_full

    @staticmethod
    def backward(ctx, grad_out):
        return ctx.graph.matrix_t @ grad_out.contiguous(), None


def gcn_graph(part: Part) -> LocalGraph:
    """D_out^-1/2 (A + I) D_in^-1/2 with global degrees (self loop counted in both)."""
    n = part.num_inner
    inner = torch.arange(n, device=part.indptr.device)
    rows = torch.repeat_interleave(inner, part.indptr.diff())
    # Append one self loop per inner row, then rebuild the CSR in row order.
    rows = torch.cat([rows, inner])
    cols = torch.cat([part.indices, inner])
    deg_in = part.in_degree + 1.0
    deg_out = part.out_degree + 1.0
    weights = deg_out[cols].rsqrt() * deg_in[rows].rsqrt()
    return _from_coo(rows, cols, weights, n, n + part.num_halo)


def mean_graph(part: Part) -> LocalGraph:
    """Mean over in-neighbours: 1 / deg_in(v) (nodes without in-edges aggregate to zero)."""
    n = part.num_inner
    rows = torch.repeat_interleave(torch.arange(n, device=part.indptr.device), part.indptr.diff())
    weights = part.in_degree.clamp(min=1.0).reciprocal()[rows]
    return _from_coo(rows, part.indices, weights, n, n + part.num_halo)


def _from_coo(rows, cols, weights, num_rows, num_cols) -> LocalGraph:
    order = torch.argsort(rows * num_cols + cols)
    rows, cols, weights = rows[order], cols[order], weights[order].float()
    indptr = torch.zeros(num_rows + 1, dtype=torch.int64, device=rows.device)
    indptr[1:] = torch.cumsum(torch.bincount(rows, minlength=num_rows), 0)
    return LocalGraph(indptr, cols, weights, num_cols)


def local_graph_for(model_name: str, part: Part) -> LocalGraph:
    if model_name in ("gcn", "gamlp"):  # a GA-MLP part has no edges; the operator is never used
        return gcn_graph(part)
    if model_name == "sage":
        return mean_graph(part)
    raise ValueError(f"no aggregation operator for model {model_name!r}")
