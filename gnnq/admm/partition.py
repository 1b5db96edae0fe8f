"""Which contiguous layers each rank owns in pdADMM-G (``parallel.blocks``).

``layers``: equal layer counts (sizes differing by at most one, larger blocks first), the split of
the paper and the public code. ``cost``: the blocks that minimize the largest block's estimated
cost, so the rank holding a wide first layer (Cora's GA-MLP input: 7,165 columns) holds little else.

A layer's cost is the FLOPs of its share of one iteration, per training row (every layer has the
same rows), counting a multiply-add as 2 and each backtracking search as its gradient plus two
objective evaluations (the start and one accepted try), with d_in, d_out the layer's widths:

    p-step (layers >= 2):  gradient p W and (.) W^T (4 d_in d_out) + 2 objectives (4 d_in d_out)
    W-step:                gradient p W and p^T (.) (4 d_in d_out) + 2 objectives (4 d_in d_out)
    b, a = p W + b:        4 d_in d_out;  the row's objective/residual: 2 d_in d_out
    z, q, u (elementwise): 30 d_out for a hidden layer; the output layer's FISTA z-step 500 d_out

so cost_l = (22 if l >= 2 else 14) d_in d_out + (30 or 500) d_out. Which blocks compute what does
not change the iterates (every layer reads the same neighbour values on any rank), only the time.
"""

from __future__ import annotations

BLOCK_SPLITS = ("cost", "layers")

HIDDEN_ELEMENTWISE, OUTPUT_ELEMENTWISE = 30, 500


def layer_blocks(layers: int, ranks: int) -> list[range]:
    """Contiguous 1-based layer ranges, sizes differing by at most one, larger blocks first."""
    _check(layers, ranks)
    base, extra = divmod(layers, ranks)
    blocks, start = [], 1
    for r in range(ranks):
        size = base + (1 if r < extra else 0)
        blocks.append(range(start, start + size))
        start += size
    return blocks


def layer_costs(dims: list[int]) -> list[int]:
    """Estimated FLOPs per training row of each layer's updates in one iteration (module docstring)."""
    top = len(dims) - 1
    costs = []
    for index in range(1, top + 1):
        d_in, d_out = dims[index - 1], dims[index]
        matmuls = (22 if index >= 2 else 14) * d_in * d_out
        costs.append(matmuls + (OUTPUT_ELEMENTWISE if index == top else HIDDEN_ELEMENTWISE) * d_out)
    return costs


def cost_blocks(costs: list[int], ranks: int) -> list[range]:
    """Contiguous non-empty 1-based blocks, one per rank, minimizing the largest block's summed cost;
    among those, the most even (least sum of squared block costs), then the earliest boundaries
    (deterministic, so every rank finds the same split)."""
    n = len(costs)
    _check(n, ranks)
    prefix = [0]
    for c in costs:
        prefix.append(prefix[-1] + c)
    largest = _best_split(prefix, ranks, lambda block: block, max)[0]
    return _best_split(prefix, ranks, lambda block: block * block if block <= largest else None, lambda a, b: a + b)[1]


def _best_split(prefix: list[int], ranks: int, score, combine) -> tuple[int, list[range]]:
    """The split of layers 1..n (``prefix``: their cumulative costs) into ``ranks`` blocks whose
    ``combine``d block ``score``s (None: not allowed) are least, and that value."""
    n = len(prefix) - 1
    best: list[list[int | None]] = [
        [None] * (n + 1) for _ in range(ranks + 1)
    ]  # best[r][i]: first i layers in r blocks
    cut = [[0] * (n + 1) for _ in range(ranks + 1)]  # where the last of those blocks starts
    best[0][0] = 0
    for r in range(1, ranks + 1):
        for i in range(r, n - (ranks - r) + 1):
            for j in range(r - 1, i):  # the last block is layers j+1..i
                s = score(prefix[i] - prefix[j])
                if best[r - 1][j] is None or s is None:
                    continue
                value = s if r == 1 else combine(best[r - 1][j], s)
                if best[r][i] is None or value < best[r][i]:
                    best[r][i], cut[r][i] = value, j
    stops, i = [], n
    for r in range(ranks, 0, -1):
        stops.append(i)
        i = cut[r][i]
    stops.reverse()
    return best[ranks][n], [range(a + 1, b + 1) for a, b in zip([0] + stops[:-1], stops)]


def split_layers(dims: list[int], ranks: int, how: str) -> list[range]:
    """Every rank's block of the network with widths ``dims`` (input first), by ``parallel.blocks``."""
    if how == "layers":
        return layer_blocks(len(dims) - 1, ranks)
    if how == "cost":
        return cost_blocks(layer_costs(dims), ranks)
    raise ValueError(f"parallel.blocks={how!r} is not allowed; allowed: {', '.join(BLOCK_SPLITS)}")


def _check(layers: int, ranks: int) -> None:
    if not 1 <= ranks <= layers:
        raise ValueError(f"cannot split {layers} layers over {ranks} ranks (need 1 <= ranks <= layers)")
