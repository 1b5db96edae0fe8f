"""GCN and GraphSAGE (mean) for one partition.

The model never talks to other ranks: at each layer it asks ``propagate(layer, h_inner, before_dropout)``
for the normalized neighbourhood aggregate of its inner rows, A @ [h_inner; h_halo], and
whoever supplies that callable (a parallel strategy) decides how and when halo rows move
and in which order the aggregation runs. ``before_dropout`` (a :class:`BeforeDropout`, or None)
gives the same rows as they were before the dropout that ended the previous layer, with that
dropout: a strategy that keeps or caches halo rows across epochs may keep those and draw a fresh
mask where it uses them (PipeGCN's stale rows, SANCUS's cache), instead of reusing the sender's mask.

Mini-batch blocks (``gnnq.train.neighbor_sampler``) reuse the same forward: layer i's input
rows are its block's source nodes, destination nodes first, and ``num_dst[i]`` says how many
leading rows are the destinations (SAGE's root term and the layer's output rows).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import torch
from torch import nn


@dataclass(frozen=True)
class BeforeDropout:
    """A layer's input rows as they were before the previous layer's closing dropout (``rows``: in the autograd
    graph), and that dropout (``dropout(rows)`` draws a fresh mask, of the same rate and mode)."""

    rows: torch.Tensor
    dropout: nn.Module


Propagate = Callable[[int, torch.Tensor, Optional[BeforeDropout]], torch.Tensor]


def linear(module: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    """``module(x)``; for sparse CSR rows (sparse input features) through torch.sparse, never densified."""
    if x.layout != torch.sparse_csr:
        return module(x)
    out = torch.sparse.mm(x, module.weight.t())
    return out if module.bias is None else out + module.bias


class GCNLayer(nn.Module):
    weight_paths = 1

    def __init__(self, in_dim: int, out_dim: int):
        super().__init__()
        self.linear = nn.Linear(in_dim, out_dim)
        # Glorot weights and zero bias, as in Kipf & Welling (and PyG's GCNConv, DGL's GraphConv).
        nn.init.xavier_uniform_(self.linear.weight)
        nn.init.zeros_(self.linear.bias)

    def forward(self, h_inner: torch.Tensor, aggregated: torch.Tensor) -> torch.Tensor:
        return linear(self.linear, aggregated)


class SAGELayer(nn.Module):
    weight_paths = 2  # neighbours and root: more weights and gradients per layer

    def __init__(self, in_dim: int, out_dim: int):
        super().__init__()
        self.neigh = nn.Linear(in_dim, out_dim)
        self.root = nn.Linear(in_dim, out_dim, bias=False)

    def forward(self, h_inner: torch.Tensor, aggregated: torch.Tensor) -> torch.Tensor:
        return linear(self.neigh, aggregated) + linear(self.root, h_inner)


LAYERS = {
    "gcn": GCNLayer,
    "sage": SAGELayer,
}  # the layer of each model.name GNN builds (registry: gnnq.config.registry.MODELS)


# What follows each hidden layer's convolution, in order (``model.layer_order``): gnnq's default normalizes
# and activates the convolution's output and drops out last; AdaQP's public code (AdaQP/model/distGCN.py,
# distSAGE.py) drops out first, then normalizes and activates, so the rows it sends are LayerNorm outputs.
LAYER_ORDERS = ("norm_act_dropout", "dropout_norm_act")


class GNN(nn.Module):
    @classmethod
    def from_config(cls, mcfg, in_dim: int, out_dim: int) -> "GNN":
        return cls(
            mcfg.name,
            in_dim,
            mcfg.hidden,
            out_dim,
            mcfg.layers,
            mcfg.dropout,
            mcfg.norm,
            mcfg.get("layer_order", "norm_act_dropout"),
        )

    def __init__(
        self,
        name: str,
        in_dim: int,
        hidden: int,
        out_dim: int,
        layers: int,
        dropout: float,
        norm: str,
        layer_order: str = "norm_act_dropout",
    ):
        super().__init__()
        if name not in LAYERS:
            raise ValueError(f"model.name={name!r}; GNN builds {', '.join(LAYERS)}")
        if layer_order not in LAYER_ORDERS:
            raise ValueError(f"model.layer_order={layer_order!r}; allowed: {', '.join(LAYER_ORDERS)}")
        self.dropout_first = layer_order == "dropout_norm_act"
        layer_cls = LAYERS[name]
        dims = [in_dim] + [hidden] * (layers - 1) + [out_dim]
        self.convs = nn.ModuleList(layer_cls(a, b) for a, b in zip(dims[:-1], dims[1:]))
        self.norms = nn.ModuleList(
            nn.LayerNorm(hidden) if norm == "layer" else nn.Identity() for _ in range(layers - 1)
        )
        self.dropout = nn.Dropout(dropout)

    def forward(
        self, x_inner: torch.Tensor, propagate: Propagate, num_dst: Sequence[int] | None = None
    ) -> torch.Tensor:
        """Full graph: ``num_dst`` None. Blocks: per layer, the number of leading rows of h that are its outputs."""
        h, before = x_inner, None
        last = len(self.convs) - 1
        for i, conv in enumerate(self.convs):
            aggregated = propagate(i, h, before)
            h = conv(h if num_dst is None else h[: num_dst[i]], aggregated)
            if i < last:
                h, before = self._between_layers(i, h)
        return h

    def _between_layers(self, i: int, h: torch.Tensor) -> tuple[torch.Tensor, BeforeDropout | None]:
        """The next layer's input rows and, when a dropout that is active ends them, the rows before it."""
        if self.dropout_first:
            return torch.relu(self.norms[i](self.dropout(h))), None
        h = torch.relu(self.norms[i](h))
        if not (self.dropout.training and self.dropout.p > 0):
            return h, None
        return self.dropout(h), BeforeDropout(h, self.dropout)
