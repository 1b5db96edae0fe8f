"""pdADMM-G / -G-Q: the grid codec, layer blocks, and parallel == serial on real gloo groups.

Here: the in-process cases (no process started); the others are in `tests/integration/test_admm.py`.
"""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from gnnq.admm.block import Penalties, initial_layers, warm_start
from gnnq.admm.chain import INIT_STD, Stage, chain_network, grown_network, run_stage
from gnnq.admm.partition import cost_blocks, layer_blocks, layer_costs, split_layers
from gnnq.admm.schedule import RhoSchedule
from gnnq.admm.train import build_block, iterate
from gnnq.comm.communicator import Communicator
from gnnq.comm.grid_codec import Grid, pack_bits, unpack_bits

PAPER_GRID = Grid(-1.0, 20.0, 22)


# --- grid projection and codes ---


def test_paper_grid_is_the_integers_minus_one_to_twenty_in_five_bits():
    assert PAPER_GRID.step == 1.0 and PAPER_GRID.bits == 5
    assert PAPER_GRID.values(torch.arange(22)).tolist() == [float(v) for v in range(-1, 21)]


@pytest.mark.parametrize("grid", [PAPER_GRID, Grid(-1.0, 2.0, 1000), Grid(0.0, 1.0, 2), Grid(-3.5, 7.25, 37)])
def test_projection_is_the_nearest_grid_point_and_idempotent(grid):
    x = torch.randn(4000) * (grid.hi - grid.lo) + grid.lo / 2
    proj = grid.project(x)
    levels = grid.values(torch.arange(grid.levels))
    brute = levels[(x[:, None] - levels[None, :]).abs().argmin(dim=1)]
    # Equal distances (exact midpoints) may round either way; the distance is what must match.
    assert torch.allclose((proj - x).abs(), (brute - x).abs(), atol=1e-5)
    assert torch.isin(proj, levels).all()
    assert torch.equal(grid.project(proj), proj)


@pytest.mark.parametrize("grid", [PAPER_GRID, Grid(-1.0, 2.0, 1000), Grid(0.0, 1.0, 2)])
@pytest.mark.parametrize("shape", [(1, 1), (7, 13), (140, 500)])
def test_codes_decode_to_the_projection_in_the_formula_bytes(grid, shape):
    x = torch.randn(shape) * 5
    wire = grid.encode(x)
    n = math.prod(shape)
    assert wire.dtype == torch.uint8 and wire.numel() == math.ceil(n * grid.bits / 8) == grid.wire_bytes(n)
    assert torch.equal(grid.decode(wire, shape), grid.project(x))


@pytest.mark.parametrize("bits", range(1, 17))
def test_pack_bits_round_trip(bits):
    codes = torch.randint(0, 2**bits, (1001,))
    wire = pack_bits(codes, bits)
    assert wire.numel() == math.ceil(1001 * bits / 8)
    assert torch.equal(unpack_bits(wire, bits, 1001), codes)


def test_grid_rejects_bad_ranges():
    with pytest.raises(ValueError, match="levels >= 2"):
        Grid(0.0, 1.0, 1)
    with pytest.raises(ValueError, match="hi > lo"):
        Grid(1.0, 1.0, 4)


# --- layer blocks ---


def test_layer_blocks_are_contiguous_and_balanced():
    assert layer_blocks(10, 4) == [range(1, 4), range(4, 7), range(7, 9), range(9, 11)]
    assert layer_blocks(3, 1) == [range(1, 4)]
    assert layer_blocks(3, 3) == [range(1, 2), range(2, 3), range(3, 4)]
    with pytest.raises(ValueError):
        layer_blocks(2, 3)


CORA_DIMS = [7165] + [500] * 9 + [7]  # the paper's GA-MLP on Cora: 4 hops of 1,433 features, 10 layers of 500


def test_cost_blocks_give_the_wide_first_layer_a_rank_of_its_own():
    costs = layer_costs(CORA_DIMS)
    assert (
        costs[0] == 14 * 7165 * 500 + 30 * 500
        and costs[1] == 22 * 500 * 500 + 30 * 500
        and costs[-1] == 22 * 500 * 7 + 500 * 7
    )
    assert split_layers(CORA_DIMS, 2, "cost") == [range(1, 2), range(2, 11)]
    # The largest block is layer 1 alone either way; the other ranks split the rest evenly.
    assert split_layers(CORA_DIMS, 4, "cost") == [range(1, 2), range(2, 5), range(5, 8), range(8, 11)]
    assert split_layers(CORA_DIMS, 4, "layers") == layer_blocks(10, 4)
    with pytest.raises(ValueError, match="parallel.blocks='even' is not allowed; allowed: cost, layers"):
        split_layers(CORA_DIMS, 2, "even")


