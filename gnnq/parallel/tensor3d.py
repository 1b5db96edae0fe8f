"""parallel=tensor3d: Plexus's 3D tensor parallelism (hpcgroup/plexus) on gnnq's exchange layer.

Every rank holds one block of each layer's adjacency, input and weight (gnnq.models.tensor3d; the grid's
layout: gnnq.parallel.tensor3d_grid). This module owns the grid's side: which rank sits where, a communicator per
line of the grid (gnnq.comm.Communicator.split: every collective goes through the exchange layer and its byte
counter), the node orders of the double permutation, the blocks cut from the whole graph, and the grid operations
the model asks for (``copy``, ``reduce``, ``gather``, ``gather_columns``) as autograd functions.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gnnq.comm import Communicator
from gnnq.comm.accounting import TENSOR_EVAL, TENSOR_TRAIN
from gnnq.comm.codec import NoiseKey
from gnnq.comm.kernels.backends import kernels_for
from gnnq.data.part import Part
from gnnq.errors import ConfigError
from gnnq.models.graph_ops import LocalGraph, from_coo, gcn_graph
from gnnq.models.tensor3d import LayerShape
from gnnq.parallel.tensor3d_grid import AXES, Grid, choose_grid, role_axis

PERMUTATIONS = ("none", "single", "double")
INPUTS = ("once", "every_epoch")


def grid_for(pcfg, ranks: int, nodes: int, nnz: int, dims: list[int]) -> tuple[Grid, str]:
    """The grid ``parallel.grid`` gives ([X, Y, Z]), or the one Plexus's models pick (``choose_grid``)."""
    if pcfg.grid is None:
        return choose_grid(ranks, nodes, nnz, dims), "model"
    values = list(pcfg.grid)
    if len(values) != 3 or any(int(v) < 1 for v in values):
        raise ConfigError(f"parallel.grid={values}: give three positive sizes [X, Y, Z], or null to pick by model")
    grid = Grid(*(int(v) for v in values))
    if grid.size != ranks:
        raise ConfigError(
            f"parallel.grid={values}: X*Y*Z = {grid.size} but the run has {ranks} rank(s) "
            "(cluster.nproc x cluster.hosts); set a grid of that size or null"
        )
    return grid, "given"


def node_orders(permutation: str, nodes: int, layers: int, seed: int) -> list[torch.Tensor]:
    """order[l][k] = the node at position k of layer l's input (order[layers]: of the logits).

    Plexus (plexus/utils/dataset.py ``preprocess_graph``): single permutes rows and columns of A by one random
    permutation P (A' = P A P^T, X and labels by P); double draws two, P and P2, and alternates
    A1 = P A P2^T (even layers) and A2 = P2 A P^T (odd layers), X by P2, labels by P (odd depth) or P2.
    """
    if permutation not in PERMUTATIONS:
        raise ConfigError(f"parallel.permutation={permutation!r}; allowed: {', '.join(PERMUTATIONS)}")
    gen = torch.Generator().manual_seed(int(seed))
    first = torch.randperm(nodes, generator=gen) if permutation != "none" else torch.arange(nodes)
    second = torch.randperm(nodes, generator=gen) if permutation == "double" else first
    return [second if layer % 2 == 0 else first for layer in range(layers + 1)]


def inverse(order: torch.Tensor) -> torch.Tensor:
    inv = torch.empty_like(order)
    inv[order] = torch.arange(order.numel())
    return inv


@dataclass(frozen=True)
class Traffic:
    category: str
    epoch: int

    @property
    def training(self) -> bool:
        return self.category == TENSOR_TRAIN


