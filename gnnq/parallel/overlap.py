"""AdaQP's overlap: aggregate what needs no halo row while the halo rows are in flight.

Forward at a hidden layer: post the halo message, then, with ``split="central"`` (AdaQP's
published split), aggregate the central rows (no halo in-neighbour), wait, aggregate the
marginal rows; with ``split="columns"`` (the default), aggregate every row's inner columns
A[:, inner] @ h_inner, wait, add the halo columns' A[:, halo] @ h_halo. On graphs where nearly
every row has a halo in-neighbour (a dense SBM cut four ways: no central row at all) only the
second hides anything. Backward: compute the halo rows' gradients first (they depend on marginal
rows only), post them, compute the inner rows' gradients, wait, add what came back. The
arithmetic is that of ``sync``; only the order differs, so results agree to fp32 rounding.
"""

from __future__ import annotations

import warnings
from typing import ClassVar

import torch

from gnnq.comm.direction import Direction
from gnnq.comm.halo import HaloExchange, Traffic, inner_gradient
from gnnq.models.graph_ops import LocalGraph
from gnnq.parallel.sync import SyncStrategy


class CentralMarginal:
    """AdaQP's split of inner rows: *central* rows have no halo in-neighbour, *marginal* rows do.

    Holds the pieces of A needed to aggregate central rows before the halo rows arrive, and,
    in backward, to compute the halo rows' gradients before the inner ones:
    ``central`` = A[central, inner], ``marginal`` = A[marginal, :], ``inner_t`` = A[:, inner]^T,
    ``halo_t`` = A[marginal, halo]^T.
    """

    def __init__(self, graph: LocalGraph):
        n, num_cols = graph.num_rows, graph.num_cols
        rows, cols, w = graph.coo()
        has_halo = torch.zeros(n, dtype=torch.bool, device=rows.device)
        has_halo[rows[cols >= n]] = True
        self.central_idx = torch.nonzero(~has_halo).flatten()
        self.marginal_idx = torch.nonzero(has_halo).flatten()
        self.num_rows, self.num_halo = n, num_cols - n
        position = torch.empty(n, dtype=torch.int64, device=rows.device)  # row -> index within its class
        position[self.central_idx] = torch.arange(self.central_idx.numel(), device=rows.device)
        position[self.marginal_idx] = torch.arange(self.marginal_idx.numel(), device=rows.device)
        c, m = ~has_halo[rows], has_halo[rows]
        inner, halo = cols < n, cols >= n
        self.central = _csr(position[rows[c]], cols[c], w[c], (self.central_idx.numel(), n))
        self.marginal = _csr(position[rows[m]], cols[m], w[m], (self.marginal_idx.numel(), num_cols))
        self.inner_t = _csr(cols[inner], rows[inner], w[inner], (n, n))
        mh = m & halo
        self.halo_t = _csr(cols[mh] - n, position[rows[mh]], w[mh], (self.num_halo, self.marginal_idx.numel()))
        # split="columns": A[:, inner] and A[:, halo]
        self.inner_cols = _csr(rows[inner], cols[inner], w[inner], (n, n))
        self.halo_cols = _csr(rows[halo], cols[halo] - n, w[halo], (n, self.num_halo))


def _csr(rows, cols, weights, shape) -> torch.Tensor:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        coo = torch.sparse_coo_tensor(torch.stack([rows, cols]), weights, shape, check_invariants=False).coalesce()
        return coo.to_sparse_csr()


SPLITS = ("columns", "central")


class OverlapStrategy(SyncStrategy):
    config_keys: ClassVar[dict[str, str]] = {"split": "split"}

    def __init__(
        self, exchange: HaloExchange, graph: LocalGraph, x_inner: torch.Tensor, split: str = "columns", inputs="once"
    ):
        if split not in SPLITS:
            raise ValueError(f"parallel.split={split!r}: allowed {', '.join(SPLITS)}")
        super().__init__(exchange, graph, x_inner, inputs)
        self.split, self.by_columns = CentralMarginal(graph), split == "columns"
        exchange.use_side_stream()

    def aggregate_hidden(self, layer: int, h_inner: torch.Tensor, before_dropout=None) -> torch.Tensor:
        return _OverlappedAggregate.apply(h_inner, self, layer, self.traffic)


def _spmm(matrix: torch.Tensor, dense: torch.Tensor) -> torch.Tensor:
    if matrix.shape[0] == 0 or matrix.shape[1] == 0:
        return dense.new_zeros((matrix.shape[0], dense.shape[1]))
    return matrix @ dense


class _OverlappedAggregate(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h_inner, strategy: OverlapStrategy, layer: int, traffic: Traffic):
        ctx.strategy, ctx.layer, ctx.traffic = strategy, layer, traffic
        split, exchange = strategy.split, strategy.exchange
        n, h_full = split.num_rows, strategy.full_rows(layer, h_inner)  # halo rows go straight into h_full[n:]
        pending = exchange.start(h_inner, layer, Direction.FORWARD, traffic, out=h_full[n:])
        if strategy.by_columns:
            out = _spmm(split.inner_cols, h_inner)
            pending.wait()
            return out.add_(_spmm(split.halo_cols, h_full[n:]))
        out = h_inner.new_empty((n, h_inner.shape[1]))
        out.index_copy_(0, split.central_idx, _spmm(split.central, h_inner))
        h_full[:n].copy_(h_inner)
        pending.wait()
        out.index_copy_(0, split.marginal_idx, _spmm(split.marginal, h_full))
        return out

    @staticmethod
    def backward(ctx, grad_out):
        split, exchange = ctx.strategy.split, ctx.strategy.exchange
        grad_out = grad_out.contiguous()
        grad_halo = _spmm(split.halo_t, grad_out.index_select(0, split.marginal_idx))
        grad_inner = inner_gradient(
            exchange,
            grad_halo,
            lambda: _spmm(split.inner_t, grad_out),
            lambda g: exchange.start(g, ctx.layer, Direction.BACKWARD, ctx.traffic),
        )
        return grad_inner, None, None, None
