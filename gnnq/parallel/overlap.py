"""AdaQP's overlap: aggregate central rows while the halo rows are in flight.

Forward at a hidden layer: post the halo message, aggregate the central rows (no halo
in-neighbour), wait, aggregate the marginal rows. Backward: compute the halo rows'
gradients first (they depend on marginal rows only), post them, compute the inner rows'
gradients, wait, add what came back. The arithmetic is that of ``sync``; only the order
differs, so results agree to fp32 rounding.
"""

from __future__ import annotations

import torch

from gnnq.comm.halo import HaloExchange
from gnnq.models.graph_ops import CentralMarginal, LocalGraph
from gnnq.parallel.sync import SyncStrategy


class OverlapStrategy(SyncStrategy):
    def __init__(self, exchange: HaloExchange, graph: LocalGraph, x_inner: torch.Tensor):
        super().__init__(exchange, graph, x_inner)
        self.split = CentralMarginal(graph)
        exchange.use_side_stream()

    def aggregate_hidden(self, layer: int, h_inner: torch.Tensor) -> torch.Tensor:
        return _OverlappedAggregate.apply(h_inner, self, layer, self.category)


def _spmm(matrix: torch.Tensor, dense: torch.Tensor) -> torch.Tensor:
    if matrix.shape[0] == 0 or matrix.shape[1] == 0:
        return dense.new_zeros((matrix.shape[0], dense.shape[1]))
    return matrix @ dense


class _OverlappedAggregate(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h_inner, strategy: OverlapStrategy, layer: int, category: str):
        ctx.strategy, ctx.layer, ctx.category = strategy, layer, category
        split, exchange = strategy.split, strategy.exchange
        pending = exchange.start(h_inner, layer, "fwd", category)
        out = h_inner.new_empty((split.num_rows, h_inner.shape[1]))
        out.index_copy_(0, split.central_idx, _spmm(split.central, h_inner))
        h_full = torch.cat([h_inner, pending.wait()])
        out.index_copy_(0, split.marginal_idx, _spmm(split.marginal, h_full))
        return out

    @staticmethod
    def backward(ctx, grad_out):
        split, exchange = ctx.strategy.split, ctx.strategy.exchange
        grad_out = grad_out.contiguous()
        grad_halo = _spmm(split.halo_t, grad_out.index_select(0, split.marginal_idx))
        pending = exchange.start(grad_halo, ctx.layer, "bwd", ctx.category)
        grad_inner = _spmm(split.inner_t, grad_out)
        return exchange.add_returned(grad_inner, pending.wait()), None, None, None
