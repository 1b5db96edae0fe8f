"""A GCN whose every layer is one block of a 3D tensor-parallel grid (Plexus's layer, plexus/gcn_conv.py).

Layer l computes OUT = A_l H W_l (+ b_l) on a block of each matrix: its adjacency block (rows over the layer's depth
axis D, columns over its outer axis O), its input block (rows over O, columns over its inner axis I), its weight
block (rows over I, columns over O, flattened and sharded over D) and gives its output block (rows over D, columns
over O). The model never talks to other ranks: where a block must be summed over, gathered along or replicated
on an axis of the grid it asks ``ops`` (a :class:`GridOps`, supplied by gnnq.parallel.tensor3d), whose
operations carry their own backward (a sum's gradient passes through; a replica's gradient is summed).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

import torch
from torch import nn

from gnnq.models.graph_ops import LocalGraph


class GridOps(Protocol):
    """What a grid layer asks of the grid; ``role`` is the layer's "O", "I" or "D" axis."""

    def copy(self, role: str, layer: int, t: torch.Tensor) -> torch.Tensor:
        """``t`` as it is (replicated along ``role``); backward: its gradient summed along ``role``."""
        ...

    def reduce(self, role: str, layer: int, t: torch.Tensor) -> torch.Tensor:
        """``t`` summed along ``role``; backward: the gradient as it is."""
        ...

    def gather(self, role: str, layer: int, t: torch.Tensor) -> torch.Tensor:
        """The flat shards ``t`` concatenated along ``role``; backward: the gradient reduce-scattered."""
        ...

    def gather_columns(self, role: str, layer: int, t: torch.Tensor) -> torch.Tensor:
        """The column blocks ``t`` side by side along ``role``; backward: this block's columns of the gradient."""
        ...

    def dropout_generator(self, layer: int) -> torch.Generator | None:
        """The draws of layer ``layer``'s dropout, the same on every replica of its output block."""
        ...


@dataclass(frozen=True)
class LayerShape:
    """One layer's local blocks: its input rows (nodes / o) and columns (din / i), its output columns (dout / o);
    its weight block is cols_in x cols_out, held as a flat shard over D."""

    rows_in: int  # input rows (nodes / o)
    cols_in: int
    cols_out: int


class GridGCN(nn.Module):
    """GCN layers (no normalization layer), ReLU and dropout between them, each layer a grid block."""

    def __init__(self, weight_shards: Sequence[torch.Tensor], biases: Sequence[torch.Tensor | None], shapes, dropout):
        super().__init__()
        self.shapes: list[LayerShape] = list(shapes)
        self.weights = nn.ParameterList(nn.Parameter(w.detach().clone()) for w in weight_shards)
        self.has_bias = biases[0] is not None
        self.biases = nn.ParameterList(nn.Parameter(b.detach().clone()) for b in biases if b is not None)
        self.dropout = float(dropout)

    def forward(self, x: torch.Tensor, graphs: Sequence[LocalGraph], ops: GridOps, x_sharded: bool) -> torch.Tensor:
        """Logits of this rank's output rows, all class columns. ``x``: the layer-0 input block, or (``x_sharded``)
        its flat shard over layer 0's depth axis, gathered here."""
        last = len(self.weights) - 1
        h = x
        for layer, shape in enumerate(self.shapes):
            if layer == 0 and x_sharded:
                h = ops.gather("D", 0, x).view(shape.rows_in, shape.cols_in)
            h = ops.copy("D", layer, h)  # replicated over D: each D block multiplies its own adjacency rows
            agg = ops.copy("O", layer, ops.reduce("O", layer, graphs[layer].aggregate(h)))
            w = ops.gather("D", layer, self.weights[layer]).view(shape.cols_in, shape.cols_out)
            h = ops.reduce("I", layer, agg @ w)
            if self.has_bias:
                h = h + ops.copy("D", layer, self.biases[layer])
            if layer < last:
                h = torch.relu(h)
                if self.training and self.dropout > 0:
                    keep = torch.rand(h.shape, generator=ops.dropout_generator(layer), device=h.device)
                    h = h * (keep >= self.dropout) / (1.0 - self.dropout)
        return ops.gather_columns("O", last, h)