def test_cost_blocks_minimize_the_largest_block_then_its_spread():
    """Against every contiguous split of small random costs."""
    gen = torch.Generator().manual_seed(0)
    for _ in range(200):
        n = int(torch.randint(1, 8, (1,), generator=gen))
        ranks = int(torch.randint(1, n + 1, (1,), generator=gen))
        costs = torch.randint(1, 20, (n,), generator=gen).tolist()
        key = lambda blocks: (  # noqa: E731
            max(s := [sum(costs[i - 1] for i in b) for b in blocks]),
            sum(v * v for v in s),
        )
        got = cost_blocks(costs, ranks)
        assert len(got) == ranks and all(len(b) for b in got) and [i for b in got for i in b] == list(range(1, n + 1))
        every = [
            [range(e[i] + 1, e[i + 1] + 1) for i in range(ranks)]
            for cuts in itertools.combinations(range(1, n), ranks - 1)
            for e in [(0, *cuts, n)]
        ]
        assert key(got) == min(map(key, every)), (costs, ranks, got)


# --- parallel equals serial (real gloo groups) ---

N, F, H, C, LAYERS, ITERS = 60, 60, 16, 5, 6, 6
DIMS = [F] + [H] * (LAYERS - 1) + [C]  # F wide enough that cost blocks differ from equal counts on 2 and 4 ranks
PEN = Penalties(rho=0.5, nu=1.0, mu=0.01)


def _data():
    gen = torch.Generator().manual_seed(7)
    return torch.rand(N, F, generator=gen) * 3, torch.randint(0, C, (N,), generator=gen)


def test_iterations_move_the_network():
    """A guard against a parallel == serial test passing because nothing changes."""
    comm = Communicator()
    x, y = _data()
    block, links = build_block(comm, x, y, DIMS, seed=3, p_grid=None, q_grid=None)
    before = [layer.W.clone() for layer in block.layers]
    loss_before = torch.nn.functional.cross_entropy(block.forward(x), y)
    for _ in range(ITERS):
        iterate(block, links, PEN)
    assert all(not torch.equal(b, layer.W) for b, layer in zip(before, block.layers))
    assert float(block.local_terms(PEN)[1]) > 0  # p and q have left their initial agreement
    assert torch.nn.functional.cross_entropy(block.forward(x), y) < loss_before


def test_identity_hidden_layers_and_warm_first_layer():
    x, y = _data()
    dims = DIMS
    first = warm_start(x, y, dims, 3, PEN, iterations=4)
    he = initial_layers(x, dims, 3)
    assert not torch.equal(first[0], he[0].W)  # the warm-up moved layer 1
    layers = initial_layers(x, dims, 3, hidden_init="identity", first=first)
    assert torch.equal(layers[0].W, first[0]) and torch.equal(layers[0].b, first[1])
    for layer in layers[1:-1]:
        assert torch.equal(layer.W, torch.eye(H))
        assert torch.equal(layer.p, layers[layer.index - 2].q)  # constraints hold at the start
    assert torch.equal(layers[-1].W, he[-1].W)  # the output layer keeps its random start
    assert torch.equal(layers[1].q, layers[0].q)  # identity on a ReLU output passes it through


def test_rho_grows_tenfold_after_two_stalled_iterations_up_to_the_cap():
    schedule = RhoSchedule(0.1, "grow", 5.0)
    for loss in (1.0, 0.5, 0.2):  # falling: no change
        schedule.after(loss)
    assert schedule.rho == 0.1
    schedule.after(0.2)  # one stalled iteration
    assert schedule.rho == 0.1
    schedule.after(0.1995)  # two: x10
    assert schedule.rho == pytest.approx(1.0)
    schedule.after(0.1995)  # the window starts over after a growth
    assert schedule.rho == pytest.approx(1.0)
    schedule.after(0.1995)
    assert schedule.rho == pytest.approx(1.0)
    schedule.after(0.1995)
    assert schedule.rho == 5.0  # two more stalled iterations: x10, capped
    fixed = RhoSchedule(0.1, "none", 5.0)
    for loss in (1.0, 1.0, 1.0, 1.0):
        fixed.after(loss)
    assert fixed.rho == 0.1


