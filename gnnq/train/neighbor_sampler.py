"""Uniform neighbour sampling for mini-batch GNN training on one process (whole graph, no halo).

``NeighborSampler(part, model_name, fanouts).sample(targets, generator)`` returns ``Blocks``:
one bipartite block per layer, input layer first. Block i aggregates from its *source* nodes
(``src_ids``) into its *destination* nodes, which are the first ``num_dst`` source nodes, in
order; block i's destination nodes are block i+1's source nodes, and the last block's
destination nodes are the targets. Everything is vectorized over nodes (torch ops, no Python
loop per node), runs on the device of the part, and draws from the given torch.Generator.

Sampling: without replacement, uniformly among a node's in-neighbours; all of them when
the in-degree is <= the fanout or the fanout is -1. Rows with degree <= 2*fanout rank random
keys over all their edges; rows with a larger degree draw ``fanout`` positions and redraw
collisions until they are distinct (a relabelling-invariant procedure, hence uniform over
subsets), so the work per row is O(fanout), never O(degree).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gnnq.config.registry import MODELS
from gnnq.data.part import Part
from gnnq.models.graph_ops import LocalGraph, sparse_csr, transposed

SYMMETRIC, MEAN = "symmetric", "mean"  # a model's ``aggregation`` (gnnq.config.registry)
AGGREGATIONS = (SYMMETRIC, MEAN)


@dataclass
class Block:
    """One layer's bipartite graph: ``graph`` is the normalized operator (num_dst × num_src)."""

    src_ids: torch.Tensor  # node ids of the source rows; the first num_dst are the destination nodes
    num_dst: int
    graph: LocalGraph
    num_sampled_edges: int  # sampled in-edges (GCN's added self loops not counted)

    @property
    def dst_ids(self) -> torch.Tensor:
        return self.src_ids[: self.num_dst]


class Blocks:
    """A mini-batch's blocks, usable as the model's ``propagate``: ``model(x[blocks.input_ids], blocks,
    blocks.num_dst)``."""

    def __init__(self, blocks: list[Block]):
        self.blocks = blocks

    def __len__(self) -> int:
        return len(self.blocks)

    def __getitem__(self, layer: int) -> Block:
        return self.blocks[layer]

    @property
    def input_ids(self) -> torch.Tensor:
        """Node ids whose input features the first block reads, in its source-row order."""
        return self.blocks[0].src_ids

    @property
    def target_ids(self) -> torch.Tensor:
        return self.blocks[-1].dst_ids

    @property
    def num_dst(self) -> list[int]:
        return [b.num_dst for b in self.blocks]

    @property
    def num_sampled_edges(self) -> int:
        return sum(b.num_sampled_edges for b in self.blocks)

    def __call__(self, layer: int, h_src: torch.Tensor, before_dropout=None) -> torch.Tensor:
        """The model's ``propagate`` (nothing is kept across steps, so ``before_dropout`` is not needed)."""
        return self.blocks[layer].graph.aggregate(h_src)


