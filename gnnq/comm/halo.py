"""Halo exchange: forward halo rows to the ranks that need them, and their gradients back."""

from __future__ import annotations

import torch

from gnnq.comm.accounting import HALO_SETUP, HALO_TRAIN
from gnnq.comm.communicator import Communicator


class HaloExchange:
    """Moves rows between ranks along one partition's halo plan.

    ``send_idx`` lists the inner rows sent, concatenated by destination rank
    (``send_counts``); ``recv_counts`` gives the halo rows received from each rank,
    which arrive in halo order.
    """

    def __init__(self, comm: Communicator, send_idx: torch.Tensor, send_counts, recv_counts):
        self.comm = comm
        self.send_idx = send_idx
        self.send_counts = [int(c) for c in send_counts]
        self.recv_counts = [int(c) for c in recv_counts]
        self.num_halo = sum(self.recv_counts)

    def fetch(self, h_inner: torch.Tensor, layer: int, category: str = HALO_TRAIN) -> torch.Tensor:
        """Halo rows of ``h_inner`` from their owners; differentiable (gradients flow back to owners)."""
        if torch.is_grad_enabled() and h_inner.requires_grad:
            return _HaloFunction.apply(h_inner, self, layer, category)
        return self._forward(h_inner, layer, category)

    def fetch_static(self, x_inner: torch.Tensor) -> torch.Tensor:
        """Halo rows of data that never changes (input features): call once and keep the result."""
        return self._forward(x_inner, 0, HALO_SETUP)

    def _forward(self, h_inner: torch.Tensor, layer: int, category: str) -> torch.Tensor:
        send = h_inner.index_select(0, self.send_idx)
        return self.comm.all_to_all(send, self.send_counts, self.recv_counts, category=category, layer=layer, direction="fwd")

    def _backward(self, grad_halo: torch.Tensor, num_inner: int, layer: int, category: str) -> torch.Tensor:
        grad_sent = self.comm.all_to_all(
            grad_halo.contiguous(), self.recv_counts, self.send_counts, category=category, layer=layer, direction="bwd"
        )
        grad_inner = grad_halo.new_zeros((num_inner,) + tuple(grad_halo.shape[1:]))
        return grad_inner.index_add_(0, self.send_idx, grad_sent)


class _HaloFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h_inner, exchange: HaloExchange, layer: int, category: str):
        ctx.exchange, ctx.layer, ctx.category, ctx.num_inner = exchange, layer, category, h_inner.shape[0]
        return exchange._forward(h_inner, layer, category)

    @staticmethod
    def backward(ctx, grad_halo):
        grad = ctx.exchange._backward(grad_halo, ctx.num_inner, ctx.layer, ctx.category)
        return grad, None, None, None