def test_paper_schedule_grows_from_the_fourth_iteration_every_stalled_one_up_to_one():
    """The authors' rule: after iteration i > 2 (0-based), x10 when loss_i and loss_{i-1} each fell by < 1e-3."""
    schedule = RhoSchedule(1e-4, "paper", 1.0)
    rhos = []
    for loss in (1.0, 1.0, 1.0):  # stalled from the start, but no growth before the fourth iteration
        schedule.after(loss)
        rhos.append(schedule.rho)
    assert rhos == [1e-4] * 3
    for loss in (1.0, 0.9995, 0.9991):  # stalled: x10 after each, no waiting after a growth
        schedule.after(loss)
        rhos.append(schedule.rho)
    assert rhos[3:] == pytest.approx([1e-3, 1e-2, 1e-1])
    schedule.after(0.5)  # a real fall: no growth
    schedule.after(0.4999)  # one stalled iteration after a fall: still none
    assert schedule.rho == pytest.approx(1e-1)
    for loss in (0.4999, 0.4999, 0.4999):
        schedule.after(loss)
    assert schedule.rho == 1.0  # capped at rho_max
    with pytest.raises(ValueError, match="none, grow, paper"):
        RhoSchedule(1.0, "fast")


STAGES = [Stage(2, 3, 1e-2, 1.0), Stage(4, 2, 1e-2, 0.1)]


def test_chain_start_keeps_the_trained_layers_and_starts_the_output_at_the_labels():
    x, y = _data()
    dims = DIMS
    gen = torch.Generator().manual_seed(3)
    two = grown_network(x, y, H, C, 2, [], False, gen)
    assert two[0].W.std().item() == pytest.approx(INIT_STD, rel=0.2) and torch.equal(two[1].z, torch.zeros(N, C))
    start_w1 = two[0].W.clone()
    two = run_stage(x, y, two, STAGES[0], 1.0)
    assert not torch.equal(two[0].W, start_w1)  # the 2-layer network trained
    four = run_stage(x, y, grown_network(x, y, H, C, 4, two[:-1], False, gen), STAGES[1], 1.0)
    full = chain_network(x, y, dims, 3, STAGES, 1.0)
    assert len(full) == LAYERS
    for kept in range(3):  # layers 1..3 of the 4-layer network with their p, z, q; u starts again at 0
        for name in ("W", "b", "z", "q", "p"):
            value = getattr(four[kept], name)
            assert (value is None and getattr(full[kept], name) is None) or torch.equal(
                getattr(full[kept], name), value
            ), (kept, name)
        assert torch.equal(full[kept].u, torch.zeros_like(full[kept].q))
    assert torch.equal(full[1].p, four[1].p) and not torch.equal(
        full[1].p, full[0].q
    )  # a trained p, not the forward pass
    assert torch.equal(full[3].p, full[2].q)  # the new layers start on the kept network's last q
    for layer in full[3:-1]:
        assert torch.equal(layer.W, torch.eye(H)) and torch.equal(layer.b, torch.zeros(H))
        assert torch.equal(layer.q, torch.relu(layer.z)) and torch.equal(full[layer.index].p, layer.q)
    top = full[-1]
    assert torch.equal(top.W, torch.eye(H, C)) and torch.equal(top.b, torch.zeros(C))
    assert torch.equal(top.z, torch.where(torch.nn.functional.one_hot(y, C) == 1, 1.0, -1.0))


def test_nan_cannot_be_grid_coded():
    from gnnq.comm.codec import NonFiniteMessageError

    with pytest.raises(NonFiniteMessageError, match="NaN"):
        PAPER_GRID.encode(torch.tensor([0.5, float("nan")]))
    assert PAPER_GRID.project(torch.tensor([float("inf"), -float("inf")])).tolist() == [20.0, -1.0]


def test_grid_rejects_levels_fp32_cannot_tell_apart():
    with pytest.raises(ValueError, match="fp32"):
        Grid(1e6, 1e6 + 1, 1000)
