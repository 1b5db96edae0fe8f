"""The grid of parallel=tensor3d: rank placement, lines, layer roles, the byte count and the grid choice."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from gnnq.errors import ConfigError
from gnnq.parallel.tensor3d import grid_for, node_orders
from gnnq.parallel.tensor3d_grid import Grid, choose_grid, epoch_bytes, factorizations, plexus_comm_volume

DIMS = [1433, 256, 256, 7]


@pytest.mark.parametrize("grid", [Grid(2, 3, 2), Grid(1, 4, 1), Grid(3, 1, 2)])
def test_ranks_lie_on_the_grid_with_y_fastest_and_each_axis_partitions_the_ranks(grid):
    assert [grid.rank_of(grid.coords(r)) for r in range(grid.size)] == list(range(grid.size))
    assert grid.coords(1) == ({"x": 0, "y": 1, "z": 0} if grid.y > 1 else grid.coords(1))
    for axis in "xyz":
        lines = grid.groups(axis)
        assert sorted(r for line in lines for r in line) == list(range(grid.size))
        assert all(len(line) == grid.dims()[axis] for line in lines)


def test_layer_roles_rotate_so_a_layers_output_is_the_next_layers_input():
    g = Grid(2, 3, 5)
    for layer in range(6):
        o, i, d = g.sizes(layer)
        o2, i2, d2 = g.sizes(layer + 1)
        assert (o2, i2, d2) == (d, o, i)  # output rows over D, columns over O, replicated over I


def test_one_rank_sends_nothing_and_bytes_grow_with_the_split():
    assert sum(epoch_bytes(Grid(1, 1, 1), 100, DIMS, bias=True, inputs_every_epoch=True).values()) == 0
    two = epoch_bytes(Grid(2, 1, 1), 100, [8, 4, 2], bias=False, inputs_every_epoch=False)
    # 2x1x1, layer 0 (O=x): aggregate all-reduce 2*(1/2)*100*8 per rank; layer 1 (O=z, I=x, D=y): the output's
    # all-reduce over I=x, 2*(1/2)*100*2, and its backward: the input gradient's aggregate all-reduce over O=z (1) and
    # D=y (1) -> none. Padded to multiples of 2: 100, [8, 4, 2].
    assert two == {"0.fwd": 2 * 800 * 4, "0.bwd": 0, "1.fwd": 2 * 200 * 4, "1.bwd": 0}


def test_the_grid_choice_is_a_factorization_minimizing_plexus_communication():
    for ranks in (1, 2, 3, 4, 6, 8):
        grids = factorizations(ranks)
        assert all(g.size == ranks for g in grids) and len(set(grids)) == len(grids)
        best = choose_grid(ranks, 2708, 13264, DIMS)
        assert plexus_comm_volume(best, 2708, DIMS) == min(plexus_comm_volume(g, 2708, DIMS) for g in grids)


def test_a_given_grid_must_have_the_runs_ranks():
    pcfg = OmegaConf.create({"grid": [2, 2, 1]})
    assert grid_for(pcfg, 4, 10, 10, DIMS) == (Grid(2, 2, 1), "given")
    with pytest.raises(ConfigError, match=r"parallel.grid=\[2, 2, 1\]: X\*Y\*Z = 4 but the run has 2 rank"):
        grid_for(pcfg, 2, 10, 10, DIMS)
    with pytest.raises(ConfigError, match="three positive sizes"):
        grid_for(OmegaConf.create({"grid": [2, 0, 1]}), 2, 10, 10, DIMS)
    assert grid_for(OmegaConf.create({"grid": None}), 4, 2708, 13264, DIMS)[1] == "model"


def test_the_double_permutation_alternates_two_orders():
    orders = node_orders("double", 50, 3, seed=1)
    assert not orders[0].equal(orders[1]) and orders[0].equal(orders[2]) and orders[1].equal(orders[3])
    assert all(sorted(o.tolist()) == list(range(50)) for o in orders)
    single = node_orders("single", 50, 3, seed=1)
    assert all(o.equal(single[0]) for o in single) and not single[0].equal(node_orders("none", 50, 3, seed=1)[0])
    with pytest.raises(ConfigError, match="parallel.permutation"):
        node_orders("triple", 50, 3, seed=1)
