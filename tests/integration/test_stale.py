"""parallel=stale (PipeGCN) on real gloo groups: last epoch's halo rows, and sync when nothing changes."""

from __future__ import annotations

import pytest
import torch
from omegaconf import OmegaConf

from gnnq.comm import Communicator, HaloExchange
from gnnq.data.part import build_parts
from gnnq.data.partition import partition_nodes
from gnnq.models import local_graph_for
from gnnq.models.factory import build_model
from gnnq.parallel import STRATEGIES
from gnnq.train.full_graph import forward_backward
from gnnq.train.optim import make_optimizer
from tests.helpers import random_graph, run_distributed

HIDDEN, LAYERS, EPOCHS = 16, 3, 4


def _cfg(model: str, lr: float):
    return OmegaConf.create(
        {
            "model": {"name": model, "layers": LAYERS, "hidden": HIDDEN, "dropout": 0.0, "norm": "layer"},
            "trainer": {"optimizer": "adam", "lr": lr, "weight_decay": 0.0},
        }
    )


def _train(world_size: int, strategy_name: str, model_name: str, lr: float, options: dict | None = None):
    """EPOCHS training steps; per epoch and hidden layer: the inner rows fed in and the halo rows used."""
    comm = Communicator()
    graph = random_graph(num_nodes=150, num_edges=900, seed=2)
    part = build_parts(graph, partition_nodes(graph.edge_index, graph.num_nodes, world_size, "metis", 1), world_size)[
        comm.rank
    ]
    cfg = _cfg(model_name, lr)
    torch.manual_seed(0)
    model = build_model(cfg, part)
    optimizer = make_optimizer(cfg, model.parameters())
    strategy = STRATEGIES[strategy_name](
        HaloExchange(comm, part.send_idx, part.send_counts, part.halo_counts),
        local_graph_for(model_name, part),
        part.x,
        **(options or {}),
    )
    seen = []
    aggregate = strategy.aggregate_hidden

    def recording(layer, h_inner, before_dropout=None):
        out = aggregate(layer, h_inner, before_dropout)
        used = strategy.halo[layer] if hasattr(strategy, "halo") else None
        seen[-1][layer] = (h_inner.detach().clone(), None if used is None else used.clone())
        return out

    strategy.aggregate_hidden = recording
    grads = []  # per epoch and hidden layer: (halo-row gradients sent, returned gradients used)
    if hasattr(strategy, "exchange_rows"):
        exchange_rows = strategy.exchange_rows

        def recording_rows(kind, layer, rows):
            used = exchange_rows(kind, layer, rows)
            if kind == "bwd":
                grads[-1][layer] = (rows.clone(), used.clone())
            return used

        strategy.exchange_rows = recording_rows
    steps = []
    for epoch in range(1, EPOCHS + 1):
        seen.append({})
        grads.append({})
        strategy.begin_training_epoch(epoch)
        optimizer.zero_grad()
        logits, _ = forward_backward(model, part, strategy, float(graph.train_mask.sum()), comm)
        steps.append({"logits": logits.detach(), "grads": [p.grad.clone() for p in model.parameters()]})
        optimizer.step()
    strategy.close()
    return {
        "inner_ids": part.inner_ids,
        "halo_ids": part.halo_ids,
        "seen": seen,
        "steps": steps,
        "grads": grads,
        "sent_ids": part.inner_ids[part.send_idx],
        "send_counts": [int(c) for c in part.send_counts],
        "num_nodes": graph.num_nodes,
    }


