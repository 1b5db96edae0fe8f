"""Halo exchange: forward halo rows to the ranks that need them, and their gradients back."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gnnq.comm.accounting import HALO_EVAL, HALO_SETUP, HALO_TRAIN
from gnnq.comm.codec import MessageQuantization
from gnnq.comm.communicator import Communicator


@dataclass(frozen=True, eq=False)  # compared by identity: it holds tensors
class HaloPlan:
    """Which rows move: ``send_idx`` (inner rows, grouped by destination, ``send_counts`` each)
    and ``recv_counts`` halo rows from each peer. A strategy may pass a subset of the partition's
    plan for one message (``parallel=sampling`` does); both ends must use matching subsets."""

    send_idx: torch.Tensor
    send_counts: list[int]
    recv_counts: list[int]


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
        self.plan = HaloPlan(send_idx, [int(c) for c in send_counts], [int(c) for c in recv_counts])
        self.send_idx, self.send_counts, self.recv_counts = self.plan.send_idx, self.plan.send_counts, self.plan.recv_counts
        self.num_halo = sum(self.recv_counts)
        self.quant = quant
        self.nonfinite_zeroed = 0
        self.codec_backend: str | None = None
        self.side_streams = False  # on GPU: encode, send and decode on a stream of their own
        self._stream = None

    def use_side_stream(self) -> None:
        """Run messages on a separate CUDA stream (for overlap); no effect on CPU."""
        self.side_streams = True

    def use_own_group(self) -> None:
        """Send this exchange's messages on a process group of their own, so that collectives on
        the default group (the gradient all-reduce) never queue behind messages left in flight.
        Collective: every rank calls it, in the same order."""
        self.comm = self.comm.with_own_group()

    def fetch(self, h_inner: torch.Tensor, layer: int, category: str = HALO_TRAIN, plan: HaloPlan | None = None) -> torch.Tensor:
        """Halo rows of ``h_inner`` from their owners; differentiable (gradients flow back to owners)."""
        if torch.is_grad_enabled() and h_inner.requires_grad:
            return _HaloFunction.apply(h_inner, self, layer, category, plan)
        return self.start(h_inner, layer, "fwd", category, plan).wait()

    def fetch_static(self, x_inner: torch.Tensor) -> torch.Tensor:
        """Halo rows of data that never changes (input features): call once and keep the result."""
        return self.start(x_inner, 0, "input", HALO_SETUP).wait()

    def start(self, src: torch.Tensor, layer: int, direction: str, category: str,
              plan: HaloPlan | None = None) -> "PendingHalo":  # fmt: skip
        """Post one message and return at once; ``.wait()`` gives the rows that arrive.

        ``direction`` "fwd" / "input": ``src`` holds inner rows and the peers' halo rows arrive
        (in halo order). "bwd": ``src`` holds one row per halo row (gradients) and each peer's
        rows come back in this rank's send order (add them with :meth:`add_returned`).
        ``plan`` (default: the partition's) says which rows move.
        """
        plan = plan or self.plan
        if not (self.side_streams and src.is_cuda):
            return self._start(src, layer, direction, category, plan)
        if self._stream is None:
            self._stream = torch.cuda.Stream(device=src.device)
        stream = self._stream
        stream.wait_stream(torch.cuda.current_stream(src.device))  # src is ready before the codec reads it
        with torch.cuda.stream(stream):
            pending = self._start(src, layer, direction, category, plan)
        src.record_stream(stream)
        pending.stream = stream
        return pending

    def _start(self, src: torch.Tensor, layer: int, direction: str, category: str, plan: HaloPlan) -> "PendingHalo":
        if direction == "bwd":
            rows, send_counts, recv_counts = None, plan.recv_counts, plan.send_counts
        else:
            rows, send_counts, recv_counts = plan.send_idx, plan.send_counts, plan.recv_counts
        kw = {"category": category, "layer": layer, "direction": "bwd" if direction == "bwd" else "fwd"}
        quant = self.quant if category != HALO_EVAL else None
        codec = quant.codec(direction) if quant is not None else None
        if codec is None:
            send = src if rows is None else src.index_select(0, rows)
            return PendingHalo(self.comm.all_to_all_start(send, send_counts, recv_counts, **kw), None)
        if rows is None:
            rows = torch.arange(src.shape[0], device=src.device)
        dim = src.shape[1]
        if category == HALO_TRAIN:
            quant.observe(layer, direction, src, rows)
        noise = quant.noise(send_counts, dim, layer, direction, src.device)
        what = f"layer {layer} {'forward' if direction != 'bwd' else 'backward'}"
        self.codec_backend = codec.backend(src)
        layout = quant.layout(layer, direction)
        if layout is not None and plan is not self.plan:
            raise ValueError("per-row bit-widths (quantizer=adaptive) need the partition's full halo plan")
        if layout is None:
            wire, zeroed = codec.encode(src, rows, noise, what)
            self.nonfinite_zeroed += zeroed
            pending = self.comm.all_to_all_start(wire, send_counts, recv_counts, **kw)
            return PendingHalo(pending, lambda w: codec.decode(w, dim))
        flat, send_bytes, zeroed = layout.encode(codec, src, rows, noise, what)
        self.nonfinite_zeroed += zeroed
        pending = self.comm.all_to_all_start(flat, send_bytes, layout.recv_bytes(codec, dim), **kw)
        return PendingHalo(pending, lambda w: layout.decode(codec, w, dim))

    def add_returned(self, grad_inner: torch.Tensor, returned: torch.Tensor, plan: HaloPlan | None = None) -> torch.Tensor:
        """Add the gradient rows peers returned for the rows this rank sent them."""
        return grad_inner.index_add_(0, (plan or self.plan).send_idx, returned)


class PendingHalo:
    """A halo message in flight; ``wait()`` returns its decoded rows."""

    def __init__(self, pending, decode, stream=None):
        self.pending, self.decode, self.stream = pending, decode, stream

    def wait(self) -> torch.Tensor:
        if self.stream is None:
            return self._finish()
        with torch.cuda.stream(self.stream):
            out = self._finish()
            done = torch.cuda.Event()
            done.record(self.stream)
        current = torch.cuda.current_stream(out.device)
        current.wait_event(done)  # the consumer's stream reads the rows only after decoding finished
        out.record_stream(current)
        return out

    def _finish(self) -> torch.Tensor:
        out = self.pending.wait()
        return out if self.decode is None else self.decode(out)


class _HaloFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h_inner, exchange: HaloExchange, layer: int, category: str, plan: HaloPlan | None):
        ctx.exchange, ctx.layer, ctx.category, ctx.plan, ctx.num_inner = exchange, layer, category, plan, h_inner.shape[0]
        return exchange.start(h_inner, layer, "fwd", category, plan).wait()

    @staticmethod
    def backward(ctx, grad_halo):
        returned = ctx.exchange.start(grad_halo.contiguous(), ctx.layer, "bwd", ctx.category, ctx.plan).wait()
        grad_inner = grad_halo.new_zeros((ctx.num_inner,) + tuple(grad_halo.shape[1:]))
        return ctx.exchange.add_returned(grad_inner, returned, ctx.plan), None, None, None, None
