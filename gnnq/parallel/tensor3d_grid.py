"""The X x Y x Z process grid of parallel=tensor3d (Plexus's 3D tensor parallelism), its byte count and the
models that pick it. Pure arithmetic: no torch, no process group.

Ranks lie on the grid as in AxoNN (axonn/communication.py, ``communication_handle.__init__``): the column
coordinate y varies fastest, then the row x, then the depth z: rank = z * X * Y + x * Y + y. Layer l
plays three roles on the three axes, rotating every layer (Plexus, plexus/gcn_conv.py ``GCNConv.__init__``):
(outer O, inner I, depth D) = (x, y, z), (z, x, y), (y, z, x) for l % 3 = 0, 1, 2. Layer l's input rows are split
over O and its columns over I (replicated over D); its adjacency block over D (rows) and O (columns); its weight
over I (rows) and O (columns), flattened and sharded over D; its output rows over D and columns over O
(replicated over I), which is the next layer's input layout.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

AXES = ("x", "y", "z")
ROLES = ("O", "I", "D")  # a layer's output features, input features, and nodes (Plexus's dimensions)
LAYER_AXES = (("x", "y", "z"), ("z", "x", "y"), ("y", "z", "x"))  # (O, I, D) of layer l % 3
FLOAT_BYTES = 4


@dataclass(frozen=True)
class Grid:
    x: int
    y: int
    z: int

    @property
    def size(self) -> int:
        return self.x * self.y * self.z

    def dims(self) -> dict[str, int]:
        return {"x": self.x, "y": self.y, "z": self.z}

    def coords(self, rank: int) -> dict[str, int]:
        return {"y": rank % self.y, "x": (rank // self.y) % self.x, "z": rank // (self.x * self.y)}

    def rank_of(self, coords: dict[str, int]) -> int:
        return coords["z"] * self.x * self.y + coords["x"] * self.y + coords["y"]

    def groups(self, axis: str) -> list[list[int]]:
        """The ranks that differ only along ``axis``, one list per line of the grid, each in axis order."""
        others = [a for a in AXES if a != axis]
        dims = self.dims()
        lines = []
        for fixed in itertools.product(*(range(dims[a]) for a in others)):
            base = dict(zip(others, fixed))
            lines.append([self.rank_of({**base, axis: k}) for k in range(dims[axis])])
        return lines

    def sizes(self, layer: int) -> tuple[int, int, int]:
        """(o, i, d): the sizes of layer ``layer``'s outer, inner and depth axes."""
        dims = self.dims()
        return tuple(dims[a] for a in LAYER_AXES[layer % 3])

    def pad(self, n: int) -> int:
        """``n`` rounded up to a multiple of the grid's size (nodes and every width are padded so: each block
        and each flat shard divides evenly)."""
        return -(-n // self.size) * self.size

    def label(self) -> str:
        return f"{self.x}x{self.y}x{self.z}"


def layer_axes(layer: int) -> tuple[str, str, str]:
    return LAYER_AXES[layer % 3]


def role_axis(layer: int, role: str) -> str:
    """The grid axis that holds ``role`` (one of ROLES) in ``layer``."""
    return layer_axes(layer)[ROLES.index(role)]


def factorizations(ranks: int) -> list[Grid]:
    """Every grid of ``ranks`` ranks (Plexus's models take powers of two only: comm_model.py
    ``split_into_three_powers_of_two``; gnnq takes any factorization)."""
    return [
        Grid(x, y, ranks // (x * y))
        for x in range(1, ranks + 1)
        if ranks % x == 0
        for y in range(1, ranks // x + 1)
        if (ranks // x) % y == 0
    ]


@dataclass(frozen=True)
class GridCollective:
    """One collective of an epoch: on the line of ``role`` (O, I or D) of ``layer``, ``kind`` (all_reduce,
    all_gather, reduce_scatter), ``wire`` elements each rank puts on the wire (ring: gnnq.comm.Communicator)."""

    layer: int
    direction: str
    role: str
    kind: str
    wire: int


def epoch_collectives(
    grid: Grid, nodes: int, dims: list[int], *, bias: bool, inputs_every_epoch: bool, training: bool = True
) -> list[GridCollective]:
    """gnnq's tensor3d collectives of one training step (``training``) or one evaluation forward pass, in the order
    a rank runs them: forward layer by layer, backward from the last layer. Lines of one rank are left out (no
    collective runs there). ``dims``: unpadded widths [features, hidden..., classes], padded as the run pads them."""
    n = grid.pad(nodes)
    widths = [grid.pad(d) for d in dims]
    last = len(widths) - 2
    fwd: list[GridCollective] = []
    bwd: list[GridCollective] = []
    for layer in range(len(widths) - 1):
        o, i, d = grid.sizes(layer)
        din, dout = widths[layer], widths[layer + 1]
        sizes = {"O": o, "I": i, "D": d}

        def add(out: list, direction: str, role: str, kind: str, elements: int, layer: int = layer) -> None:
            g = sizes[role]
            if g > 1:
                wire = _ring(g, elements) if kind == "all_reduce" else _gather(g, elements)
                out.append(GridCollective(layer, direction, role, kind, wire))

        if layer == 0 and inputs_every_epoch:
            add(fwd, "fwd", "D", "all_gather", n // o * din // (i * d))
        add(fwd, "fwd", "O", "all_reduce", n // d * din // i)  # the aggregate's partial sums
        add(fwd, "fwd", "D", "all_gather", din * dout // (o * i * d))  # the weight's shards
        add(fwd, "fwd", "I", "all_reduce", n // d * dout // o)  # the output's partial sums
        if layer == last:
            add(fwd, "fwd", "O", "all_gather", n // d * dout // o)  # the logits' class columns
        back: list[GridCollective] = []
        add(back, "bwd", "D", "reduce_scatter", din * dout // (o * i * d))  # the weight's gradient
        if bias:
            add(back, "bwd", "D", "all_reduce", dout // o)
        if layer > 0:  # the input's gradient (layer 0's inputs take none)
            add(back, "bwd", "O", "all_reduce", n // d * din // i)
            add(back, "bwd", "D", "all_reduce", n // o * din // i)
        bwd = back + bwd
    return fwd + (bwd if training else [])


def epoch_bytes(
    grid: Grid, nodes: int, dims: list[int], *, bias: bool, inputs_every_epoch: bool, training: bool = True
) -> dict[str, int]:
    """The exact bytes gnnq's tensor3d puts on the wire in one training step (``training``) or one evaluation
    forward pass, all ranks summed, by "layer.direction": what its collectives (``epoch_collectives``) count
    (gnnq.comm.Communicator: all-gather and reduce-scatter (g-1) x the shard per rank, all-reduce 2 (g-1)/g x the
    payload, ring).

    ``dims``: unpadded widths [features, hidden..., classes]; nodes and widths are padded as the run pads them.
    """
    out = {f"{layer}.{d}": 0 for layer in range(len(dims) - 1) for d in (("fwd", "bwd") if training else ("fwd",))}
    for c in epoch_collectives(grid, nodes, dims, bias=bias, inputs_every_epoch=inputs_every_epoch, training=training):
        out[f"{c.layer}.{c.direction}"] += c.wire * grid.size * FLOAT_BYTES
    return out


def _ring(g: int, elements: int) -> int:
    """Elements one rank puts on the wire in a ring all-reduce of ``elements`` over ``g`` ranks."""
    return 2 * (g - 1) * elements // g


def _gather(g: int, shard: int) -> int:
    """Elements one rank puts on the wire in an all-gather (or reduce-scatter) of ``shard``-element shards."""
    return (g - 1) * shard


# Plexus's performance models (hpcgroup/plexus, performance/), restated: each ranks the grids by one cost.


def plexus_comm_volume(grid: Grid, nodes: int, dims: list[int]) -> float:
    """Bytes one rank moves per epoch as Plexus's communication model counts them (performance/comm_model.py
    ``compute_config_costs``, version v1: every axis at the same bandwidth; the model divides by it). ``dims`` as
    there: [features, hidden..., classes], unpadded. Its terms: per layer, forward the input all-gather (layer 0),
    the aggregate's all-reduce over O, the weight's all-gather over D, the output's all-reduce over I; backward the
    weight's all-gather and its gradient's reduce-scatter, the aggregate gradient's all-reduce over O, and the
    input gradient's reduce-scatter (layer 0) or all-reduce over D (later layers)."""
    total = 0.0
    for layer in range(len(dims) - 1):
        o, i, d = grid.sizes(layer)
        din, dout = dims[layer], dims[layer + 1]
        features = (d - 1) / d * nodes * din / (o * i)
        agg = 2 * (o - 1) / o * nodes * din / (d * i)
        weight = (d - 1) / d * din * dout / (o * i)
        output = 2 * (i - 1) / i * nodes * dout / (d * o)
        total += (features if layer == 0 else 0) + agg + weight + output  # forward
        input_grad = features if layer == 0 else 2 * (d - 1) / d * nodes * din / (o * i)
        total += 2 * weight + agg + input_grad  # backward
    return total * FLOAT_BYTES


def plexus_spmm_cost(grid: Grid, nodes: int, nnz: int, dims: list[int]) -> float:
    """Plexus's SpMM model (performance/comp_model.py ``comp_model``, unit coefficients: an ordering, not ms).
    ``dims``: the widths each layer aggregates, classes excluded."""
    order = [grid.x, grid.z, grid.y]
    flops = fwd = bwd = 0.0
    for layer, width in enumerate(dims):
        a, b, c = order[layer % 3], order[(layer + 1) % 3], order[(layer + 2) % 3]
        flops += nnz * width / (a * b * c)
        fwd += nodes * c / (width * a)
        bwd += nodes * c / (width * b)
    return flops**0.5 * (1 + fwd + bwd)


def plexus_memory_gib(grid: Grid, nodes: int, nnz: int, dims: list[int]) -> float:
    """Plexus's memory model per GPU (performance/mem_model.py ``compute_config_mem``), GiB."""
    x, y, z = grid.x, grid.y, grid.z
    adj = sum(2 * (nnz / (a * b) * 3 + nodes / a * 2) for a, b in [(z, x), (y, z), (x, y)][: min(3, len(dims))])
    weights = sum(4 * dims[k] * dims[k + 1] / grid.size for k in range(len(dims) - 1))
    agg = sum(2 * nodes * dims[k] / [z * y, y * x, x * z][k % 3] for k in range(len(dims) - 1))
    act = sum(2 * nodes * dims[k] / [x * y, z * x, y * z][k % 3] for k in range(1, len(dims)))
    act += 4 * nodes * dims[0] / grid.size
    once = nodes * dims[0] / (x * y) + dims[0] * dims[1] / (y * x)
    labels = nodes * 2 / {2: z, 0: y, 1: x}[len(dims) % 3]
    return (adj + weights + agg + act + once + labels) * 4 / 2**30


def choose_grid(ranks: int, nodes: int, nnz: int, dims: list[int]) -> Grid:
    """gnnq's rule from Plexus's models: the least communication volume (``plexus_comm_volume``); ties broken by
    the SpMM model, then the memory model, then the grid itself. Plexus's code ranks the grids by each model
    separately (each returns its grids sorted by cost) and has no function that combines them: the order of the
    three here is gnnq's."""
    return min(
        factorizations(ranks),
        key=lambda g: (
            round(plexus_comm_volume(g, nodes, dims), 3),
            round(plexus_spmm_cost(g, nodes, nnz, dims[:-1]), 6),
            round(plexus_memory_gib(g, nodes, nnz, dims), 9),
            (g.x, g.y, g.z),
        ),
    )
