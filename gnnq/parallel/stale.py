"""PipeGCN: every layer uses the halo rows (forward) and halo gradients (backward) of the previous epoch.

The exchange posted in epoch t carries epoch t's values. As in PipeGCN, each message is waited for
in epoch t+1 just before its buffer is used (forward: when its layer aggregates; backward: when its
layer's gradients are added), and the new message is posted right after, so a layer's wait hides
behind all the computation since the previous epoch's post. Before an evaluation the driver settles
every message instead (``settle``), inside epoch t's timer: the wait is epoch t's, not hidden in
evaluation. Evaluation is exact.

The first training epoch has nothing stale yet: ``warmup="sync"`` (gnnq's default) exchanges and
waits at once, like ``sync``; ``warmup="zeros"`` (PipeGCN's code) uses zero buffers and only posts.
With ``momentum`` γ > 0 the stale values are smoothed as they arrive, stale = γ·stale + (1 − γ)·received
(PipeGCN's smoothed variant); ``smooth`` says which buffers: ``both``, ``features`` (forward halo
rows) or ``gradients`` (returned gradients). With zero buffers the average starts from zero, as in
PipeGCN; after a sync warm-up it starts from the warm-up's rows.

Which rows go stale (``stale_rows``): ``post_dropout`` (gnnq's default) sends a layer's input rows as the model
aggregates them, so the receiver reuses them with the sender's dropout mask of the epoch they were sent;
``pre_dropout`` (PipeGCN's code: its buffer is filled before the dropout, module/model.py) sends the rows before the
previous layer's closing dropout and the receiver draws a fresh mask on the stale rows when it uses them; their
gradients go back to the owner's pre-dropout rows. Where the model has no such rows (evaluation, no dropout,
``model.layer_order=dropout_norm_act``) both are the same.
"""

from __future__ import annotations

from typing import ClassVar

import torch

from gnnq.comm.direction import Direction
from gnnq.comm.halo import Arrived, HaloExchange, inner_gradient
from gnnq.models.gnn import BeforeDropout
from gnnq.models.graph_ops import LocalGraph
from gnnq.parallel.sync import SyncStrategy

WARMUPS = ("sync", "zeros")
STALE_ROWS = ("post_dropout", "pre_dropout")
SMOOTHED = {
    "both": (Direction.FORWARD, Direction.BACKWARD),
    "features": (Direction.FORWARD,),
    "gradients": (Direction.BACKWARD,),
}