class Tensor3dStrategy:
    """The grid of one rank: its coordinates, its line communicators, its blocks, and the grid operations."""

    @classmethod
    def from_config(cls, pcfg, comm: Communicator, part: Part, dims: list[int], seed: int, quant=None):
        """``dims``: unpadded widths [features, hidden..., classes]; ``part``: the whole graph (shared part)."""
        nnz = int(part.indices.numel()) + part.num_inner
        grid, chosen = grid_for(pcfg, comm.world_size, part.num_inner, nnz, dims)
        if pcfg.inputs not in INPUTS:
            raise ConfigError(f"parallel.inputs={pcfg.inputs!r}; allowed: {', '.join(INPUTS)}")
        return cls(comm, part, dims, grid, seed, pcfg.permutation, pcfg.inputs == "every_epoch", chosen, quant)

    def __init__(
        self,
        comm: Communicator,
        part: Part,
        dims: list[int],
        grid: Grid,
        seed: int,
        permutation: str = "double",
        inputs_every_epoch: bool = False,
        chosen: str = "given",
        quant=None,
    ):
        if part.num_inner != part.num_global_nodes or part.num_halo:
            raise ValueError("parallel=tensor3d cuts its blocks from the whole graph: give it the one shared part")
        self.comm, self.grid, self.chosen, self.seed = comm, grid, chosen, int(seed)
        self.permutation, self.inputs_every_epoch, self.quant = permutation, inputs_every_epoch, quant
        self.coords = grid.coords(comm.rank)
        self.lines = {axis: comm.split(grid.groups(axis)) for axis in AXES}  # collective: every rank, same order
        self.nodes, self.padded = part.num_global_nodes, grid.pad(part.num_global_nodes)
        self.dims, self.widths = list(dims), [grid.pad(d) for d in dims]
        self.layers = len(dims) - 1
        self.orders = node_orders(permutation, self.nodes, self.layers, seed)
        self.shapes = [
            LayerShape(self.padded // o, self.widths[k] // i, self.widths[k + 1] // o)
            for k, (o, i, _) in enumerate(grid.sizes(k) for k in range(self.layers))
        ]
        self.graphs = self._graphs(part)
        self.x = self._input_block(part.x)
        self.y, self.masks = self._label_block(part)
        self.traffic = Traffic(TENSOR_TRAIN, 0)
        self._kernels = None

    # -- where this rank sits

    def axis(self, role: str, layer: int) -> str:
        return role_axis(layer, role)

    def block(self, role: str, layer: int, length: int) -> slice:
        """This rank's block of ``length`` along ``role`` of ``layer`` (the length divides evenly)."""
        axis = self.axis(role, layer)
        size = length // self.grid.dims()[axis]
        return slice(self.coords[axis] * size, (self.coords[axis] + 1) * size)

    @property
    def counts_here(self) -> bool:
        """Whether this rank counts its output rows (one rank per block of rows: the first along O and I)."""
        last = self.layers - 1
        return self.coords[self.axis("O", last)] == 0 and self.coords[self.axis("I", last)] == 0

    # -- the blocks

    def _graphs(self, part: Part) -> list[LocalGraph]:
        """Layer l's block of P_out A P_in^T: rows over D, columns over O (one block per distinct layout)."""
        rows, cols, weights = gcn_graph(part).coo()
        self.nnz = int(rows.numel())  # of the whole normalized adjacency (self loops included)
        cache, graphs = {}, []
        for layer in range(self.layers):
            rs, cs = self.block("D", layer, self.padded), self.block("O", layer, self.padded)
            key = (rs.start, rs.stop, cs.start, cs.stop, layer % 2 if self.permutation == "double" else 0)
            if key not in cache:
                r, c = inverse(self.orders[layer + 1])[rows], inverse(self.orders[layer])[cols]
                keep = (r >= rs.start) & (r < rs.stop) & (c >= cs.start) & (c < cs.stop)
                cache[key] = from_coo(
                    r[keep] - rs.start, c[keep] - cs.start, weights[keep], rs.stop - rs.start, cs.stop - cs.start
                )
            graphs.append(cache[key])
        return graphs

    def _input_block(self, x: torch.Tensor) -> torch.Tensor:
        """Layer 0's input block (rows over O, columns over I), or its flat shard over D (``inputs=every_epoch``,
        Plexus: plexus/utils/dataloader.py ``__split_features``)."""
        full = x.new_zeros(self.padded, self.widths[0])
        full[: self.nodes, : x.shape[1]] = x[self.orders[0]]
        block = full[self.block("O", 0, self.padded), self.block("I", 0, self.widths[0])].contiguous()
        if not self.inputs_every_epoch:
            return block
        return block.reshape(-1)[self.block("D", 0, block.numel())].clone()

    def _label_block(self, part: Part) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Labels and split masks of this rank's output rows (padded rows: in no split)."""
        rows = self.block("D", self.layers - 1, self.padded)
        order = self.orders[self.layers]
        picked = torch.arange(rows.start, rows.stop)
        real = picked < self.nodes
        nodes = order[picked.clamp(max=self.nodes - 1)]
        y = part.y[nodes]
        masks = [m[nodes] & real for m in (part.train_mask, part.val_mask, part.test_mask)]
        return y, masks

    def weight_shard(self, layer: int, full: torch.Tensor) -> torch.Tensor:
        """This rank's flat shard of layer ``layer``'s padded weight (din x dout): rows over I, columns over O,
        flattened and split over D (AxoNN: axonn/intra_layer/fully_connected.py
        ``extract_local_params_from_full_params``)."""
        padded = full.new_zeros(self.widths[layer], self.widths[layer + 1])
        padded[: full.shape[0], : full.shape[1]] = full
        block = padded[self.block("I", layer, self.widths[layer]), self.block("O", layer, self.widths[layer + 1])]
        flat = block.reshape(-1)
        return flat[self.block("D", layer, flat.numel())].clone()

    def bias_block(self, layer: int, full: torch.Tensor) -> torch.Tensor:
        padded = full.new_zeros(self.widths[layer + 1])
        padded[: full.numel()] = full
        return padded[self.block("O", layer, self.widths[layer + 1])].clone()

    # -- traffic

    def begin_training_epoch(self, epoch: int) -> None:
        self.traffic = Traffic(TENSOR_TRAIN, int(epoch))

    def begin_evaluation(self) -> None:
        self.traffic = Traffic(TENSOR_EVAL, self.traffic.epoch)

    # -- the grid operations (gnnq.models.tensor3d.GridOps)

    def line(self, role: str, layer: int) -> Communicator:
        return self.lines[self.axis(role, layer)]

    def copy(self, role: str, layer: int, t: torch.Tensor) -> torch.Tensor:
        return _Copy.apply(t, self, role, layer)

    def reduce(self, role: str, layer: int, t: torch.Tensor) -> torch.Tensor:
        return _Reduce.apply(t, self, role, layer)

    def gather(self, role: str, layer: int, t: torch.Tensor) -> torch.Tensor:
        return _Gather.apply(t, self, role, layer)

    def gather_columns(self, role: str, layer: int, t: torch.Tensor) -> torch.Tensor:
        return _GatherColumns.apply(t, self, role, layer)

    def dropout_generator(self, layer: int) -> torch.Generator:
        """Seeded by (seed, epoch, layer, the output block's D and O coordinates): the replicas along I draw alike."""
        d, o = self.coords[self.axis("D", layer)], self.coords[self.axis("O", layer)]
        key = hash((self.seed, self.traffic.epoch, layer, d, o)) & (2**62 - 1)
        return torch.Generator(device=self.x.device).manual_seed(key)

    def all_reduce(self, role: str, layer: int, t: torch.Tensor, direction: str) -> torch.Tensor:
        """``t`` summed over the line of ``role`` (a new tensor): exact, or through the codec (training, quant)."""
        line = self.line(role, layer)
        if line.world_size == 1:
            return t
        kw = {"category": self.traffic.category, "layer": layer, "direction": direction}
        codec = self._codec(direction)
        if codec is None:
            return line.all_reduce(t.detach().clone().contiguous(), wire="ring", **kw)
        return self._quantized_all_reduce(line, t.detach(), codec, role, layer, direction, kw)

    def _codec(self, direction: str):
        if self.quant is None or not self.traffic.training:
            return None
        return self.quant.forward if direction == "fwd" else self.quant.backward

    def _quantized_all_reduce(self, line: Communicator, t, codec, role: str, layer: int, direction: str, kw):
        """gnnq's combination (no paper has it): the all-reduce as a reduce-scatter and an all-gather whose rows
        travel through gnnq's row codec (``quantizer=uniform``). Each rank encodes its partial sum of every peer's
        block of rows (stochastic, unbiased) and sends it (an all-to-all), sums the decoded partials of its own
        block, then encodes that sum once and all-gathers it; every rank, itself included, uses the decoded sums, so
        the replicas stay equal."""
        from gnnq.comm.encoder import UniformEncoder

        if self._kernels is None:
            self._kernels = kernels_for(t.device)
        g, rows = line.world_size, t.shape[0]
        flat = t.reshape(rows, -1).contiguous()
        dim, block = flat.shape[1], rows // g
        encoder = UniformEncoder(codec, self._kernels)
        me = self.comm.rank
        noise = NoiseKey(self.seed, self.traffic.epoch, layer, f"{direction}.{role}.scatter", me)
        message = encoder.encode(flat, torch.arange(rows, device=t.device), [block] * g, noise, f"layer {layer}")
        nbytes = encoder.recv_bytes([block], dim)[0]
        wire = message.wire.view(g, nbytes)
        peers = [q for q in range(g) if q != line.rank]
        counts = [0 if q == line.rank else nbytes for q in range(g)]
        received = line.all_to_all(wire[peers].reshape(-1), counts, counts, **kw).view(g - 1, nbytes)
        own = flat[line.rank * block : (line.rank + 1) * block].clone()
        for k in range(g - 1):  # the peers' partial sums of this rank's rows, in rank order
            own += encoder.decode(received[k], dim)
        noise = NoiseKey(self.seed, self.traffic.epoch, layer, f"{direction}.{role}.gather", me)
        mine = encoder.encode(own, torch.arange(block, device=t.device), [block], noise, f"layer {layer}").wire
        gathered = line.all_gather(mine.reshape(1, -1), **kw)
        out = torch.cat([encoder.decode(gathered[q], dim) for q in range(g)])
        return out.view_as(t)


class _Copy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, t, strategy: Tensor3dStrategy, role: str, layer: int):
        ctx.args = (strategy, role, layer)
        return t.view_as(t)

    @staticmethod
    def backward(ctx, grad):
        strategy, role, layer = ctx.args
        return strategy.all_reduce(role, layer, grad, "bwd"), None, None, None


