"""Synchronous halo exchange: every layer waits for exact, current halo rows."""

from __future__ import annotations

import torch

from gnnq.comm.accounting import HALO_EVAL, HALO_TRAIN
from gnnq.comm.halo import HaloExchange
from gnnq.models.graph_ops import LocalGraph


class SyncStrategy:
    """Supplies the model's aggregates A @ [h_inner; h_halo]. Layer-0 inputs never change: fetched once."""

    def __init__(self, exchange: HaloExchange, graph: LocalGraph, x_inner: torch.Tensor):
        self.exchange = exchange
        self.graph = graph
        self.x_halo = exchange.fetch_static(x_inner)
        self.category = HALO_TRAIN

    def train(self, epoch: int = 0) -> None:
        self.category = HALO_TRAIN
        if self.exchange.quant is not None:
            self.exchange.quant.epoch = epoch  # seeds this epoch's quantization draws

    def eval(self) -> None:
        self.category = HALO_EVAL

    def close(self) -> None:
        """Finish whatever is still in flight (strategies that post ahead)."""

    def state_dict(self) -> dict:
        """What a resumed run needs to go on exactly as an uninterrupted one (nothing for sync)."""
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass

    def __call__(self, layer: int, h_inner: torch.Tensor) -> torch.Tensor:
        if layer == 0:
            return self.graph.aggregate(torch.cat([h_inner, self.x_halo]))
        return self.aggregate_hidden(layer, h_inner)

    def aggregate_hidden(self, layer: int, h_inner: torch.Tensor) -> torch.Tensor:
        return self.graph.aggregate(torch.cat([h_inner, self.exchange.fetch(h_inner, layer, self.category)]))