class StaleStrategy(SyncStrategy):
    config_keys: ClassVar[dict[str, str]] = {
        "momentum": "momentum",
        "warmup": "warmup",
        "smooth": "smooth",
        "stale_rows": "stale_rows",
    }

    def __init__(
        self,
        exchange: HaloExchange,
        graph: LocalGraph,
        x_inner: torch.Tensor,
        momentum: float = 0.0,
        warmup: str = "sync",
        smooth: str = "both",
        inputs: str = "once",
        stale_rows: str = "post_dropout",
    ):
        super().__init__(exchange, graph, x_inner, inputs)
        if warmup not in WARMUPS or smooth not in SMOOTHED:
            raise ValueError(f"warmup={warmup!r} / smooth={smooth!r}: allowed {WARMUPS} / {tuple(SMOOTHED)}")
        if stale_rows not in STALE_ROWS:
            raise ValueError(f"parallel.stale_rows={stale_rows!r}: allowed {', '.join(STALE_ROWS)}")
        self.pre_dropout = stale_rows == "pre_dropout"
        self.momentum, self.warmup = float(momentum), warmup
        self.smoothed = SMOOTHED[smooth] if self.momentum > 0 else ()
        exchange.use_side_stream()  # on GPU: encode, send and decode off the compute stream (no effect on CPU)
        exchange.use_own_group()  # the gradient all-reduce must not wait behind this epoch's halo messages
        self.halo = {}  # layer -> stale halo rows (forward)
        self.returned = {}  # layer -> stale gradient rows peers returned for this rank's sent rows
        self.in_flight = {}  # (direction, layer) -> PendingHalo posted in the last training epoch

    def _store(self, direction: Direction) -> dict:
        return self.returned if direction.returns_gradients else self.halo

    def _fold(self, direction: Direction, layer: int) -> None:
        """Wait for the message of (direction, layer) still in flight, if any, and fold it into its buffer."""
        pending = self.in_flight.pop((direction, layer), None)
        if pending is None:
            return
        store, new = self._store(direction), pending.wait()
        old = store.get(layer)
        smooth = old is not None and direction in self.smoothed
        store[layer] = old.mul(self.momentum).add_(new, alpha=1 - self.momentum) if smooth else new

    def settle(self) -> None:
        """Wait for every message still in flight and fold it into the stale buffers."""
        for direction, layer in list(self.in_flight):
            self._fold(direction, layer)

    def aggregate_hidden(
        self, layer: int, h_inner: torch.Tensor, before_dropout: BeforeDropout | None = None
    ) -> torch.Tensor:
        if not self.traffic.is_training:
            return super().aggregate_hidden(layer, h_inner)  # evaluation is exact
        if self.pre_dropout and before_dropout is not None:
            stale = _StaleHalo.apply(before_dropout.rows, self, layer)
            return self.graph.aggregate(torch.cat([h_inner, before_dropout.dropout(stale)]))  # a fresh mask
        return _StaleAggregate.apply(h_inner, self, layer)

    def exchange_rows(self, direction: Direction, layer: int, rows: torch.Tensor) -> torch.Tensor:
        """The stale rows for ``direction`` at ``layer`` (last epoch's message, waited for now); posts
        this epoch's rows for the next epoch. Warm-up (nothing stale yet): see the module's doc."""
        return self._refresh(direction, layer, rows)

    def _refresh(self, direction: Direction, layer: int, rows: torch.Tensor, bits: int | None = None) -> torch.Tensor:
        """Fold last epoch's message of (direction, layer) and post this epoch's (at ``bits``, if given)."""
        store = self._store(direction)
        self._fold(direction, layer)
        pending = self._post(direction, layer, rows, bits)
        if layer not in store and self.warmup == "sync":
            store[layer] = pending.wait()
            return store[layer]
        if layer not in store:
            store[layer] = rows.new_zeros((self._buffer_rows(direction), rows.shape[1]))
        self.in_flight[(direction, layer)] = pending
        return store[layer]

    def _post(self, direction: Direction, layer: int, rows: torch.Tensor, bits: int | None = None):
        """Post this epoch's message of (direction, layer) (``bits``: its own width, see ``HaloExchange.start``)."""
        return self.exchange.start(rows, layer, direction, self.traffic, bits=bits)

    def _buffer_rows(self, direction: Direction) -> int:
        """Rows of a stale buffer: one per halo row (forward), one per row this rank sends (returned gradients)."""
        return sum(self.exchange.send_counts) if direction.returns_gradients else self.exchange.num_halo

    def close(self) -> None:
        self.settle()

    def state_dict(self) -> dict:
        """The stale buffers, with this epoch's messages folded in (as the next epoch's waits would)."""
        self.settle()
        return {
            kind: [{"layer": layer, "rows": rows} for layer, rows in sorted(store.items())]
            for kind, store in (("halo", self.halo), ("returned", self.returned))
        }

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
            strategy.exchange,
            grad_full[n:],
            lambda: grad_full[:n].contiguous(),
            lambda g: Arrived(
                strategy.exchange_rows(Direction.BACKWARD, ctx.layer, g)
            ),  # last epoch's, or the warm-up's
        )
        return grad_inner, None, None


class _StaleHalo(torch.autograd.Function):
    """The stale halo rows of ``rows`` (pre-dropout rows, ``stale_rows=pre_dropout``); backward: the halo rows'
    gradients go to their owners, and last epoch's returned gradients are ``rows``' gradient."""

    @staticmethod
    def forward(ctx, rows, strategy: StaleStrategy, layer: int):
        ctx.strategy, ctx.layer, ctx.shape = strategy, layer, rows.shape
        return strategy.exchange_rows(Direction.FORWARD, layer, rows.detach()).detach()  # not the stored tensor

    @staticmethod
    def backward(ctx, grad_halo):
        strategy = ctx.strategy
        grad_rows = inner_gradient(
            strategy.exchange,
            grad_halo,
            lambda: grad_halo.new_zeros(ctx.shape),
            lambda g: Arrived(strategy.exchange_rows(Direction.BACKWARD, ctx.layer, g)),
        )
        return grad_rows, None, None
