"""Adaptive bit-widths on real gloo groups: layouts agree across ranks, bytes match widths, λ extremes, caching.

Here: the cases with real processes (gloo ranks, torchrun or gnnq); the others are in `tests/unit/test_adaptive.py`.
"""

from __future__ import annotations

import pytest
import torch
from omegaconf import OmegaConf

from gnnq.adaptive.assigner import AdaptiveAssigner
from gnnq.comm import Communicator, HaloExchange
from gnnq.comm.accounting import HALO_TRAIN
from gnnq.comm.codec import message_quantization
from gnnq.comm.kernels.torch_codec import row_bytes
from gnnq.config.schema import AdaptiveQuantizerConfig
from gnnq.data.part import build_parts
from gnnq.data.partition import partition_nodes
from gnnq.models import local_graph_for
from gnnq.models.factory import build_model
from gnnq.parallel import SyncStrategy
from gnnq.train.full_graph import forward_backward
from tests.helpers import random_graph, run_distributed

HIDDEN, LAYERS, WIDTHS = 16, 3, (2, 4, 8)


def _cfg(model: str, lam: float, solver: str, **quantizer):
    return OmegaConf.create(
        {
            "model": {"name": model, "layers": LAYERS, "hidden": HIDDEN, "dropout": 0.0, "norm": "layer"},
            "quantizer": OmegaConf.merge(
                OmegaConf.structured(AdaptiveQuantizerConfig),
                {  # every schema default, then these
                    "name": "adaptive",
                    "bits": 8,
                    "bit_choices": list(WIDTHS),
                    "group_size": 7,
                    "variance_weight": lam,
                    "assign_cycle": 1,
                    "solver": solver,
                    "profile_repeats": 1,
                    **quantizer,
                },
            ),
        }
    )


def _assign_and_step(world_size: int, model_name: str, lam: float, solver: str):
    """Trace one training step, reassign, then take a step with the new layouts; report what each rank holds."""
    comm = Communicator()
    graph = random_graph(num_nodes=240, num_edges=2400, seed=3)
    part = build_parts(graph, partition_nodes(graph.edge_index, graph.num_nodes, world_size, "metis", 1), world_size)[
        comm.rank
    ]
    cfg = _cfg(model_name, lam, solver)
    torch.manual_seed(0)
    model = build_model(cfg, part)
    op = local_graph_for(model_name, part)
    exchange = HaloExchange(
        comm, part.send_idx, part.send_counts, part.halo_counts, message_quantization(cfg.quantizer, 0, comm.rank)
    )
    strategy = SyncStrategy(exchange, op, part.x)
    assigner = AdaptiveAssigner(cfg.quantizer, comm, exchange, op, model_name, HIDDEN, LAYERS)
    num_train = float(graph.train_mask.sum())
    assert assigner.before_epoch(1) is None and assigner.traces(1) and exchange.widths is assigner
    strategy.begin_evaluation()
    with torch.no_grad():
        model(part.x, strategy)
    traced_in_eval = len(assigner.range_squares)
    strategy.begin_training_epoch(1)
    forward_backward(model, part, strategy, num_train, comm)
    silent = {  # rows of zero variance weight (constant, or of no influence): sent at the fewest bytes
        key: (assigner.influence[key[1]] * assigner.range_squares[key]) == 0 for key in assigner.keys
    }
    entry = assigner.before_epoch(2)
    comm.stats.reset()
    strategy.begin_training_epoch(2)
    forward_backward(model, part, strategy, num_train, comm)
    return {
        "traced_in_eval": traced_in_eval,
        "entry": entry,
        "layouts": {k: (v.send_bits, v.recv_bits) for k, v in assigner.layouts.items()},
        "silent": silent,
        "send_counts": exchange.send_counts,
        "recv_counts": exchange.recv_counts,
        "bytes": {k[1:]: v for k, v in comm.stats.bytes.items() if k[0] == HALO_TRAIN},
        "time_model": assigner.describe()["time_model"],
        "rank": comm.rank,
    }


def _trace_two_epochs(trace: str):
    """Two training epochs of one cycle (assign_cycle=2): the squared ranges held after each."""
    comm = Communicator()
    graph = random_graph(num_nodes=240, num_edges=2400, seed=3)
    part = build_parts(graph, partition_nodes(graph.edge_index, graph.num_nodes, 2, "metis", 1), 2)[comm.rank]
    cfg = _cfg("gcn", 0.5, "greedy", assign_cycle=2, trace=trace, time_model="fixed")
    torch.manual_seed(0)
    model = build_model(cfg, part)
    op = local_graph_for("gcn", part)
    exchange = HaloExchange(
        comm, part.send_idx, part.send_counts, part.halo_counts, message_quantization(cfg.quantizer, 0, comm.rank)
    )
    strategy = SyncStrategy(exchange, op, part.x)
    assigner = AdaptiveAssigner(cfg.quantizer, comm, exchange, op, "gcn", HIDDEN, LAYERS)
    held = []
    for epoch in (1, 2):
        assert assigner.before_epoch(epoch) is None
        strategy.begin_training_epoch(epoch)
        forward_backward(model, part, strategy, float(graph.train_mask.sum()), comm)
        held.append({k: v.clone() for k, v in assigner.range_squares.items()})
    return held


