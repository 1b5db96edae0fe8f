"""parallel=sampling (BNS-GCN) on real gloo groups: p = 1 is sync, bytes scale with p, the aggregate is unbiased.

Here: the cases with real processes (gloo ranks, torchrun or gnnq); the others are in `tests/unit/test_sampling.py`.
"""

from __future__ import annotations

import pytest
import torch
from omegaconf import OmegaConf

from gnnq.comm import Communicator, HaloExchange, Traffic
from gnnq.comm.accounting import HALO_TRAIN
from gnnq.data.part import build_parts
from gnnq.data.partition import partition_nodes
from gnnq.models import local_graph_for
from gnnq.models.factory import build_model
from gnnq.parallel import STRATEGIES
from gnnq.parallel.sampling import draw_sample
from gnnq.train.full_graph import forward_backward
from gnnq.train.optim import make_optimizer
from tests.helpers import random_graph, run_distributed

HIDDEN, LAYERS, EPOCHS = 16, 3, 3


def _setup(world_size: int, model_name: str = "gcn"):
    comm = Communicator()
    graph = random_graph(num_nodes=200, num_edges=1600, seed=4)
    part = build_parts(graph, partition_nodes(graph.edge_index, graph.num_nodes, world_size, "metis", 1), world_size)[
        comm.rank
    ]
    return comm, graph, part, local_graph_for(model_name, part)


def _train(world_size: int, strategy_name: str, model_name: str, options: dict | None = None):
    comm, graph, part, local = _setup(world_size, model_name)
    cfg = OmegaConf.create(
        {
            "model": {"name": model_name, "layers": LAYERS, "hidden": HIDDEN, "dropout": 0.0, "norm": "layer"},
            "trainer": {"optimizer": "adam", "lr": 0.05, "weight_decay": 0.0},
        }
    )
    torch.manual_seed(0)
    model = build_model(cfg, part)
    optimizer = make_optimizer(cfg, model.parameters())
    strategy = STRATEGIES[strategy_name](
        HaloExchange(comm, part.send_idx, part.send_counts, part.halo_counts), local, part.x, **(options or {})
    )
    steps = []
    for epoch in range(1, EPOCHS + 1):
        comm.stats.reset()
        strategy.begin_training_epoch(epoch)
        optimizer.zero_grad()
        logits, _ = forward_backward(model, part, strategy, float(graph.train_mask.sum()), comm)
        steps.append(
            {
                "logits": logits.detach(),
                "grads": [p.grad.clone() for p in model.parameters()],
                "bytes": comm.stats.total_bytes(HALO_TRAIN),
            }
        )
        optimizer.step()
    return steps


@pytest.mark.parametrize("world_size", [2, 3])
@pytest.mark.parametrize("model_name", ["gcn", "sage"])
def test_rate_one_equals_sync(world_size, model_name):
    sampled = run_distributed(world_size, _train, world_size, "sampling", model_name, {"rate": 1.0})
    sync = run_distributed(world_size, _train, world_size, "sync", model_name)
    for s, r in zip(sampled, sync):
        for got, ref in zip(s, r):
            assert got["bytes"] == ref["bytes"] > 0
            assert torch.equal(got["logits"], ref["logits"])
            for g, e in zip(got["grads"], ref["grads"]):
                assert torch.equal(g, e)


def test_bytes_drop_in_proportion_to_the_rate():
    full = sum(r["bytes"] for rank in run_distributed(3, _train, 3, "sampling", "gcn", {"rate": 1.0}) for r in rank)
    for rate in (0.5, 0.25):
        got = sum(r["bytes"] for rank in run_distributed(3, _train, 3, "sampling", "gcn", {"rate": rate}) for r in rank)
        assert got / full == pytest.approx(rate, abs=0.05), rate  # per-channel rounding of rate * rows


def test_floor_sample_size_through_the_strategy():
    """sample_size=floor reaches the strategy: fewer bytes than at_least_one at a rate where channels round
    differently."""
    floor = sum(
        r["bytes"]
        for rank in run_distributed(3, _train, 3, "sampling", "gcn", {"rate": 0.05, "sample_size": "floor"})
        for r in rank
    )
    ones = sum(r["bytes"] for rank in run_distributed(3, _train, 3, "sampling", "gcn", {"rate": 0.05}) for r in rank)
    assert floor / ones == pytest.approx(14 / 18)  # this graph's six channels (54-61 rows): 2+2+... vs 3+3+...


def _aggregates(world_size: int, rate: float, draws: int):
    """Per rank: the received rows vs the true halo rows, and the mean sampled aggregate vs the full one."""
    comm, graph, part, local = _setup(world_size)
    exchange = HaloExchange(comm, part.send_idx, part.send_counts, part.halo_counts)
    strategy = STRATEGIES["sampling"](exchange, local, part.x, rate=rate, seed=3)
    gen = torch.Generator().manual_seed(comm.rank)
    h = torch.randn(part.num_inner, HIDDEN, generator=gen)
    true_halo = exchange.fetch(h, 1, Traffic.training(1))
    full = local.aggregate(torch.cat([h, true_halo]))
    total, mismatched = torch.zeros_like(full), 0
    with torch.no_grad():
        for epoch in range(1, draws + 1):
            strategy.begin_training_epoch(epoch)
            sample = strategy.sample
            rows = exchange.fetch(h, 1, strategy.traffic, sample.plan)
            mismatched += int(not torch.equal(rows, true_halo[sample.recv_pos]))
            total += strategy.aggregate_hidden(1, h)
    counts = [int(c) for c in part.halo_counts]
    scales = draw_sample(exchange.plan, rate, 3, 1, comm.rank).recv_scale
    return {"mismatched": mismatched, "mean": total / draws, "full": full, "counts": counts, "scales": scales}


def test_aggregate_is_unbiased_with_bns_rescaling():
    results = run_distributed(2, _aggregates, 2, 0.3, 400)
    for res in results:
        assert res["mismatched"] == 0, "the receiver must place exactly the rows its owner sampled"
        expected = [c / max(1, min(c, round(0.3 * c))) for c in res["counts"] if c]
        assert sorted(set(round(s, 6) for s in res["scales"].tolist())) == sorted(set(round(e, 6) for e in expected))
        err = (res["mean"] - res["full"]).norm() / res["full"].norm()
        assert err < 0.05, err  # Monte Carlo mean of 400 draws; a biased (unscaled) aggregate is far off
