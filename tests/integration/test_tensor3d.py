"""parallel=tensor3d (Plexus's 3D tensor parallelism) computes exactly what one process computes on the whole graph,
and puts on the wire exactly the bytes its collectives' analytic count says: real gloo ranks on X x Y x Z grids."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F
from omegaconf import OmegaConf

from gnnq.comm import Communicator
from gnnq.comm.accounting import TENSOR_TRAIN
from gnnq.data.part import build_parts
from gnnq.parallel.tensor3d_grid import Grid, epoch_bytes
from gnnq.train.tensor3d import Tensor3dTrainer, full_weights
from tests.helpers import random_graph, run_distributed

HIDDEN, LAYERS, SEED = 16, 4, 3  # 4 layers: every role of every axis, and the layout wraps around once
# (grid, permutation, inputs, bias): every grid of the issue, each order of the nodes, both input layouts
CASES = {
    1: [((1, 1, 1), "double", "every_epoch", True)],
    2: [
        ((2, 1, 1), "double", "once", True),
        ((1, 2, 1), "single", "every_epoch", False),
        ((1, 1, 2), "none", "every_epoch", True),
    ],
    4: [
        ((2, 2, 1), "double", "every_epoch", True),
        ((2, 1, 2), "double", "once", False),
        ((1, 2, 2), "single", "once", True),
    ],
}
# gnnq's quantized grid (quantizer=uniform, 8 bits): every all-reduce over 2 ranks on some layer
QUANTIZED = {2: ((2, 1, 1), "double", "once", True, "uniform"), 4: ((2, 2, 1), "double", "once", True, "uniform")}


def _cfg(grid, permutation, inputs, bias, quantizer="fp32"):
    return OmegaConf.create(
        {
            "model": {"name": "gcn", "layers": LAYERS, "hidden": HIDDEN, "dropout": 0.0, "norm": "none"},
            "parallel": {
                "name": "tensor3d",
                "grid": list(grid),
                "permutation": permutation,
                "inputs": inputs,
                "bias": bias,
                "weight_init": "glorot",
            },
            "quantizer": {
                "name": quantizer,
                "bits": 8,
                "grad_bits": None,
                "param_dtype": "fp16",
                "quantize_input": False,
                "nonfinite": "error",
            },
            "trainer": {"seed": SEED, "optimizer": "adam", "lr": 0.01, "weight_decay": 0.0},
        }
    )


def _whole_part(graph):
    return build_parts(graph, np.zeros(graph.num_nodes, dtype=np.int64), 1)[0]


def _sum_over_ranks(t: torch.Tensor) -> torch.Tensor:
    if dist.is_initialized():
        dist.all_reduce(t)
    return t


def _one_step(world_size: int):
    """On every rank, per case: one forward and backward; the whole logits and gradients put together."""
    graph = random_graph()
    part = _whole_part(graph)
    out = []
    for case in CASES[world_size] + ([QUANTIZED[world_size]] if world_size in QUANTIZED else []):
        comm = Communicator()
        trainer = Tensor3dTrainer(_cfg(*case), part, comm)
        s, model = trainer.strategy, trainer.model
        comm.stats.reset()
        trainer.strategy.begin_training_epoch(1)
        logits = trainer.forward()
        train = s.masks[0]
        loss = F.cross_entropy(logits[train], s.y[train], reduction="sum") / trainer.num_train
        loss.backward()
        train_bytes = comm.stats.total_bytes(TENSOR_TRAIN)
        by_layer = {f"{k[1]}.{k[2]}": v for k, v in comm.stats.bytes.items() if k[0] == TENSOR_TRAIN}
        # the whole logits (rows back in node order), from the one rank per block of rows that counts them
        rows = s.block("D", LAYERS - 1, s.padded)
        whole = torch.zeros(s.padded, graph.num_classes)
        if s.counts_here:
            whole[rows] = logits.detach()
        whole = _sum_over_ranks(whole)[: s.nodes]
        node_logits = torch.zeros_like(whole)
        node_logits[s.orders[LAYERS][: s.nodes]] = whole
        grads = {}
        for k in range(LAYERS):
            o, i, d = s.grid.sizes(k)
            din, dout = s.widths[k], s.widths[k + 1]
            full = torch.zeros(din, dout)
            shard = model.weights[k].grad
            block = torch.zeros(din // i * (dout // o))
            block[s.block("D", k, block.numel())] = shard
            full[s.block("I", k, din), s.block("O", k, dout)] = block.view(din // i, dout // o)
            grads[f"w{k}"] = _sum_over_ranks(full)[: s.dims[k], : s.dims[k + 1]]
            if model.has_bias:
                b = torch.zeros(dout)
                if s.coords[s.axis("I", k)] == 0 and s.coords[s.axis("D", k)] == 0:
                    b[s.block("O", k, dout)] = model.biases[k].grad
                grads[f"b{k}"] = _sum_over_ranks(b)[: s.dims[k + 1]]
        d_block = s.coords[s.axis("D", LAYERS - 1)]
        out.append(
            {
                "logits": node_logits,
                "grads": grads,
                "train_bytes": train_bytes,
                "by_layer": by_layer,
                "block": (d_block, logits.detach()),
            }
        )
    return out


def _reference(graph, cfg):
    """Whole-graph forward and backward in float64 with dense matrices, from the same initial weights."""
    part = _whole_part(graph)
    weights, biases = full_weights(cfg, part, SEED)
    params = [w.double().requires_grad_() for w in weights] + [
        b.double().requires_grad_() for b in biases if b is not None
    ]
    n = graph.num_nodes
    src, dst = torch.from_numpy(graph.edge_index)
    a_hat = torch.zeros(n, n, dtype=torch.float64)
    a_hat[dst, src] = 1.0
    a_hat += torch.eye(n, dtype=torch.float64)
    op = a_hat.sum(1).rsqrt()[:, None] * a_hat * a_hat.sum(0).rsqrt()[None, :]
    h = torch.from_numpy(graph.x).double()
    for k in range(LAYERS):
        h = op @ h @ params[k]
        if biases[0] is not None:
            h = h + params[LAYERS + k]
        if k < LAYERS - 1:
            h = torch.relu(h)
    mask = torch.from_numpy(graph.train_mask)
    loss = F.cross_entropy(h[mask], torch.from_numpy(graph.y)[mask])
    grads = torch.autograd.grad(loss, params)
    names = [f"w{k}" for k in range(LAYERS)] + ([f"b{k}" for k in range(LAYERS)] if biases[0] is not None else [])
    return h.detach(), dict(zip(names, grads))


def _assert_close(got, ref, what):
    got, ref = got.detach().double(), ref.detach().double()
    scale = float(ref.abs().max())
    torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5 * scale, msg=lambda m: f"{what}: {m}")


def _check(world_size, results):
    graph = random_graph()
    for k, case in enumerate(CASES[world_size]):
        grid, permutation, inputs, bias = case
        logits, grads = _reference(graph, _cfg(*case))
        expected = epoch_bytes(
            Grid(*grid),
            graph.num_nodes,
            [graph.num_features] + [HIDDEN] * (LAYERS - 1) + [graph.num_classes],
            bias=bias,
            inputs_every_epoch=inputs == "every_epoch",
        )
        for rank, res in enumerate(results):
            got, where = res[k], f"grid {grid}, {permutation}, inputs {inputs}, bias {bias}, rank {rank}"
            _assert_close(got["logits"], logits, f"{where}: logits")
            assert set(got["grads"]) == set(grads)
            for name, ref in grads.items():
                _assert_close(got["grads"][name], ref, f"{where}: gradient of {name}")
        measured = sum(res[k]["train_bytes"] for res in results)
        assert measured == sum(expected.values()), f"grid {grid}: measured {measured}, analytic {expected}"
        layers = {key for res in results for key, v in res[k]["by_layer"].items() if v}
        for key in layers:
            assert sum(res[k]["by_layer"].get(key, 0) for res in results) == expected[key], key
        if world_size > 1:
            assert measured > 0


def _check_quantized(world_size, results):
    """The quantized all-reduces: every replica of an output block holds the same logits, bit for bit; the logits
    and gradients stay near the exact ones (8-bit rows); fewer bytes than the exact grid's."""
    graph = random_graph()
    grid, permutation, inputs, bias, _ = case = QUANTIZED[world_size]
    logits, grads = _reference(graph, _cfg(*case))
    k = len(CASES[world_size])
    blocks = {}
    for res in results:
        d_block, block = res[k]["block"]
        assert torch.equal(blocks.setdefault(d_block, block), block), "replicas of an output block differ"
        torch.testing.assert_close(res[k]["logits"].double(), logits, rtol=0.0, atol=0.05 * float(logits.abs().max()))
        for name, ref in grads.items():
            scale = float(ref.abs().max())
            torch.testing.assert_close(res[k]["grads"][name].double(), ref, rtol=0.0, atol=0.1 * scale)
    exact = epoch_bytes(
        Grid(*grid),
        graph.num_nodes,
        [graph.num_features] + [HIDDEN] * (LAYERS - 1) + [graph.num_classes],
        bias=bias,
        inputs_every_epoch=False,
    )
    assert 0 < sum(res[k]["train_bytes"] for res in results) < 0.6 * sum(exact.values())


def test_one_process_grid_equals_whole_graph():
    _check(1, [_one_step(1)])


@pytest.mark.parametrize("world_size", [2, 4])
def test_grids_equal_whole_graph_and_count_analytic_bytes(world_size):
    """Grids 2x1x1, 1x2x1, 1x1x2 (2 ranks), 2x2x1, 2x1x2, 1x2x2 (4 ranks): logits and every weight and bias gradient
    within 1e-5 of the float64 whole-graph computation; training bytes = ``epoch_bytes`` exactly, layer by layer."""
    results = run_distributed(world_size, _one_step, world_size)
    _check(world_size, results)
    _check_quantized(world_size, results)
