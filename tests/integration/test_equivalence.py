"""Distributed full-graph training computes exactly what one process computes on the whole graph.

Here: the cases with real processes (gloo ranks, torchrun or gnnq); the others are in `tests/unit/test_equivalence.py`.
"""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F
from omegaconf import OmegaConf

from gnnq.comm import Communicator, HaloExchange
from gnnq.comm.accounting import HALO_SETUP, HALO_TRAIN
from gnnq.data.part import build_parts
from gnnq.data.partition import partition_nodes
from gnnq.models import local_graph_for
from gnnq.models.factory import build_model
from gnnq.parallel import STRATEGIES, SyncStrategy
from gnnq.train.full_graph import forward_backward
from tests.helpers import random_graph, run_distributed

COMBOS = [(p, m) for p in ("metis", "random") for m in ("gcn", "sage")]
HIDDEN, LAYERS = 16, 3


def _cfg(model: str):
    return OmegaConf.create(
        {"model": {"name": model, "layers": LAYERS, "hidden": HIDDEN, "dropout": 0.0, "norm": "layer"}}
    )


def _dense_reference(graph, model_name: str, model: torch.nn.Module):
    """Full-graph forward with dense matrices, built independently of gnnq's sparse code."""
    n = graph.num_nodes
    src, dst = torch.from_numpy(graph.edge_index)
    adj = torch.zeros(n, n, dtype=torch.float64)
    adj[dst, src] = 1.0  # row = destination
    if model_name == "gcn":
        a_hat = adj + torch.eye(n, dtype=torch.float64)
        d_in, d_out = a_hat.sum(1), a_hat.sum(0)
        op = d_in.rsqrt()[:, None] * a_hat * d_out.rsqrt()[None, :]
    else:
        op = adj / adj.sum(1, keepdim=True).clamp(min=1)
    h = torch.from_numpy(graph.x).double()
    convs, norms = model.convs, model.norms
    for i, conv in enumerate(convs):
        agg = op @ h
        if model_name == "gcn":
            h = agg @ conv.linear.weight.double().T + conv.linear.bias.double()
        else:
            h = agg @ conv.neigh.weight.double().T + conv.neigh.bias.double() + h @ conv.root.weight.double().T
        if i < len(convs) - 1:
            h = torch.relu(F.layer_norm(h, (HIDDEN,), norms[i].weight.double(), norms[i].bias.double()))
    return h


def _one_step(world_size: int, strategy_name: str = "sync", **options):
    """On every rank: one forward/backward for each (partitioner, model); rank results gathered."""
    comm = Communicator()
    graph = random_graph()
    out = {}
    for partitioner, model_name in COMBOS:
        assignment = partition_nodes(graph.edge_index, graph.num_nodes, world_size, partitioner, seed=1)
        part = build_parts(graph, assignment, world_size)[comm.rank]
        torch.manual_seed(0)
        model = build_model(_cfg(model_name), part)
        comm.stats.reset()
        exchange = HaloExchange(comm, part.send_idx, part.send_counts, part.halo_counts)
        strategy = STRATEGIES[strategy_name](exchange, local_graph_for(model_name, part), part.x, **options)
        num_train = float(graph.train_mask.sum())
        logits, _ = forward_backward(model, part, strategy, num_train, comm)
        full = torch.zeros(graph.num_nodes, graph.num_classes)
        full[part.inner_ids] = logits.detach()
        if dist.is_initialized():
            dist.all_reduce(full)
        out[(partitioner, model_name)] = {
            "logits": full,
            "grads": {k: p.grad.clone() for k, p in model.named_parameters()},
            "train_bytes": comm.stats.total_bytes(HALO_TRAIN),
            "setup_bytes": comm.stats.total_bytes(HALO_SETUP),
            "sent_rows": int(part.send_idx.numel()),
            "halo_rows": part.num_halo,
        }
    return out


def _assert_close(got: torch.Tensor, ref: torch.Tensor, what: str) -> None:
    """Equal to 1e-5 relative: per element, against the tensor's scale (fp32 vs a float64 reference)."""
    got, ref = got.detach().double(), ref.detach().double()
    scale = float(ref.abs().max())
    torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5 * scale, msg=lambda m: f"{what}: {m}")


@pytest.mark.parametrize("world_size", [1, 2, 3, 4])
@pytest.mark.parametrize("strategy_name", ["sync", "overlap"])
def test_distributed_step_equals_full_graph(world_size, strategy_name):
    """Sync and overlap both equal the whole-graph float64 reference (so overlap equals sync)."""
    graph = random_graph()
    results = run_distributed(world_size, _one_step, world_size, strategy_name)
    for partitioner, model_name in COMBOS:
        # Reference: the same initial parameters on the whole graph, in float64.
        torch.manual_seed(0)
        whole = build_parts(graph, partition_nodes(graph.edge_index, graph.num_nodes, 1, "random", 0), 1)[0]
        model = build_model(_cfg(model_name), whole)
        logits = _dense_reference(graph, model_name, model)
        mask = torch.from_numpy(graph.train_mask)
        loss = F.cross_entropy(logits[mask], torch.from_numpy(graph.y)[mask])
        grads = torch.autograd.grad(loss, list(model.parameters()))
        names = [k for k, _ in model.named_parameters()]
        for rank, res in enumerate(results):
            got = res[(partitioner, model_name)]
            where = f"{strategy_name}, {world_size} ranks, {partitioner}, {model_name}, rank {rank}"
            _assert_close(got["logits"], logits, f"{where}: logits")
            for name, ref in zip(names, grads):
                _assert_close(got["grads"][name], ref, f"{where}: gradient of {name}")
            # Exact wire accounting per hidden layer: forward sends the rows peers need, backward
            # returns a gradient for every halo row; 4 bytes per fp32 value.
            rows, halo = got["sent_rows"], got["halo_rows"]
            assert got["setup_bytes"] == rows * graph.num_features * 4
            assert got["train_bytes"] == (rows + halo) * HIDDEN * 4 * (LAYERS - 1)
        if world_size > 1:
            assert sum(r[(partitioner, model_name)]["sent_rows"] for r in results) > 0