class _Reduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, t, strategy: Tensor3dStrategy, role: str, layer: int):
        out = strategy.all_reduce(role, layer, t, "fwd")
        return t.view_as(t) if out is t else out

    @staticmethod
    def backward(ctx, grad):
        return grad, None, None, None


class _Gather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, t, strategy: Tensor3dStrategy, role: str, layer: int):
        ctx.args = (strategy, role, layer)
        kw = {"category": strategy.traffic.category, "layer": layer, "direction": "fwd"}
        return strategy.line(role, layer).all_gather(t.detach(), **kw)

    @staticmethod
    def backward(ctx, grad):
        strategy, role, layer = ctx.args
        kw = {"category": strategy.traffic.category, "layer": layer, "direction": "bwd"}
        return strategy.line(role, layer).reduce_scatter(grad, **kw), None, None, None


class _GatherColumns(torch.autograd.Function):
    @staticmethod
    def forward(ctx, t, strategy: Tensor3dStrategy, role: str, layer: int):
        line = strategy.line(role, layer)
        ctx.cols = slice(line.rank * t.shape[1], (line.rank + 1) * t.shape[1])
        kw = {"category": strategy.traffic.category, "layer": layer, "direction": "fwd"}
        blocks = line.all_gather(t.detach().t().contiguous(), **kw)
        return blocks.t().contiguous()

    @staticmethod
    def backward(ctx, grad):
        return grad[:, ctx.cols].contiguous(), None, None, None