class NeighborSampler:
    """Samples per-layer blocks from a 1-rank part's CSR of in-edges.

    Normalization matches ``gnnq.models.graph_ops`` so that fanout -1 (every neighbour)
    reproduces the full-graph operators exactly, restricted to the destination rows:

    - ``sage``: mean over the *sampled* in-neighbours, 1 / num_sampled(v) (as PyG's and DGL's
      mini-batch GraphSAGE do); rows without in-edges aggregate to zero.
    - ``gcn``: the full-graph weight D_out^-1/2 (A+I) D_in^-1/2 (global degrees, self loop counted)
      of each sampled edge u -> v, times deg_in(v) / num_sampled(v); v's self loop always kept,
      with its unscaled weight. Each in-neighbour is in the sample with probability
      num_sampled/deg_in, so the row's expectation is exactly the full-graph row (an unbiased
      estimator, the node-wise sampling of GraphSAGE/VR-GCN). Why not renormalize by the sampled
      degrees (sampled-subgraph GCN): its expectation differs from the full-graph operator, so
      the mini-batch model would be a different model from gnnq's full-graph one at inference.
      Why not scale the self loop too: it is not sampled, so scaling it would bias the row.
    """

    def __init__(self, part: Part, model_name: str, fanouts: list[int]):
        if part.num_halo or part.nparts != 1:
            raise ValueError("neighbour sampling needs the whole graph in one part (nparts=1, no halo rows)")
        aggregation = MODELS.choice(model_name).aggregation if model_name in MODELS else ""
        if aggregation not in AGGREGATIONS:  # the model's registry line says how it aggregates
            raise ValueError(f"no sampled aggregation for model {model_name!r}")
        for f in fanouts:
            if f != -1 and f < 1:
                raise ValueError(f"fanouts must be positive or -1 (all neighbours), got {list(fanouts)}")
        self.model_name, self.aggregation = model_name, aggregation
        self.fanouts = [int(f) for f in fanouts]
        self.indptr, self.indices = part.indptr, part.indices
        self.num_nodes = part.num_inner
        self.device = part.indptr.device
        if aggregation == SYMMETRIC:
            self.in_rsqrt = (part.in_degree + 1.0).rsqrt()
            self.out_rsqrt = (part.out_degree + 1.0).rsqrt()
        # node id -> position among the block's source rows; -1 elsewhere (reset after each block)
        self._slot = torch.full((self.num_nodes,), -1, dtype=torch.int64, device=self.device)

    def sample(self, targets: torch.Tensor, generator: torch.Generator | None = None) -> Blocks:
        """Blocks for distinct ``targets`` (node ids), input layer first."""
        dst = targets.to(self.device, torch.int64)
        blocks = []
        for fanout in reversed(self.fanouts):
            block = self._block(dst, fanout, generator)
            blocks.append(block)
            dst = block.src_ids
        return Blocks(blocks[::-1])

    def _block(self, dst: torch.Tensor, fanout: int, generator) -> Block:
        rows, src, num_sampled = sample_in_edges(self.indptr, self.indices, dst, fanout, generator)
        n_dst = dst.numel()
        slot = self._slot
        slot[dst] = torch.arange(n_dst, device=self.device)
        new = torch.unique(src[slot[src] < 0])
        slot[new] = torch.arange(n_dst, n_dst + new.numel(), device=self.device)
        src_ids = torch.cat([dst, new])
        cols = slot[src]
        slot[src_ids] = -1

        if self.aggregation == MEAN:
            weights = 1.0 / num_sampled.clamp(min=1).float()[rows]
            counts = num_sampled
        else:
            deg = (self.indptr[dst + 1] - self.indptr[dst]).float()
            scale = deg / num_sampled.clamp(min=1).float()
            weights = self.out_rsqrt[src] * self.in_rsqrt[dst[rows]] * scale[rows]
            # Each row: its self loop first, then its sampled edges (rows stay contiguous, no sort).
            own = torch.arange(n_dst, device=self.device)
            counts = num_sampled + 1
            row_start = torch.cumsum(counts, 0) - counts
            edge_pos = (
                torch.arange(rows.numel(), device=self.device) + rows + 1
            )  # past the self loops of rows <= its own
            merged_cols = torch.empty(rows.numel() + n_dst, dtype=torch.int64, device=self.device)
            merged_w = torch.empty(rows.numel() + n_dst, dtype=weights.dtype, device=self.device)
            merged_cols[row_start], merged_w[row_start] = own, self.out_rsqrt[dst] * self.in_rsqrt[dst]
            merged_cols[edge_pos], merged_w[edge_pos] = cols, weights
            cols, weights = merged_cols, merged_w
        indptr = torch.zeros(n_dst + 1, dtype=torch.int64, device=self.device)
        indptr[1:] = torch.cumsum(counts, 0)
        graph = BlockGraph(indptr, cols, weights.float(), int(src_ids.numel()))
        return Block(src_ids=src_ids, num_dst=n_dst, graph=graph, num_sampled_edges=int(num_sampled.sum()))


class BlockGraph(LocalGraph):
    """A LocalGraph whose transpose (for backward) is built on first use, by a column sort.

    The first block aggregates input features, which need no gradient, so its transpose,
    the largest, is never built.
    """

    def __init__(self, indptr: torch.Tensor, indices: torch.Tensor, weights: torch.Tensor, num_cols: int):
        self.num_rows, self.num_cols = indptr.numel() - 1, num_cols
        self.matrix = sparse_csr(indptr, indices, weights, (self.num_rows, num_cols))
        self._matrix_t = None

    @property
    def matrix_t(self) -> torch.Tensor:
        if self._matrix_t is None:
            self._matrix_t = transposed(self.matrix)
        return self._matrix_t


