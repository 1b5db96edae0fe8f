"""PipeGCN: every layer uses the halo rows (forward) and halo gradients (backward) of the previous epoch.

The exchange posted in epoch t carries epoch t's values and is only waited for when epoch t+1
starts, so it runs entirely behind epoch t's computation. Before an evaluation the driver settles
it instead (``settle``), inside epoch t's timer: the wait is epoch t's, not hidden in evaluation.
The first training epoch has nothing stale yet and runs like ``sync`` (warm-up). With ``momentum``
γ > 0 the stale values are smoothed, stale = γ·stale + (1 − γ)·received, as in PipeGCN's smoothed variant. Evaluation is exact.
"""

from __future__ import annotations

import torch

from gnnq.comm.direction import Direction
from gnnq.comm.halo import Arrived, HaloExchange, inner_gradient
from gnnq.models.graph_ops import LocalGraph
from gnnq.parallel.sync import SyncStrategy


class StaleStrategy(SyncStrategy):
    def __init__(self, exchange: HaloExchange, graph: LocalGraph, x_inner: torch.Tensor, momentum: float = 0.0):
        super().__init__(exchange, graph, x_inner)
        self.momentum = float(momentum)
        exchange.use_side_stream()  # on GPU: encode, send and decode off the compute stream (no effect on CPU)
        exchange.use_own_group()  # the gradient all-reduce must not wait behind this epoch's halo messages
        self.halo = {}  # layer -> stale halo rows (forward)
        self.returned = {}  # layer -> stale gradient rows peers returned for this rank's sent rows
        self.in_flight = []  # (direction, layer, PendingHalo) posted this epoch

    def begin_training_epoch(self, epoch: int) -> None:
        self.settle()
        super().begin_training_epoch(epoch)

    def settle(self) -> None:
        """Wait for last epoch's messages and fold them into the stale buffers."""
        for direction, layer, pending in self.in_flight:
            store = self.returned if direction.returns_gradients else self.halo
            new = pending.wait()
            old = store.get(layer)
            store[layer] = new if old is None or self.momentum == 0 else old.mul(self.momentum).add_(new, alpha=1 - self.momentum)
        self.in_flight = []

    def aggregate_hidden(self, layer: int, h_inner: torch.Tensor) -> torch.Tensor:
        if not self.traffic.is_training:
            return super().aggregate_hidden(layer, h_inner)  # evaluation is exact
        return _StaleAggregate.apply(h_inner, self, layer)

    def exchange_rows(self, direction: Direction, layer: int, rows: torch.Tensor) -> torch.Tensor:
        """The stale rows for ``direction`` at ``layer``; posts this epoch's rows for the next epoch.

        Warm-up (nothing stale yet): exchange now, and use and keep what arrives.
        """
        store = self.returned if direction.returns_gradients else self.halo
        pending = self.exchange.start(rows, layer, direction, self.traffic)
        if layer not in store:
            store[layer] = pending.wait()
        else:
            self.in_flight.append((direction, layer, pending))
        return store[layer]

    def close(self) -> None:
        self.settle()

    def state_dict(self) -> dict:
        """The stale buffers, with this epoch's messages folded in (as the next epoch's start would)."""
        self.settle()
        return {kind: [{"layer": layer, "rows": rows} for layer, rows in sorted(store.items())]
                for kind, store in (("halo", self.halo), ("returned", self.returned))}  # fmt: skip

    def load_state_dict(self, state: dict) -> None:
        device = self.x_halo.device
        self.halo = {e["layer"]: e["rows"].to(device) for e in state["halo"]}
        self.returned = {e["layer"]: e["rows"].to(device) for e in state["returned"]}


class _StaleAggregate(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h_inner, strategy: StaleStrategy, layer: int):
        ctx.strategy, ctx.layer = strategy, layer
        halo = strategy.exchange_rows(Direction.FORWARD, layer, h_inner.detach())
        return strategy.graph.matrix @ torch.cat([h_inner, halo])

    @staticmethod
    def backward(ctx, grad_out):
        strategy, n = ctx.strategy, ctx.strategy.graph.num_rows
        grad_full = strategy.graph.matrix_t @ grad_out.contiguous()
        grad_inner = inner_gradient(
            strategy.exchange, grad_full[n:], lambda: grad_full[:n].contiguous(),
            lambda g: Arrived(strategy.exchange_rows(Direction.BACKWARD, ctx.layer, g)),  # last epoch's, or (warm-up) this one's
        )  # fmt: skip
        return grad_inner, None, None