def _sync_and_overlap(world_size: int, splits: tuple[str, ...]):
    return {
        "sync": _one_step(world_size, "sync"),
        **{split: _one_step(world_size, "overlap", split=split) for split in splits},
    }


@pytest.mark.parametrize(("world_size", "splits"), [(2, ("columns",)), (3, ("columns", "central")), (4, ("central",))])
def test_overlap_equals_sync(world_size, splits):
    """Either overlap split (inner columns first, or central rows first) changes only fp32 rounding: logits and
    gradients within 1e-5 relative."""
    for rank, res in enumerate(run_distributed(world_size, _sync_and_overlap, world_size, splits)):
        for combo in COMBOS:
            sync = res["sync"][combo]
            for split in splits:
                overlap, where = res[split][combo], f"{split}, {world_size} ranks, {combo}, rank {rank}"
                _assert_close(overlap["logits"], sync["logits"], f"{where}: logits")
                for name, ref in sync["grads"].items():
                    _assert_close(overlap["grads"][name], ref, f"{where}: gradient of {name}")
                assert overlap["train_bytes"] == sync["train_bytes"]


def _quantized_step(world_size: int, inputs: str = "once"):
    """One step with 4-bit forward / 8-bit backward messages, twice with the same seed (``inputs``: parallel.inputs)."""
    from omegaconf import OmegaConf as OC

    from gnnq.comm.codec import message_quantization

    comm = Communicator()
    graph = random_graph()
    assignment = partition_nodes(graph.edge_index, graph.num_nodes, world_size, "metis", seed=1)
    part = build_parts(graph, assignment, world_size)[comm.rank]
    qcfg = OC.create(
        {
            "name": "uniform",
            "bits": 4,
            "grad_bits": 8,
            "param_dtype": "fp16",
            "quantize_input": False,
            "nonfinite": "error",
        }
    )
    out = []
    comm.stats.reset()
    exchange = HaloExchange(
        comm, part.send_idx, part.send_counts, part.halo_counts, message_quantization(qcfg, 5, comm.rank)
    )
    strategy = SyncStrategy(exchange, local_graph_for("gcn", part), part.x, inputs=inputs)
    for _ in range(2):  # the second step decodes into the halo buffers the first one left
        torch.manual_seed(0)
        model = build_model(_cfg("gcn"), part)
        before = comm.stats.total_bytes(HALO_TRAIN)
        before_inputs = comm.stats.bytes.get((HALO_TRAIN, 0, "fwd"), 0)
        strategy.begin_training_epoch(3)
        logits, _ = forward_backward(model, part, strategy, float(graph.train_mask.sum()), comm)
        out.append(
            {
                "logits": logits.detach(),
                "grads": [p.grad.clone() for p in model.parameters()],
                "train_bytes": comm.stats.total_bytes(HALO_TRAIN) - before,
                "input_bytes": comm.stats.bytes.get((HALO_TRAIN, 0, "fwd"), 0) - before_inputs,
                "setup_bytes": comm.stats.total_bytes(HALO_SETUP),
                "sent_rows": int(part.send_idx.numel()),
                "halo_rows": part.num_halo,
                "buffers": [
                    strategy.full_rows(layer, torch.empty(part.num_inner, HIDDEN)).data_ptr()
                    for layer in range(1, LAYERS)
                ],
            }
        )
    return out


@pytest.mark.parametrize("inputs", ["once", "every_epoch"])
def test_quantized_exchange_counts_exact_wire_bytes_and_is_reproducible(inputs):
    """Bytes per training step = the analytic count from the send plan: rows sent x wire bytes per row, per message.
    parallel.inputs=once: the layer-0 features once, in fp32 (setup); every_epoch: with every step, quantized like a
    forward message (AdaQP's code), and nothing at setup."""
    from gnnq.comm.kernels.torch_codec import row_bytes

    graph = random_graph()
    for rank_result in run_distributed(3, _quantized_step, 3, inputs):
        first, second = rank_result
        assert torch.equal(first["logits"], second["logits"]), "same seed and epoch, same draws"
        assert all(torch.equal(a, b) for a, b in zip(first["grads"], second["grads"]))
        assert first["buffers"] == second["buffers"] and len(set(first["buffers"])) == LAYERS - 1, (
            "one buffer per layer, reused"
        )
        fwd, bwd = row_bytes(HIDDEN, 4, torch.float16), row_bytes(HIDDEN, 8, torch.float16)
        assert (fwd, bwd) == (HIDDEN * 4 // 8 + 4, HIDDEN + 4)
        expected = (first["sent_rows"] * fwd + first["halo_rows"] * bwd) * (LAYERS - 1)
        if inputs == "once":
            assert first["train_bytes"] == second["train_bytes"] == expected
            assert first["input_bytes"] == 0
            assert first["setup_bytes"] == first["sent_rows"] * graph.num_features * 4, "layer-0 features stay fp32"
        else:
            features = first["sent_rows"] * row_bytes(graph.num_features, 4, torch.float16)
            assert first["input_bytes"] == second["input_bytes"] == features
            assert first["train_bytes"] == second["train_bytes"] == expected + features
            assert first["setup_bytes"] == 0, "nothing fetched at setup"