@pytest.mark.parametrize("world_size", [2, 3])
@pytest.mark.parametrize("model_name", ["gcn", "sage"])
def test_each_epoch_uses_the_previous_epochs_halo_rows(world_size, model_name):
    results = run_distributed(world_size, _train, world_size, "stale", model_name, 0.05)
    n = results[0]["num_nodes"]
    first = results[0]["seen"]
    assert not torch.equal(first[1][1][0], first[2][1][0]), "training must change the rows, or the test proves nothing"
    for epoch in range(EPOCHS):
        for layer in range(1, LAYERS):
            whole = torch.zeros(n, HIDDEN)
            for res in results:
                whole[res["inner_ids"]] = res["seen"][epoch][layer][0]
            for res in results:
                if epoch + 1 < EPOCHS:  # what the next epoch uses is exactly this epoch's rows
                    used_next = res["seen"][epoch + 1][layer][1]
                    assert torch.equal(used_next, whole[res["halo_ids"]]), (epoch + 2, layer)
                if epoch == 0:  # warm-up: the current rows, as in sync
                    assert torch.equal(res["seen"][0][layer][1], whole[res["halo_ids"]])


def _returned_from(results, epoch: int, layer: int, rank: int) -> torch.Tensor:
    """What peers computed in ``epoch`` as gradients of ``rank``'s rows they hold as halo, in ``rank``'s send order."""
    res = results[rank]
    parts, offset = [], 0
    for peer, count in enumerate(res["send_counts"]):
        ids = res["sent_ids"][offset : offset + count]
        offset += count
        if count:
            sent, _ = results[peer]["grads"][epoch][layer]
            position = {int(g): i for i, g in enumerate(results[peer]["halo_ids"])}
            parts.append(sent[[position[int(g)] for g in ids]])
    return torch.cat(parts)


@pytest.mark.parametrize("world_size", [2, 3])
def test_each_epoch_uses_the_previous_epochs_halo_gradients(world_size):
    results = run_distributed(world_size, _train, world_size, "stale", "sage", 0.05)
    assert not torch.equal(results[0]["grads"][1][1][0], results[0]["grads"][2][1][0]), "gradients must change"
    for epoch in range(EPOCHS):
        for layer in range(1, LAYERS):
            for rank in range(world_size):
                used = results[rank]["grads"][epoch][layer][1]
                source = epoch if epoch == 0 else epoch - 1  # warm-up: this epoch's gradients, as in sync
                assert torch.equal(used, _returned_from(results, source, layer, rank)), (epoch + 1, layer, rank)


@pytest.mark.parametrize("world_size", [2, 3])
def test_without_staleness_it_equals_sync(world_size):
    """lr = 0 and no dropout: last epoch's rows and gradients are this epoch's, so stale == sync."""
    stale = run_distributed(world_size, _train, world_size, "stale", "gcn", 0.0)
    sync = run_distributed(world_size, _train, world_size, "sync", "gcn", 0.0)
    for s, r in zip(stale, sync):
        for epoch in range(EPOCHS):
            torch.testing.assert_close(s["steps"][epoch]["logits"], r["steps"][epoch]["logits"], rtol=1e-5, atol=1e-6)
            for got, ref in zip(s["steps"][epoch]["grads"], r["steps"][epoch]["grads"]):
                torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-6)


def test_momentum_smooths_the_stale_rows():
    """used(t+1) = γ·used(t) + (1 − γ)·rows(t) from epoch 3 on; epoch 2 uses epoch 1's rows."""
    gamma = 0.75
    results = run_distributed(2, _train, 2, "stale", "gcn", 0.05, {"momentum": gamma})
    n = results[0]["num_nodes"]
    for layer in range(1, LAYERS):
        sent = []
        for epoch in range(EPOCHS):
            whole = torch.zeros(n, HIDDEN)
            for res in results:
                whole[res["inner_ids"]] = res["seen"][epoch][layer][0]
            sent.append(whole)
        for res in results:
            used = [res["seen"][epoch][layer][1] for epoch in range(EPOCHS)]
            halo = res["halo_ids"]
            torch.testing.assert_close(used[1], sent[0][halo], rtol=0, atol=0)
            for t in range(2, EPOCHS):
                torch.testing.assert_close(
                    used[t], gamma * used[t - 1] + (1 - gamma) * sent[t - 1][halo], rtol=1e-6, atol=1e-6
                )
            assert not torch.allclose(used[3], sent[2][halo]), "smoothing must differ from plain staleness"


