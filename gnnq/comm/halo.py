"""Halo exchange: forward halo rows to the ranks that need them, and their gradients back."""

from __future__ import annotations

import torch

from gnnq.comm.accounting import HALO_EVAL, HALO_SETUP, HALO_TRAIN
from gnnq.comm.codec import MessageQuantization
from gnnq.comm.communicator import Communicator


class HaloExchange:
    """Moves rows between ranks along one partition's halo plan.

    ``send_idx`` lists the inner rows sent, concatenated by destination rank
    (``send_counts``); ``recv_counts`` gives the halo rows received from each rank,
    which arrive in halo order. With ``quant``, training messages travel as quantized
    wire rows (evaluation stays exact); the byte counter sees exactly those rows.
    """

    def __init__(self, comm: Communicator, send_idx: torch.Tensor, send_counts, recv_counts,
                 quant: MessageQuantization | None = None):  # fmt: skip
        self.comm = comm
        self.send_idx = send_idx
        self.send_counts = [int(c) for c in send_counts]
        self.recv_counts = [int(c) for c in recv_counts]
        self.num_halo = sum(self.recv_counts)
        self.quant = quant
        self.nonfinite_zeroed = 0
        self.codec_backend: str | None = None

    def fetch(self, h_inner: torch.Tensor, layer: int, category: str = HALO_TRAIN) -> torch.Tensor:
        """Halo rows of ``h_inner`` from their owners; differentiable (gradients flow back to owners)."""
        if torch.is_grad_enabled() and h_inner.requires_grad:
            return _HaloFunction.apply(h_inner, self, layer, category)
        return self._forward(h_inner, layer, category)

    def fetch_static(self, x_inner: torch.Tensor) -> torch.Tensor:
        """Halo rows of data that never changes (input features): call once and keep the result."""
        return self._send(x_inner, self.send_idx, self.send_counts, self.recv_counts, 0, "input", HALO_SETUP)

    def _forward(self, h_inner: torch.Tensor, layer: int, category: str) -> torch.Tensor:
        return self._send(h_inner, self.send_idx, self.send_counts, self.recv_counts, layer, "fwd", category)

    def _backward(self, grad_halo: torch.Tensor, num_inner: int, layer: int, category: str) -> torch.Tensor:
        grad_sent = self._send(grad_halo.contiguous(), None, self.recv_counts, self.send_counts, layer, "bwd", category)
        grad_inner = grad_halo.new_zeros((num_inner,) + tuple(grad_halo.shape[1:]))
        return grad_inner.index_add_(0, self.send_idx, grad_sent)

    def _send(self, src, rows, send_counts, recv_counts, layer: int, direction: str, category: str) -> torch.Tensor:
        """Send ``src[rows]`` (all of ``src`` when rows is None; grouped by destination) and return what arrives."""
        codec = self.quant.codec(direction) if self.quant is not None and category != HALO_EVAL else None
        kw = {"category": category, "layer": layer, "direction": direction if direction != "input" else "fwd"}
        if codec is None:
            return self.comm.all_to_all(src if rows is None else src.index_select(0, rows), send_counts, recv_counts, **kw)
        if rows is None:
            rows = torch.arange(src.shape[0], device=src.device)
        dim = src.shape[1]
        noise = self.quant.noise(send_counts, dim, layer, direction, src.device)
        what = f"layer {layer} {'forward' if direction != 'bwd' else 'backward'}"
        wire, zeroed = codec.encode(src, rows, noise, what)
        self.nonfinite_zeroed += zeroed
        self.codec_backend = codec.backend(src)
        return codec.decode(self.comm.all_to_all(wire, send_counts, recv_counts, **kw), dim)


class _HaloFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h_inner, exchange: HaloExchange, layer: int, category: str):
        ctx.exchange, ctx.layer, ctx.category, ctx.num_inner = exchange, layer, category, h_inner.shape[0]
        return exchange._forward(h_inner, layer, category)

    @staticmethod
    def backward(ctx, grad_halo):
        grad = ctx.exchange._backward(grad_halo, ctx.num_inner, ctx.layer, ctx.category)
        return grad, None, None, None
