"""Graph-augmented MLP (GA-MLP): an MLP over the precomputed inputs [X, AX, ..., A^K X].

The graph enters only through those inputs (``gnnq.data.gamlp``), so the model never asks for
neighbour rows: ``forward`` takes the same arguments as ``GNN.forward`` and ignores the
propagate callable. pdADMM-G trains the same network layer by layer (``gnnq.admm``).
"""

from __future__ import annotations

import torch
from torch import nn

from gnnq.models.gnn import LAYER_ORDERS as ORDERS


class GAMLP(nn.Module):
    rowwise = True  # an output row depends on its own input row only (the training loop exploits it)

    @classmethod
    def from_config(cls, mcfg, in_dim: int, out_dim: int) -> "GAMLP":
        return cls(
            in_dim, mcfg.hidden, out_dim, mcfg.layers, mcfg.dropout, mcfg.norm, mcfg.get("layer_order", ORDERS[0])
        )

    def __init__(
        self,
        in_dim: int,
        hidden: int,
        out_dim: int,
        layers: int,
        dropout: float,
        norm: str,
        layer_order: str = "norm_act_dropout",
    ):
        super().__init__()
        if layer_order not in ORDERS:
            raise ValueError(f"model.layer_order={layer_order!r}; allowed: {', '.join(ORDERS)}")
        self.dropout_first = layer_order == "dropout_norm_act"
        dims = [in_dim] + [hidden] * (layers - 1) + [out_dim]
        self.linears = nn.ModuleList(nn.Linear(a, b) for a, b in zip(dims[:-1], dims[1:]))
        self.norms = nn.ModuleList(
            nn.LayerNorm(hidden) if norm == "layer" else nn.Identity() for _ in range(layers - 1)
        )
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, propagate=None, num_dst=None) -> torch.Tensor:
        h = x
        last = len(self.linears) - 1
        for i, linear in enumerate(self.linears):
            h = linear(h)
            if i < last:  # model.layer_order, as in gnnq.models.gnn
                if self.dropout_first:
                    h = torch.relu(self.norms[i](self.dropout(h)))
                else:
                    h = self.dropout(torch.relu(self.norms[i](h)))
        return h