def _in_flight_at_evaluation(eval_every: int):
    """Messages still in flight when each evaluation starts, and at the end of each epoch without one (real driver)."""
    from gnnq.config.typed import typed_config
    from gnnq.train.driver import run_epochs
    from gnnq.train.full_graph import FullGraphTrainer

    comm = Communicator()
    graph = random_graph(num_nodes=150, num_edges=900, seed=2)
    part = build_parts(
        graph, partition_nodes(graph.edge_index, graph.num_nodes, comm.world_size, "metis", 1), comm.world_size
    )[comm.rank]
    cfg = typed_config({"parallel": {"name": "stale"}})
    cfg.model.hidden, cfg.model.layers = HIDDEN, LAYERS
    cfg.trainer.epochs, cfg.trainer.eval_every = 6, eval_every
    trainer = FullGraphTrainer(cfg, part, comm)
    at_eval, after_step = {}, {}
    step, evaluate = trainer.train_step, trainer.evaluate

    def observed_step(epoch):
        step(epoch)
        after_step[epoch] = len(trainer.strategy.in_flight)

    def observed_evaluate():
        at_eval[len(after_step)] = len(trainer.strategy.in_flight)
        return evaluate()

    trainer.train_step, trainer.evaluate = observed_step, observed_evaluate
    rows = []
    run_epochs(trainer, cfg.trainer, comm, rows.append)
    return at_eval, after_step, rows


def test_evaluation_waits_for_the_epochs_messages_inside_the_epoch():
    """PipeGCN's messages of an evaluated epoch are waited for before evaluation starts, in that epoch's timer;
    between epochs without an evaluation they stay in flight (the overlap across epochs is PipeGCN's point)."""
    at_eval, after_step, rows = run_distributed(2, _in_flight_at_evaluation, 3)[0]
    assert sorted(at_eval) == [3, 6] and set(at_eval.values()) == {0}, at_eval
    # Epoch 1 is the warm-up (nothing stale yet: waited at once); from epoch 2 on every step leaves its messages in
    # flight.
    assert after_step[1] == 0 and all(after_step[e] == 2 * (LAYERS - 1) for e in range(2, 7)), after_step
    assert all(r["comm_time_s"] <= r["epoch_time_s"] for r in rows)


def _wait_order(world_size: int, options: dict):
    """Per training epoch, in order: each hidden layer's aggregation ("agg", layer) and each wait for a
    message posted in an earlier epoch ("wait", direction, layer)."""
    comm = Communicator()
    graph = random_graph(num_nodes=150, num_edges=900, seed=2)
    part = build_parts(graph, partition_nodes(graph.edge_index, graph.num_nodes, world_size, "metis", 1), world_size)[
        comm.rank
    ]
    cfg = _cfg("gcn", 0.05)
    torch.manual_seed(0)
    model = build_model(cfg, part)
    exchange = HaloExchange(comm, part.send_idx, part.send_counts, part.halo_counts)
    strategy = STRATEGIES["stale"](exchange, local_graph_for("gcn", part), part.x, **options)
    log, epoch_now = [], [0]
    start, aggregate = exchange.start, strategy.aggregate_hidden

    class Logged:
        def __init__(self, pending, direction, layer, posted_in):
            self.pending, self.entry, self.posted_in = pending, ("wait", str(direction), layer), posted_in

        def wait(self):
            if self.posted_in < epoch_now[0]:
                log[-1].append(self.entry)
            return self.pending.wait()

    exchange.start = lambda src, layer, direction, traffic, plan=None, **kw: Logged(
        start(src, layer, direction, traffic, plan, **kw), direction, layer, epoch_now[0]
    )

    def logged_aggregate(layer, h_inner, before_dropout=None):
        log[-1].append(("agg", layer))
        return aggregate(layer, h_inner, before_dropout)

    strategy.aggregate_hidden = logged_aggregate
    for epoch in range(1, EPOCHS + 1):
        epoch_now[0] = epoch
        log.append([])
        strategy.begin_training_epoch(epoch)
        forward_backward(model, part, strategy, float(graph.train_mask.sum()), comm)
    strategy.close()
    return log


