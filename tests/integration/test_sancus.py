"""parallel=sancus (SANCUS) on real gloo groups: threshold 0 is sync, a huge threshold sends only the
first epoch's rows (and the staleness bound's resends), and the bytes are what was sent."""

from __future__ import annotations

import pytest
import torch
from omegaconf import OmegaConf

from gnnq.comm import Communicator, HaloExchange
from gnnq.comm.accounting import HALO_TRAIN
from gnnq.data.part import build_parts
from gnnq.data.partition import partition_nodes
from gnnq.models import local_graph_for
from gnnq.models.factory import build_model
from gnnq.parallel import STRATEGIES
from gnnq.train.full_graph import forward_backward
from gnnq.train.optim import make_optimizer
from tests.helpers import random_graph, run_distributed

HIDDEN, LAYERS, EPOCHS = 16, 3, 6


def _train(world_size: int, strategy_name: str, options: dict | None = None, lr: float = 0.05):
    """EPOCHS training steps; per epoch: logits, parameter gradients, halo rows used per layer, and bytes per (layer,
    direction)."""
    comm = Communicator()
    graph = random_graph(num_nodes=150, num_edges=900, seed=2)
    part = build_parts(graph, partition_nodes(graph.edge_index, graph.num_nodes, world_size, "metis", 1), world_size)[
        comm.rank
    ]
    cfg = OmegaConf.create(
        {
            "model": {"name": "gcn", "layers": LAYERS, "hidden": HIDDEN, "dropout": 0.0, "norm": "layer"},
            "trainer": {"optimizer": "adam", "lr": lr, "weight_decay": 0.0},
        }
    )
    torch.manual_seed(0)
    model = build_model(cfg, part)
    optimizer = make_optimizer(cfg, model.parameters())
    exchange = HaloExchange(comm, part.send_idx, part.send_counts, part.halo_counts)
    strategy = STRATEGIES[strategy_name](exchange, local_graph_for("gcn", part), part.x, **(options or {}))
    steps = []
    for epoch in range(1, EPOCHS + 1):
        comm.stats.reset()
        strategy.begin_training_epoch(epoch)
        optimizer.zero_grad()
        logits, _ = forward_backward(model, part, strategy, float(graph.train_mask.sum()), comm)
        halo = {layer: rows.clone() for layer, rows in getattr(strategy, "halo", {}).items()}
        nbytes = {
            (layer, d): comm.stats.bytes.get((HALO_TRAIN, layer, d), 0)
            for layer in range(1, LAYERS)
            for d in ("fwd", "bwd")
        }
        steps.append(
            {
                "logits": logits.detach(),
                "grads": [p.grad.clone() for p in model.parameters()],
                "halo": halo,
                "bytes": nbytes,
            }
        )
        optimizer.step()
    peers_sent = sum(int(c) for q, c in enumerate(part.send_counts) if q != comm.rank)
    return {
        "steps": steps,
        "sends": getattr(strategy, "sends", {}),
        "row_bytes": peers_sent * HIDDEN * 4,
        "world_size": world_size,
    }


@pytest.mark.parametrize("world_size", [2, 3])
def test_threshold_zero_equals_sync(world_size):
    sancus = run_distributed(world_size, _train, world_size, "sancus", {"threshold": 0.0, "max_staleness": 100})
    sync = run_distributed(world_size, _train, world_size, "sync")
    for s, r in zip(sancus, sync):
        assert (
            all(sends == list(range(1, EPOCHS + 1)) for sends in s["sends"].values()) and len(s["sends"]) == LAYERS - 1
        )
        for got, ref in zip(s["steps"], r["steps"]):
            assert torch.equal(got["logits"], ref["logits"])
            assert all(torch.equal(g, e) for g, e in zip(got["grads"], ref["grads"]))
            for key, nbytes in ref[
                "bytes"
            ].items():  # the same rows, plus one flag byte per peer with each forward message
                assert got["bytes"][key] == nbytes + (world_size - 1 if key[1] == "fwd" else 0), key


def test_huge_threshold_sends_the_first_epochs_rows_and_the_bounds_resends():
    """Nothing changes enough: owners send in epoch 1 and then only when the copy is more than 2 epochs old
    (epoch 4); receivers use the cached rows in between. Each forward message's bytes are the rows sent plus flags."""
    results = run_distributed(3, _train, 3, "sancus", {"threshold": 1e9, "max_staleness": 2})
    for res in results:
        assert res["sends"] == {1: [1, 4], 2: [1, 4]}
        steps = res["steps"]
        for layer in (1, 2):
            assert torch.equal(steps[1]["halo"][layer], steps[0]["halo"][layer])  # cached copies reused
            assert torch.equal(steps[2]["halo"][layer], steps[0]["halo"][layer])
            assert not torch.equal(
                steps[3]["halo"][layer], steps[0]["halo"][layer]
            )  # the bound's resend: training moved the rows
            assert torch.equal(steps[4]["halo"][layer], steps[3]["halo"][layer])
            for epoch, step in enumerate(steps, start=1):
                sent = epoch in res["sends"][layer]
                assert step["bytes"][(layer, "fwd")] == (res["row_bytes"] if sent else 0) + res["world_size"] - 1, (
                    epoch,
                    layer,
                )
                assert step["bytes"][(layer, "bwd")] > 0  # backward is exact: gradients go back every epoch


def test_threshold_skips_only_small_changes():
    """A threshold between the rows' changes: some epochs skip, some resend, by the relative change the owner
    measured."""
    results = run_distributed(2, _train, 2, "sancus", {"threshold": 0.1, "max_staleness": 100}, 0.01)
    sends = [res["sends"] for res in results]
    assert any(0 < len(layer_sends) < EPOCHS for s in sends for layer_sends in s.values()), sends
    assert all(layer_sends[0] == 1 for s in sends for layer_sends in s.values())
