"""parallel=pipeqs (PipeQS) on real gloo groups: the staleness bound, and the rows a skipped message leaves.

The link is the test's input: ``_SlowLink`` says last epoch's message never arrived by the next epoch (the
decision's one timing input, rank 0's poll), so every decision is a skip unless the rows changed a lot or the bound
is reached. With ``threshold=1`` no change counts as large."""

from __future__ import annotations

import pytest
import torch
from omegaconf import OmegaConf

from gnnq.comm import Communicator, HaloExchange
from gnnq.comm.accounting import HALO_TRAIN
from gnnq.comm.codec import MessageQuantization, UniformCodec
from gnnq.data.part import build_parts
from gnnq.data.partition import partition_nodes
from gnnq.models import local_graph_for
from gnnq.models.factory import build_model
from gnnq.parallel.pipeqs import PipeQSStrategy
from gnnq.train.full_graph import forward_backward
from gnnq.train.optim import make_optimizer
from tests.helpers import random_graph, run_distributed

HIDDEN, LAYERS, EPOCHS = 16, 3, 6


class _SlowLink(PipeQSStrategy):
    def _arrived(self, key) -> bool:
        return False


def _runs(world_size: int, bounds: list[int]) -> dict:
    """One training per staleness bound, in the same ranks (one start-up for all)."""
    return {bound: _train(world_size, bound) for bound in bounds}


def _train(world_size: int, max_staleness: int):
    comm = Communicator()
    graph = random_graph(num_nodes=150, num_edges=900, seed=2)
    parts = build_parts(graph, partition_nodes(graph.edge_index, graph.num_nodes, world_size, "metis", 1), world_size)
    part = parts[comm.rank]
    cfg = OmegaConf.create(
        {
            "model": {"name": "gcn", "layers": LAYERS, "hidden": HIDDEN, "dropout": 0.0, "norm": "layer"},
            "trainer": {"optimizer": "adam", "lr": 0.05, "weight_decay": 0.0},
        }
    )
    torch.manual_seed(0)
    model = build_model(cfg, part)
    optimizer = make_optimizer(cfg, model.parameters())
    codec = UniformCodec(2, torch.float32)
    quant = MessageQuantization(codec, codec, None, seed=0, rank=comm.rank)
    exchange = HaloExchange(comm, part.send_idx, part.send_counts, part.halo_counts, quant)
    strategy = _SlowLink(
        exchange, local_graph_for("gcn", part), part.x, threshold=1.0, max_staleness=max_staleness, warmup="zeros"
    )
    steps = []
    for epoch in range(EPOCHS):
        comm.stats.reset()
        strategy.begin_training_epoch(epoch)
        optimizer.zero_grad()
        forward_backward(model, part, strategy, float(graph.train_mask.sum()), comm)
        steps.append(
            {
                "messages": strategy.epoch_fields()["messages"],
                "halo": strategy.halo[1].clone(),
                "bytes": {d: comm.stats.bytes.get((HALO_TRAIN, 1, d), 0) for d in ("fwd", "bwd")},
            }
        )
        optimizer.step()
    strategy.close()
    return {"steps": steps, "peers": world_size - 1}


def _forward(step) -> int:
    return step["messages"]["1.fwd"][0]


@pytest.fixture(scope="module")
def ranks():
    return run_distributed(2, _runs, 2, [2, 0])


def test_rows_older_than_the_bound_are_refreshed_and_younger_ones_are_not(ranks):
    for runs in ranks:
        rank = runs[2]
        steps = rank["steps"]
        # epoch 0 posts; epochs 1 and 2 reuse (ages 1 and 2); epoch 3 is at the bound: refreshed; then again
        assert [_forward(s) for s in steps] == [2, 0, 0, 2, 0, 0]
        assert torch.equal(steps[1]["halo"], steps[0]["halo"]) and torch.equal(steps[2]["halo"], steps[0]["halo"])
        assert not torch.equal(steps[3]["halo"], steps[2]["halo"]), "the refresh must bring epoch 0's rows"
        # a skipped forward message: one decision byte per peer and nothing else; its layer has no backward exchange
        assert steps[1]["bytes"]["fwd"] == rank["peers"] and steps[1]["bytes"]["bwd"] == 0
        assert steps[1]["messages"]["1.bwd"] == [-1, False]
        assert steps[3]["bytes"]["fwd"] > 100 * rank["peers"]


def test_without_a_bound_a_quiet_layer_is_never_refreshed(ranks):
    for runs in ranks:
        rank = runs[0]
        assert [_forward(s) for s in rank["steps"]] == [2, 0, 0, 0, 0, 0]
        assert all(torch.equal(s["halo"], rank["steps"][0]["halo"]) for s in rank["steps"])