@pytest.mark.parametrize("warmup", ["sync", "zeros"])
def test_each_layer_waits_just_before_its_stale_buffer_is_used(warmup):
    """PipeGCN's per-layer waits: layer 2's forward message is waited for after layer 1 has aggregated, the
    backward messages during backward (layer 2 first); never all of them when the epoch starts."""
    log = run_distributed(2, _wait_order, 2, {"warmup": warmup})[0]
    first = (
        2 if warmup == "sync" else 1
    )  # epochs with nothing in flight from an earlier one (a sync warm-up waits at once)
    assert all(epoch == [("agg", 1), ("agg", 2)] for epoch in log[:first]), log
    per_layer = [("agg", 1), ("wait", "fwd", 1), ("agg", 2), ("wait", "fwd", 2), ("wait", "bwd", 2), ("wait", "bwd", 1)]
    assert all(epoch == per_layer for epoch in log[first:]), log


def test_warmup_zeros_starts_from_zero_buffers():
    """warmup=zeros (PipeGCN's code): epoch 1 uses zero halo rows and zero returned gradients, epoch 2 epoch 1's."""
    results = run_distributed(2, _train, 2, "stale", "gcn", 0.05, {"warmup": "zeros"})
    for rank, res in enumerate(results):
        for layer in range(1, LAYERS):
            assert not res["seen"][0][layer][1].any() and not res["grads"][0][layer][1].any()
            assert torch.equal(res["grads"][1][layer][1], _returned_from(results, 0, layer, rank))
            whole = torch.zeros(res["num_nodes"], HIDDEN)
            for r in results:
                whole[r["inner_ids"]] = r["seen"][0][layer][0]
            assert res["seen"][1][layer][1].abs().sum() > 0 and torch.equal(
                res["seen"][1][layer][1], whole[res["halo_ids"]]
            )


@pytest.mark.parametrize("smooth", ["features", "gradients"])
def test_smooth_picks_the_buffers_momentum_smooths(smooth):
    """smooth=features: halo rows smoothed, returned gradients plain (last epoch's); smooth=gradients: the reverse.
    With zero buffers the average starts from zero, as in PipeGCN: epoch 2 uses (1 - γ)·(epoch 1's values)."""
    gamma = 0.5
    results = run_distributed(
        2, _train, 2, "stale", "gcn", 0.05, {"momentum": gamma, "warmup": "zeros", "smooth": smooth}
    )
    n = results[0]["num_nodes"]
    for rank, res in enumerate(results):
        for layer in range(1, LAYERS):
            whole = torch.zeros(n, HIDDEN)
            for r in results:
                whole[r["inner_ids"]] = r["seen"][0][layer][0]
            rows_1, grads_1 = whole[res["halo_ids"]], _returned_from(results, 0, layer, rank)
            used_rows, used_grads = res["seen"][1][layer][1], res["grads"][1][layer][1]
            smoothed, plain = (used_rows, used_grads) if smooth == "features" else (used_grads, used_rows)
            smoothed_src, plain_src = (rows_1, grads_1) if smooth == "features" else (grads_1, rows_1)
            assert torch.equal(plain, plain_src)
            torch.testing.assert_close(smoothed, (1 - gamma) * smoothed_src, rtol=1e-6, atol=1e-7)
            assert smoothed_src.abs().sum() > 0


class _AggregateLog:
    """A local graph whose ``aggregate`` keeps a copy of every [inner; halo] it is given."""

    def __init__(self, graph):
        self.graph, self.calls = graph, []

    def aggregate(self, full):
        self.calls.append(full.detach().clone())
        return self.graph.aggregate(full)

    def __getattr__(self, name):
        return getattr(self.graph, name)


