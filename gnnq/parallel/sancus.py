"""SANCUS (Peng et al., VLDB 2022): skip a layer's halo message while its rows have barely changed.

Every training epoch and hidden layer, each owner compares its boundary rows (the inner rows any
peer holds as halo rows) with the copy it last sent: it re-sends them to every peer only when their
relative change ||h - h_sent||_F / ||h_sent||_F is at least ``threshold``, or when the copy it last
sent is more than ``max_staleness`` epochs old (SANCUS's epoch-count staleness bound), and always in
its first epoch. Otherwise every receiver reuses the copy it cached from that owner. Before the rows
move, the owners' decisions go to every peer as one flag byte each (``HaloExchange.share_flags``,
counted with the layer's forward bytes), so both ends agree on what the row message holds; the rows
are counted when they are sent. ``threshold=0`` re-sends every epoch: it is ``sync`` (plus the flags).

The rows compared, sent and cached are the embeddings before the previous layer's closing dropout
(``gnnq.models.gnn.BeforeDropout``); each receiver draws a fresh dropout mask on them where it uses
them. Rows after dropout carry a new random mask every epoch, so their relative change stays near the
dropout's own noise (about 1 at rate 0.5) and never falls under a threshold. Without such rows
(evaluation, no dropout, ``model.layer_order=dropout_norm_act``) the rows as aggregated are compared.
This is the paper's rule as gnnq reads it (a relative-change threshold and an epoch bound); the public
code (chenzhao/light-dist-gnn, models/cached_gcn.py) resets ``g_cache_enabled`` to all-False, so it
broadcasts every epoch.

Backward is exact, as in SANCUS's code (it never caches gradients): the halo rows' gradients go back
to their owners every epoch. Layer-0 features are fetched once (``parallel.inputs``), and evaluation is exact.
"""

from __future__ import annotations

from typing import ClassVar

import torch

from gnnq.comm.direction import Direction
from gnnq.comm.halo import HaloExchange, HaloPlan, gradients_to_owners
from gnnq.models.gnn import BeforeDropout
from gnnq.models.graph_ops import LocalGraph
from gnnq.parallel.sync import SyncStrategy


class SancusStrategy(SyncStrategy):
    config_keys: ClassVar[dict[str, str]] = {"threshold": "threshold", "max_staleness": "max_staleness"}

    def __init__(
        self,
        exchange: HaloExchange,
        graph: LocalGraph,
        x_inner: torch.Tensor,
        threshold: float = 0.1,
        max_staleness: int = 4,
        inputs: str = "once",
    ):
        super().__init__(exchange, graph, x_inner, inputs)
        self.threshold, self.max_staleness = float(threshold), int(max_staleness)
        plan, device = exchange.plan, exchange.send_idx.device
        self.boundary = torch.unique(plan.send_idx)  # compared rows: each boundary row once
        self.send_none = (plan.send_idx[:0], [0] * len(plan.send_counts))  # an owner's part of a message it skips
        self.segments = [
            torch.arange(sum(plan.recv_counts[:q]), sum(plan.recv_counts[: q + 1]), device=device)
            for q in range(len(plan.recv_counts))
        ]
        self.last_sent = {}  # layer -> this owner's boundary rows as last sent
        self.sent_epoch = {}  # layer -> the training epoch that sent them
        self.halo = {}  # layer -> the halo rows as last received from each owner (the receiver's cache)
        self.sends = {}  # layer -> epochs in which this owner sent the layer's rows

    def aggregate_hidden(
        self, layer: int, h_inner: torch.Tensor, before_dropout: BeforeDropout | None = None
    ) -> torch.Tensor:
        if not self.traffic.is_training:
            return super().aggregate_hidden(layer, h_inner)  # evaluation is exact
        if before_dropout is None:
            return self.graph.aggregate(torch.cat([h_inner, _CachedHalo.apply(h_inner, self, layer)]))
        halo = _CachedHalo.apply(before_dropout.rows, self, layer)  # pre-dropout rows, compared and cached
        return self.graph.aggregate(torch.cat([h_inner, before_dropout.dropout(halo)]))  # a fresh mask

    def resends(self, layer: int, h_inner: torch.Tensor) -> bool:
        """Whether this owner re-sends ``layer``'s rows this epoch (see the module's doc)."""
        last = self.last_sent.get(layer)
        if last is None or self.traffic.epoch - self.sent_epoch[layer] > self.max_staleness:
            return True
        change = torch.linalg.vector_norm(h_inner.index_select(0, self.boundary) - last)
        return bool(change >= self.threshold * torch.linalg.vector_norm(last))

    def halo_rows(self, layer: int, h_inner: torch.Tensor) -> torch.Tensor:
        """This epoch's halo rows of ``layer``: fresh from the owners that re-send, cached from the others."""
        send = self.resends(layer, h_inner)
        flags = self.exchange.share_flags(send, layer, self.traffic)
        plan = self.exchange.plan
        recv_counts = [c if flags[q] else 0 for q, c in enumerate(plan.recv_counts)]
        sub = HaloPlan(*((plan.send_idx, plan.send_counts) if send else self.send_none), recv_counts)
        rows = self.exchange.start(h_inner, layer, Direction.FORWARD, self.traffic, sub).wait()
        if send:
            self.last_sent[layer] = h_inner.index_select(0, self.boundary)
            self.sent_epoch[layer] = self.traffic.epoch
            self.sends.setdefault(layer, []).append(self.traffic.epoch)
        cache = self.halo.get(layer)
        if cache is None:
            cache = rows.new_zeros((self.exchange.num_halo, h_inner.shape[1]))
        fresh = [self.segments[q] for q, flag in enumerate(flags) if flag]
        if fresh:
            cache = cache.index_copy(0, torch.cat(fresh), rows)
        self.halo[layer] = cache
        return cache

    def state_dict(self) -> dict:
        """The caches at both ends, so that a resumed run skips exactly as an uninterrupted one."""
        return {
            "layers": [
                {
                    "layer": layer,
                    "halo": self.halo[layer],
                    "last_sent": self.last_sent.get(layer),
                    "sent_epoch": self.sent_epoch.get(layer),
                    "sends": self.sends.get(layer, []),
                }
                for layer in sorted(self.halo)
            ]
        }

    def load_state_dict(self, state: dict) -> None:
        device = self.x_halo.device
        for e in state["layers"]:
            layer = e["layer"]
            self.halo[layer], self.sends[layer] = e["halo"].to(device), list(e["sends"])
            if e["last_sent"] is not None:
                self.last_sent[layer], self.sent_epoch[layer] = e["last_sent"].to(device), e["sent_epoch"]


class _CachedHalo(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h_inner, strategy: SancusStrategy, layer: int):
        ctx.exchange, ctx.layer, ctx.traffic, ctx.num_inner = (
            strategy.exchange,
            layer,
            strategy.traffic,
            h_inner.shape[0],
        )
        return strategy.halo_rows(layer, h_inner.detach())

    @staticmethod
    def backward(ctx, grad_halo):
        return gradients_to_owners(ctx.exchange, grad_halo, ctx.layer, ctx.traffic, ctx.num_inner), None, None
