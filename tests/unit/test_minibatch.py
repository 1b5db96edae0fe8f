"""Mini-batch reference trainer: neighbour-sampled blocks and the single-process training loop.

Here: the in-process cases (no process started); the others are in `tests/integration/test_minibatch.py`.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from gnnq.comm import Communicator, HaloExchange
from gnnq.config.typed import typed_config
from gnnq.data.part import build_parts
from gnnq.models import local_graph_for
from gnnq.models.factory import build_model
from gnnq.parallel import SyncStrategy
from gnnq.train.minibatch import resolve_fanouts, train_minibatch
from gnnq.train.neighbor_sampler import NeighborSampler
from tests.helpers import random_graph

HIDDEN, LAYERS = 16, 3


def _whole(graph):
    return build_parts(graph, np.zeros(graph.num_nodes, dtype=np.int64), 1)[0]


def _cfg(model: str, **parallel):
    cfg = typed_config({"parallel": {"name": "minibatch"}})
    cfg.model.name, cfg.model.hidden, cfg.model.layers, cfg.model.dropout = model, HIDDEN, LAYERS, 0.0
    cfg.parallel.name = "minibatch"
    for k, v in parallel.items():
        cfg.parallel[k] = v
    cfg.trainer.epochs, cfg.trainer.lr, cfg.trainer.eval_every = 8, 0.01, 2
    cfg.cluster.nproc = 1
    return cfg


def _edges(graph) -> set[tuple[int, int]]:
    src, dst = graph.edge_index
    return set(zip(src.tolist(), dst.tolist()))


def _dense(block) -> torch.Tensor:
    return block.graph.matrix.to_dense()


@pytest.mark.parametrize("model_name", ["gcn", "sage"])
def test_all_neighbours_equals_full_graph_forward(model_name):
    """fanouts=-1: blocks reproduce the full-graph forward, for every node and for a shuffled subset."""
    graph = random_graph()
    part = _whole(graph)
    torch.manual_seed(0)
    model = build_model(_cfg(model_name), part).eval()
    exchange = HaloExchange(Communicator(), part.send_idx, part.send_counts, part.halo_counts)
    full = model(part.x, SyncStrategy(exchange, local_graph_for(model_name, part), part.x)).detach()
    sampler = NeighborSampler(part, model_name, [-1] * LAYERS)
    subset = torch.randperm(part.num_inner, generator=torch.Generator().manual_seed(3))[:37]
    for targets in (torch.arange(part.num_inner), subset):
        blocks = sampler.sample(targets, torch.Generator().manual_seed(0))
        assert torch.equal(blocks.target_ids, targets)
        got = model(part.x[blocks.input_ids], blocks, blocks.num_dst).detach()
        torch.testing.assert_close(got, full[targets], rtol=1e-5, atol=1e-5 * float(full.abs().max()))
    # Backward through the blocks (their lazily built transposes) gives the full-graph gradients.
    params = list(model.parameters())
    ref = torch.autograd.grad(_full_loss(model, part, model_name, subset), params)
    blocks = sampler.sample(subset, torch.Generator().manual_seed(0))
    loss = torch.nn.functional.cross_entropy(model(part.x[blocks.input_ids], blocks, blocks.num_dst), part.y[subset])
    for g, r in zip(torch.autograd.grad(loss, params), ref):
        torch.testing.assert_close(g, r, rtol=1e-5, atol=1e-5 * float(r.abs().max()))


def _full_loss(model, part, model_name, targets):
    exchange = HaloExchange(Communicator(), part.send_idx, part.send_counts, part.halo_counts)
    logits = model(part.x, SyncStrategy(exchange, local_graph_for(model_name, part), part.x))
    return torch.nn.functional.cross_entropy(logits[targets], part.y[targets])


@pytest.mark.parametrize("model_name", ["gcn", "sage"])
def test_sampled_blocks_are_subgraphs_with_destinations_first(model_name):
    # Average in-degree ~22: fanout 3 takes the redraw path (degree > 2*fanout), 15 the random-key
    # path (fanout < degree <= 2*fanout) and everything-kept rows; -1 keeps every edge.
    graph = random_graph(num_nodes=90, num_edges=2000, seed=1)
    part = _whole(graph)
    edges = _edges(graph)
    deg = part.indptr.diff()
    fanouts = [3, 15, -1]
    targets = torch.tensor([5, 0, 77, 31, 89, 12])
    blocks = NeighborSampler(part, model_name, fanouts).sample(targets, torch.Generator().manual_seed(7))
    assert len(blocks) == 3 and torch.equal(blocks.target_ids, targets)
    paths = set()
    for i, (block, fanout) in enumerate(zip(blocks, fanouts)):
        src_ids, dst_ids = block.src_ids, block.dst_ids
        assert src_ids.unique().numel() == src_ids.numel()
        if i + 1 < len(blocks):  # this block's destinations are the next block's sources, in order
            assert torch.equal(dst_ids, blocks[i + 1].src_ids)
        dense = _dense(block)
        assert dense.shape == (block.num_dst, src_ids.numel())
        rows, cols = torch.nonzero(dense, as_tuple=True)
        u, v = src_ids[cols], dst_ids[rows]
        loops = u == v
        assert all((a, b) in edges for a, b in zip(u[~loops].tolist(), v[~loops].tolist()))
        per_row = torch.bincount(rows[~loops], minlength=block.num_dst)
        want = deg[dst_ids] if fanout == -1 else deg[dst_ids].clamp(max=fanout)
        assert torch.equal(per_row, want)  # min(degree, fanout) distinct neighbours each
        assert block.num_sampled_edges == int(want.sum())
        if model_name == "gcn":
            assert torch.equal(rows[loops], torch.arange(block.num_dst))  # one self loop per destination, at (r, r)
            assert torch.equal(cols[loops], rows[loops])
        else:
            assert not loops.any()
            sums = dense.sum(1)
            torch.testing.assert_close(sums[per_row > 0], torch.ones(int((per_row > 0).sum())))
        if fanout == 3:
            paths.add("redraw" if bool((deg[dst_ids] > 6).any()) else "")
        if fanout == 15:
            paths.add("keys" if bool(((deg[dst_ids] > 15) & (deg[dst_ids] <= 30)).any()) else "")
    assert {"redraw", "keys"} <= paths, "both sampling paths must be exercised"


@pytest.mark.parametrize("model_name", ["gcn", "sage"])
@pytest.mark.parametrize("fanout", [3, 15])
def test_sampled_aggregate_is_unbiased(model_name, fanout):
    """Averaged over many seeds, the sampled aggregate approaches the full-graph one (sage: the full mean)."""
    graph = random_graph(num_nodes=90, num_edges=2000, seed=1)
    part = _whole(graph)
    sampler = NeighborSampler(part, model_name, [fanout])
    targets = torch.arange(part.num_inner)
    full = local_graph_for(model_name, part).aggregate(part.x)
    seeds = 600
    total = torch.zeros_like(full)
    one_error = None
    for seed in range(seeds):
        block = sampler.sample(targets, torch.Generator().manual_seed(seed))[0]
        agg = block.graph.aggregate(part.x[block.src_ids])
        one_error = float((agg - full).abs().max()) if one_error is None else one_error
        total += agg
    err = float((total / seeds - full).abs().max())
    assert one_error > 0.3, "a single sample must differ, or the test proves nothing"
    assert err < 0.15, err
    assert err < one_error / 4


def test_fanouts_and_world_size_errors():
    assert resolve_fanouts([10], 3) == [10, 10, 10]
    assert resolve_fanouts([25, 10, -1], 3) == [25, 10, -1]
    with pytest.raises(ValueError, match="parallel.fanouts"):
        resolve_fanouts([10, 5], 3)
    with pytest.raises(ValueError, match="parallel.fanouts"):
        resolve_fanouts([0], 3)
    part = _whole(random_graph())
    with pytest.raises(ValueError, match="parallel.fanouts"):
        train_minibatch(_cfg("sage", fanouts=[10, 5]), part, Communicator())
    with pytest.raises(ValueError, match="cluster.nproc"):
        train_minibatch(_cfg("sage"), part, SimpleNamespace(world_size=2, rank=0))
