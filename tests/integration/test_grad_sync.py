"""Gradient sync modes (gnnq.comm.grad_sync) on a real 2-rank gloo group: the bytes each counts equal the count
worked out by hand from the shapes, every rank ends with the same gradients, and each mode's sum is what it
promises (exact, half precision, low rank, quantized)."""

from __future__ import annotations

import torch
import torch.distributed as dist

from gnnq.comm import Communicator
from gnnq.comm.accounting import GRAD_SYNC
from gnnq.comm.grad_sync import CodecSync, GradientSync, HalfPrecisionSync, PowerSGDSync
from tests.helpers import run_distributed

SHAPES = [(64, 40), (64,), (3, 64), (3,)]  # a 2-layer model's weights and biases: 2,819 values
NUMEL = 2819
# By hand: PowerSGD rank 4 compresses (64, 40) (2,560 > 2 * (64 + 40) * 4) but not (3, 64) (192 <= 2 * 67 * 3).
EXPECTED_BYTES = {
    "allreduce": 4 * NUMEL,
    "fp16": 2 * NUMEL,
    "bf16": 2 * NUMEL,
    "powersgd": 4 * ((64 + 40) * 4 + 64 + 3 * 64 + 3),
    "codec8": 11 * (4 + 256) + 1 * (4 + 256),  # ceil(2819 / 256) = 12 rows of 256 values, 4 bytes of row parameters
    "codec4": 12 * (4 + 128),
}


def _grads(rank: int, step: int) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(100 * rank + step)
    grads = [torch.randn(s, generator=gen) * 1e-2 for s in SHAPES]
    low = torch.randn(64, 2, generator=gen) @ torch.randn(2, 40, generator=gen)  # the sum stays of rank <= 4
    grads[0] = low * 1e-2
    return grads


def _syncs(comm: Communicator) -> dict:
    return {
        "allreduce": GradientSync(comm),
        "fp16": HalfPrecisionSync(comm, "fp16"),
        "bf16": HalfPrecisionSync(comm, "bf16"),
        "powersgd": PowerSGDSync(comm, rank=4, seed=3),
        "codec8": CodecSync(comm, bits=8, seed=3),
        "codec4": CodecSync(comm, bits=4, seed=3),
    }


def _before_grad_sync(grads: list[torch.Tensor]) -> list[torch.Tensor]:
    """What gnnq did before trainer.grad_sync (gnnq.train.grad_sync.all_reduce_gradients): one fp32 all-reduce of
    the concatenated gradients."""
    flat = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(flat)
    return [c.view_as(g) for c, g in zip(torch.split(flat, [g.numel() for g in grads]), grads)]


def _run_modes():
    comm = Communicator()
    out = {"before": [_before_grad_sync(_grads(comm.rank, step)) for step in (1, 2)]}
    for name, sync in _syncs(comm).items():
        rows = []
        for step in (1, 2):
            params = [torch.nn.Parameter(torch.zeros(s)) for s in SHAPES]
            for p, g in zip(params, _grads(comm.rank, step)):
                p.grad = g.clone()
            comm.stats.reset()
            sync.sync(params, step)
            rows.append(
                {
                    "counted": comm.stats.total_bytes(GRAD_SYNC),
                    "analytic": sync.analytic_bytes(params, step),
                    "grads": [p.grad.clone() for p in params],
                    "error": {i: e.clone() for i, e in getattr(sync, "error", {}).items()},
                }
            )
        out[name] = rows
    return out


def _ref_sum(step: int) -> list[torch.Tensor]:
    return [a + b for a, b in zip(_grads(0, step), _grads(1, step))]


def test_every_mode_counts_the_analytic_bytes_and_agrees_across_ranks():
    ranks = run_distributed(2, _run_modes)
    for name, expected in EXPECTED_BYTES.items():
        for r in (0, 1):
            for row in ranks[r][name]:
                assert row["counted"] == row["analytic"] == expected, (name, r, row["counted"], row["analytic"])
        for a, b in zip(ranks[0][name], ranks[1][name]):
            assert all(torch.equal(x, y) for x, y in zip(a["grads"], b["grads"])), f"{name}: ranks differ"

    res = ranks[0]
    for step, row, before in zip((1, 2), res["allreduce"], res["before"]):  # exact: bit for bit as before
        assert all(torch.equal(g, ref) for g, ref in zip(row["grads"], _ref_sum(step)))
        assert all(torch.equal(g, ref) for g, ref in zip(row["grads"], before))
    # codec: each rank's value is off by less than one step of its row, (max - min) / (2^b - 1) <= 2 max / (2^b - 1)
    for name, tol in (("fp16", 1e-3), ("bf16", 8e-3), ("codec8", 4 / 255), ("codec4", 4 / 15)):
        for step, row in zip((1, 2), res[name]):
            for g, ref in zip(row["grads"], _ref_sum(step)):
                assert not torch.equal(g, ref), f"{name} sent the exact gradient"
                assert (g - ref).abs().max() <= tol * ref.abs().max(), name
    # PowerSGD: the (64, 40) sum has rank <= 4, so rank 4 recovers it; the rest goes exact.
    first = res["powersgd"][0]
    ref = _ref_sum(1)
    assert torch.allclose(first["grads"][0], ref[0], atol=1e-6)
    assert all(torch.equal(g, r) for g, r in zip(first["grads"][1:], ref[1:]))
    # Error feedback: the ranks' errors add up to the error of the sum.
    total_error = ranks[0]["powersgd"][0]["error"][0] + ranks[1]["powersgd"][0]["error"][0]
    assert torch.allclose(total_error, ref[0] - first["grads"][0], atol=1e-6)


def _powersgd_low_rank():
    """Rank 1 on full-rank gradients, with and without error feedback: the average of what was sent over 100 steps."""
    comm = Communicator()
    gen = torch.Generator().manual_seed(comm.rank)
    g = torch.randn(32, 32, generator=gen)
    averages = {}
    for feedback in (True, False):
        sync = PowerSGDSync(comm, rank=1, seed=0, error_feedback=feedback)
        sent = torch.zeros(32, 32)
        for step in range(1, 101):
            p = torch.nn.Parameter(torch.zeros(32, 32))
            p.grad = g.clone()
            sync.sync([p], step)
            sent += p.grad
        averages[feedback] = sent / 100
    return averages, g


def test_powersgd_error_feedback_sends_the_gradient_on_average():
    (averages, g0), (_, g1) = run_distributed(2, _powersgd_low_rank)
    target = g0 + g1
    err = {fb: float((avg - target).norm() / target.norm()) for fb, avg in averages.items()}
    assert err[False] > 0.5, f"rank 1 alone misses most of a full-rank sum: {err}"
    assert err[True] < 0.2, f"error feedback carries what was missed into later steps: {err}"