def _train_with_dropout(stale_rows: str):
    """2 ranks, dropout 0.5: per epoch, layer 1's rows before and after dropout, the rows sent and the halo rows
    aggregated."""
    comm = Communicator()
    graph = random_graph(num_nodes=150, num_edges=900, seed=2)
    part = build_parts(graph, partition_nodes(graph.edge_index, graph.num_nodes, 2, "metis", 1), 2)[comm.rank]
    cfg = OmegaConf.create(
        {
            "model": {"name": "gcn", "layers": LAYERS, "hidden": HIDDEN, "dropout": 0.5, "norm": "layer"},
            "trainer": {"optimizer": "adam", "lr": 0.01, "weight_decay": 0.0},
        }
    )
    torch.manual_seed(0)
    model = build_model(cfg, part)
    optimizer = make_optimizer(cfg, model.parameters())
    strategy = STRATEGIES["stale"](
        HaloExchange(comm, part.send_idx, part.send_counts, part.halo_counts),
        local_graph_for("gcn", part),
        part.x,
        stale_rows=stale_rows,
    )
    log = _AggregateLog(strategy.graph)
    strategy.graph = log
    epochs, aggregate, exchange_rows = [], strategy.aggregate_hidden, strategy.exchange_rows

    def recording(layer, h_inner, before_dropout=None):
        if layer == 1:
            epochs[-1]["post"] = h_inner.detach()[part.send_idx].clone()
            epochs[-1]["pre"] = before_dropout.rows.detach()[part.send_idx].clone()
            log.calls.clear()
        return aggregate(layer, h_inner, before_dropout)

    def recording_rows(kind, layer, rows):
        if kind == "fwd" and layer == 1:
            epochs[-1]["sent"] = rows[part.send_idx].clone()
        return exchange_rows(kind, layer, rows)

    strategy.aggregate_hidden, strategy.exchange_rows = recording, recording_rows
    for epoch in range(1, 4):
        epochs.append({})
        strategy.begin_training_epoch(epoch)
        optimizer.zero_grad()
        _, loss = forward_backward(model, part, strategy, float(graph.train_mask.sum()), comm)
        epochs[-1]["used"] = log.calls[0][part.num_inner :].clone() if log.calls else None
        epochs[-1]["loss"] = loss.item()
        optimizer.step()
    strategy.close()
    return epochs


def test_pre_dropout_stale_rows_get_a_fresh_mask_at_the_receiver():
    """parallel.stale_rows=pre_dropout (PipeGCN's code): the rows sent are the rows before dropout, and the halo rows
    used in epoch t+1 are the peer's epoch-t rows under a mask drawn at the receiver, not the sender's."""
    results = run_distributed(2, _train_with_dropout, "pre_dropout")
    for rank, epochs in enumerate(results):
        peer = results[1 - rank]
        for t in range(len(epochs)):
            assert torch.equal(epochs[t]["sent"], epochs[t]["pre"]), "the rows before dropout go out"
            assert not torch.equal(epochs[t]["sent"], epochs[t]["post"])
        for t in (1, 2):
            stale, used = peer[t - 1]["sent"], epochs[t]["used"]  # 2 ranks: the peer sends all its rows here
            kept = used != 0
            torch.testing.assert_close(used[kept], 2 * stale[kept])  # dropout 0.5 scales kept entries by 2
            nonzero = stale != 0
            dropped = (~kept & nonzero).sum() / nonzero.sum()
            assert 0.35 < dropped < 0.65, dropped  # about half of the nonzero entries dropped, at the receiver
            assert not torch.equal(kept, peer[t - 1]["post"] != 0), "not the sender's mask"
        assert all(torch.isfinite(torch.tensor(e["loss"])) for e in epochs)


def test_post_dropout_stale_rows_carry_the_senders_mask():
    """gnnq's default: the rows sent are the rows after the sender's dropout; the receiver uses them as they came."""
    results = run_distributed(2, _train_with_dropout, "post_dropout")
    for rank, epochs in enumerate(results):
        for t in range(len(epochs)):
            assert torch.equal(epochs[t]["sent"], epochs[t]["post"])
