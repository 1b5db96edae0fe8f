"""pdADMM-G / -G-Q: the grid codec, layer blocks, and parallel == serial on real gloo groups.

Here: the cases with real processes (gloo ranks, torchrun or gnnq); the others are in `tests/unit/test_admm.py`.
"""

from __future__ import annotations

import math

import pytest
import torch

from gnnq.admm.block import Penalties, StepRule, warm_start
from gnnq.admm.chain import Stage, chain_network
from gnnq.admm.partition import layer_blocks, split_layers
from gnnq.admm.train import build_block, iterate, settle_q
from gnnq.comm.accounting import ADMM_TRAIN
from gnnq.comm.communicator import Communicator
from gnnq.comm.grid_codec import Grid
from tests.helpers import run_distributed

# --- parallel equals serial (real gloo groups) ---

N, F, H, C, LAYERS, ITERS = 60, 60, 16, 5, 6, 6
DIMS = [F] + [H] * (LAYERS - 1) + [C]  # F wide enough that cost blocks differ from equal counts on 2 and 4 ranks
PEN = Penalties(rho=0.5, nu=1.0, mu=0.01)


def _data():
    gen = torch.Generator().manual_seed(7)
    return torch.rand(N, F, generator=gen) * 3, torch.randint(0, C, (N,), generator=gen)


GRIDS = {"fp32": None, "grid": Grid(-1.0, 4.0, 256)}  # the grid spans this data's activations, so p and q move on it


def _run_blocks(variant: str, deep_start: str = "", blocks: str = "cost", overlap_q: bool = True):
    """Every rank: ITERS iterations of its block with one intra-op thread (so the arithmetic is the
    same in every process); returns its layers' variables, its neighbour values and its bytes sent.
    ``variant``: fp32, grid (p and q coded) or grid_p (only p). ``deep_start``: "warmup2" (identity
    hidden layers and a warm-started first layer) or "chain" (the authors' chain start and steps).
    ``blocks``: parallel.blocks; ``overlap_q``: each q exchange left in flight into the next iteration."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        comm = Communicator()
        x, y = _data()
        grid = GRIDS["grid" if variant.startswith("grid") else "fp32"]
        dims = DIMS
        first = warm_start(x, y, dims, 3, PEN, iterations=4) if deep_start == "warmup2" else None
        steps = StepRule(20.0, 11) if deep_start == "chain" else StepRule()
        network = chain_network(x, y, dims, 3, STAGES, 1.0, steps) if deep_start == "chain" else None
        block, links = build_block(
            comm,
            x,
            y,
            dims,
            seed=3,
            p_grid=grid,
            q_grid=grid if variant == "grid" else None,
            hidden_init="identity" if deep_start else "he",
            first=first,
            network=network,
            steps=steps,
            blocks=blocks,
        )
        start = {layer.index: layer.p for layer in block.layers if layer.p is not None}
        comm.stats.reset()
        pending = None
        for _ in range(ITERS):
            pending = iterate(block, links, PEN, pending, overlap_q)
            assert (pending is not None) == overlap_q
        if pending is not None:
            settle_q(block, links, pending)
        names = ("W", "b", "z", "p", "q", "u")
        state = {
            layer.index: {k: getattr(layer, k).clone() for k in names if getattr(layer, k) is not None}
            for layer in block.layers
        }
        ghosts = {"q_below": block.q_below, "u_below": block.u_below, "p_above": block.p_above}
        moved = all(not torch.equal(start[i], state[i]["p"]) for i in start)
        return state, comm.stats.total_bytes(ADMM_TRAIN), ghosts, moved
    finally:
        torch.set_num_threads(threads)


def _merged(results) -> dict:
    merged = {}
    for state, *_ in results:
        merged.update(state)
    return merged


@pytest.mark.parametrize(
    "variant,deep_start,blocks,overlap_q",
    [
        ("fp32", "", "cost", True),
        ("grid", "", "cost", True),
        ("grid_p", "", "cost", True),
        ("fp32", "warmup2", "cost", True),
        ("fp32", "chain", "cost", True),
        ("fp32", "", "layers", False),
    ],
    ids=["pdADMM-G", "pdADMM-G-Q", "pdADMM-G-Q-p-only", "deep-start", "chain-start", "equal-counts-blocking-q"],
)
def test_any_number_of_ranks_computes_the_serial_iterates(variant, deep_start, blocks, overlap_q):
    for world_size in (2, 4):  # or the cost split would test nothing the equal counts do not
        assert split_layers(DIMS, world_size, "cost") != layer_blocks(LAYERS, world_size)
    serial = _merged(
        [_run_blocks(variant, deep_start, blocks, overlap_q)]
    )  # one process: no group, the whole network in one block
    assert sorted(serial) == list(range(1, LAYERS + 1))
    grid = GRIDS["grid" if variant.startswith("grid") else "fp32"]
    for world_size in (2, 4):
        results = run_distributed(world_size, _run_blocks, variant, deep_start, blocks, overlap_q)
        parallel = _merged(results)
        assert sorted(parallel) == sorted(serial)
        for index, variables in serial.items():
            for name, value in variables.items():
                assert torch.equal(parallel[index][name], value), (
                    world_size,
                    index,
                    name,
                    (parallel[index][name] - value).abs().max(),
                )
        for rank, (_, _, ghosts, moved) in enumerate(results):
            assert moved, f"rank {rank}: p did not move"
            mine = split_layers(DIMS, world_size, blocks)[rank]
            if mine.start > 1:  # q and the replica of u of the layer below equal its owner's
                assert torch.equal(ghosts["q_below"], serial[mine.start - 1]["q"])
                assert torch.equal(ghosts["u_below"], serial[mine.start - 1]["u"])
            if mine.stop <= LAYERS:
                assert torch.equal(ghosts["p_above"], serial[mine.stop]["p"])
        # Bytes: each of the world_size - 1 boundaries carries one p down and one q up per iteration.
        fp32_message = N * H * 4
        coded = fp32_message if grid is None else math.ceil(N * H * grid.bits / 8)
        per_boundary = coded + (coded if variant == "grid" else fp32_message)
        assert sum(r[1] for r in results) == ITERS * (world_size - 1) * per_boundary
    if grid is not None:
        levels = grid.values(torch.arange(grid.levels))
        for index, variables in serial.items():
            names = ("p", "q") if variant == "grid" else ("p",)
            for name in names:
                if name in variables:
                    assert torch.isin(variables[name], levels).all(), (index, name)


STAGES = [Stage(2, 3, 1e-2, 1.0), Stage(4, 2, 1e-2, 0.1)]