def test_trace_cycle_sums_every_epoch_last_epoch_only_the_last():
    cycle = run_distributed(2, _trace_two_epochs, "cycle")
    last = run_distributed(2, _trace_two_epochs, "last_epoch")
    keys = {(layer, d) for layer in range(1, LAYERS) for d in ("fwd", "bwd")}
    for c, lst in zip(cycle, last):
        assert lst[0] == {} and set(lst[1]) == keys, "last_epoch traces the cycle's last epoch only"
        assert set(c[0]) == keys and set(c[1]) == keys, "cycle traces every training epoch"
        for key in keys:
            # Same seeds, same run: the cycle's sum is epoch 1's squares plus exactly what last_epoch saw in epoch 2.
            torch.testing.assert_close(c[1][key], c[0][key] + lst[1][key])
            assert (c[0][key] > 0).any() and (c[1][key] >= c[0][key]).all()


def _segment(bits: torch.Tensor, counts: list[int], peer: int) -> torch.Tensor:
    start = sum(counts[:peer])
    return bits[start : start + counts[peer]]


@pytest.mark.parametrize("world_size", [2, 3])
@pytest.mark.parametrize("solver", ["greedy", "milp"])
def test_layouts_agree_and_bytes_match_widths(world_size, solver):
    results = run_distributed(world_size, _assign_and_step, world_size, "gcn", 0.5, solver)
    keys = {(layer, d) for layer in range(1, LAYERS) for d in ("fwd", "bwd")}
    for res in results:
        assert res["traced_in_eval"] == 0, "evaluation messages must not be traced"
        assert set(res["layouts"]) == keys
        assert res["time_model"] == results[0]["time_model"], "every rank uses the same time model"
        assert res["entry"]["bits_histogram"] == results[0]["entry"]["bits_histogram"]
    for key in keys:
        direction = key[1]
        for r in results:
            send_bits, _ = r["layouts"][key]
            assert set(send_bits.unique().tolist()) <= set(WIDTHS)
            send_counts = r["send_counts"] if direction == "fwd" else r["recv_counts"]
            for q in results:
                if q["rank"] == r["rank"]:
                    continue
                recv_counts = q["recv_counts"] if direction == "fwd" else q["send_counts"]
                sent = _segment(send_bits, send_counts, q["rank"])
                got = _segment(q["layouts"][key][1], recv_counts, r["rank"])
                assert torch.equal(sent, got), f"{key}: rank {r['rank']} -> {q['rank']} layouts differ"
            expected = sum(int(row_bytes(HIDDEN, int(b), torch.float16)) for b in send_bits.tolist())
            assert r["bytes"][key] == expected, f"{key} rank {r['rank']}: wire bytes follow the widths"
    hist = results[0]["entry"]["bits_histogram"]
    total_rows = sum(int(r["layouts"][k][0].numel()) for r in results for k in keys)
    assert sum(hist.values()) == total_rows


@pytest.mark.parametrize("lam, width", [(1.0, 8), (0.0, 2)])
@pytest.mark.parametrize("model_name", ["gcn", "sage"])
def test_variance_weight_extremes(lam, width, model_name):
    """lam = 1: every row that carries variance at the highest width; lam = 0: everything at the lowest.

    Rows of zero weight cost nothing at any width, so at lam = 1 the solver sends them at the
    lowest width when their whole group is silent."""
    for res in run_distributed(3, _assign_and_step, 3, model_name, lam, "greedy"):
        for key, (send_bits, _) in res["layouts"].items():
            loud = ~res["silent"][key]
            assert set(send_bits[loud].tolist()) <= {width}, (lam, key)
            assert set(send_bits[~loud].tolist()) <= {width, WIDTHS[0]}, (lam, key)


def _failing_solve(world_size: int) -> str:
    comm = Communicator()
    graph = random_graph(num_nodes=120, num_edges=900, seed=4)
    part = build_parts(graph, partition_nodes(graph.edge_index, graph.num_nodes, world_size, "metis", 1), world_size)[
        comm.rank
    ]
    cfg = _cfg("gcn", 0.5, "greedy")
    op = local_graph_for("gcn", part)
    exchange = HaloExchange(
        comm, part.send_idx, part.send_counts, part.halo_counts, message_quantization(cfg.quantizer, 0, comm.rank)
    )
    assigner = AdaptiveAssigner(cfg.quantizer, comm, exchange, op, "gcn", HIDDEN, LAYERS)
    assigner.cfg = OmegaConf.merge(cfg.quantizer, {"solver": "no-such-solver"})  # only rank 0 will trip over it
    try:
        assigner.reassign(2)
    except RuntimeError as exc:
        return str(exc)
    return "no error"


def test_a_failed_solve_on_rank_0_fails_every_rank_instead_of_hanging():
    for message in run_distributed(2, _failing_solve, 2):
        assert "assignment failed on rank 0" in message and "no-such-solver" in message