def sample_in_edges(
    indptr: torch.Tensor,
    indices: torch.Tensor,
    dst: torch.Tensor,
    fanout: int,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Sample up to ``fanout`` distinct in-edges of each node in ``dst`` (-1: all of them).

    Returns (row, src, count): per sampled edge, the position of its destination within ``dst``
    (non-decreasing) and its source id; per destination, the number of edges sampled.
    """
    device = indptr.device
    start = indptr[dst]
    deg = indptr[dst + 1] - start
    count = deg if fanout < 0 else deg.clamp(max=fanout)
    first = torch.cumsum(count, 0) - count  # where each row's edges go in the output
    total = int(count.sum())
    row = torch.empty(total, dtype=torch.int64, device=device)
    src = torch.empty(total, dtype=torch.int64, device=device)
    if fanout < 0:
        every = torch.ones_like(deg, dtype=torch.bool)
        small = torch.zeros_like(every)
    else:
        every = deg <= fanout
        small = ~every & (deg <= 2 * fanout)
    large = ~(every | small)

    # All in-edges of the rows with degree <= fanout.
    r, pos, within = _segments(torch.nonzero(every).flatten(), deg, start)
    out = first[r] + within
    row[out], src[out] = r, indices[pos]

    # fanout < degree <= 2*fanout: a random key per edge; keep each row's fanout smallest keys.
    if small.any():
        r, pos, within = _segments(torch.nonzero(small).flatten(), deg, start)
        keys = torch.rand(r.numel(), generator=generator, device=device, dtype=torch.float64)
        by_key = torch.argsort(keys)
        order = by_key[torch.argsort(r[by_key], stable=True)]  # rows keep their places; within a row, by key
        keep = within < fanout  # within: place in the row, the same before and after the reorder
        r = r[order][keep]
        out = first[r] + within[keep]
        row[out], src[out] = r, indices[pos[order][keep]]

    # degree > 2*fanout: draw fanout offsets, redraw collisions until distinct. Expected collisions
    # per row <= fanout/4, so few rounds, each over the rows that still collide.
    if large.any():
        idx = torch.nonzero(large).flatten()
        d = deg[idx].unsqueeze(1).expand(-1, fanout)
        off = _draw(d, generator)
        pending = torch.arange(idx.numel(), device=device)
        while pending.numel():
            srt, order = torch.sort(off[pending], dim=1)
            dup_sorted = torch.zeros_like(srt, dtype=torch.bool)
            dup_sorted[:, 1:] = srt[:, 1:] == srt[:, :-1]
            dup = torch.zeros_like(dup_sorted).scatter_(1, order, dup_sorted)
            hit = dup.any(1)
            pending, dup = pending[hit], dup[hit]
            which_row, which_col = torch.nonzero(dup, as_tuple=True)
            which_row = pending[which_row]
            off[which_row, which_col] = _draw(d[which_row, which_col], generator)
        out = (first[idx].unsqueeze(1) + torch.arange(fanout, device=device)).flatten()
        row[out] = idx.repeat_interleave(fanout)
        src[out] = indices[(start[idx].unsqueeze(1) + off).flatten()]
    return row, src, count


def _segments(
    sel: torch.Tensor, deg: torch.Tensor, start: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """For the rows ``sel``, row by row: (row of each edge, CSR position of each edge, place within its row)."""
    counts = deg[sel]
    r = torch.repeat_interleave(sel, counts)
    first = torch.cumsum(counts, 0) - counts  # where each row's edges begin in the output
    within = torch.arange(r.numel(), device=deg.device) - torch.repeat_interleave(first, counts)
    return r, start[r] + within, within


def _draw(bound: torch.Tensor, generator) -> torch.Tensor:
    """Uniform integers in [0, bound), elementwise."""
    u = torch.rand(bound.shape, generator=generator, device=bound.device, dtype=torch.float64)
    return (u * bound).long().minimum(bound - 1)  # the min guards u * bound rounding up to bound
