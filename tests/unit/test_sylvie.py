"""Sylvie's rules (gnnq.parallel.sylvie), each against the authors' code (helper/utils.py boundary_imp_group,
train.py's epoch-adaptive part), and the 1-bit code's property its paper claims."""

from __future__ import annotations

import pytest
import torch

from gnnq.comm.kernels import torch_codec
from gnnq.parallel.sylvie import Adaptor, importance, row_widths, segment_widths

DEGREES = torch.arange(1, 9, dtype=torch.float32)  # importance k/8


def test_importance_is_the_fraction_with_degree_at_most_the_rows():
    assert importance(torch.tensor([1.0, 1.0, 2.0, 3.0])).tolist() == [0.5, 0.5, 0.75, 1.0]


@pytest.mark.parametrize(
    "base, widths",
    [
        (1, [1, 2, 2, 4, 4, 8, 8, 8]),  # [0, .25) 1, [.25, .5) 2, [.5, .75) 4, [.75, 1] 8
        (2, [2, 2, 4, 4, 4, 8, 8, 8]),  # [0, .33) 2, [.33, .67) 4, [.67, 1] 8
        (4, [4, 4, 4, 8, 8, 8, 8, 8]),  # [0, .5) 4, [.5, 1] 8
        (8, [8] * 8),
    ],
)
def test_widths_by_importance(base, widths):
    assert row_widths(DEGREES, base).tolist() == widths


def test_each_peer_ranks_its_own_rows():
    got = segment_widths(torch.cat([DEGREES, DEGREES * 100]), [8, 8], 1)
    assert got.tolist() == row_widths(DEGREES, 1).tolist() * 2


def _run(losses):
    a = Adaptor(base=1, pipeline=True)
    history = []
    for epoch, loss in enumerate(losses):
        a.observe(epoch, loss)
        history.append((a.base, a.pipeline))
    return history


def test_slowing_progress_doubles_the_width_and_stops_the_pipeline():
    # a geometric decay: the smoothed loss's steps keep shrinking, so every window is non-increasing
    history = _run([0.5**e for e in range(14)])
    assert all(h == (1, True) for h in history[:9]), "nothing changes before epoch 9"
    assert [b for b, _ in history[9:]] == [2, 4, 8, 8, 8]  # doubled each epoch, up to 8
    assert history[9][1] is False


def test_quickening_progress_halves_the_width_and_starts_the_pipeline():
    a = Adaptor(base=8, pipeline=False)
    for epoch, loss in enumerate([-(1.5**e) for e in range(11)]):  # growing steps: every window non-decreasing
        a.observe(epoch, loss)
    assert (a.base, a.pipeline) == (2, True)  # 8 -> 4 at epoch 9 -> 2 at epoch 10


def test_a_mixed_window_changes_nothing():
    losses = [1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.45, 0.44, 0.30, 0.29, 0.10, 0.09]
    assert _run(losses)[-1] == (1, True)


def test_one_bit_code_is_unbiased_with_bernoulli_variance():
    """Sylvie's claim for its 1-bit quantizer: every value decodes to one of its row's two ends, unbiased, with
    variance (x - lo)(hi - x); gnnq's uniform codec at 1 bit with fp16 parameters (as Sylvie sends them)."""
    x = torch.randn(4, 64, generator=torch.Generator().manual_seed(5))
    n = 6000
    rep = x.repeat(n, 1)
    noise = torch.rand(rep.shape, generator=torch.Generator().manual_seed(6))
    wire = torch_codec.quantize_pack(rep, noise, 1, torch.float16)
    out = torch_codec.unpack_dequantize(wire, x.shape[1], 1, torch.float16).view(n, *x.shape)
    zero, step = torch_codec.param_values(*torch_codec.row_params(x, 1, torch.float16))
    lo, hi = zero.float()[:, None], (zero.float() + step.float())[:, None]
    assert ((out == lo) | (out == hi)).all()
    p = (x - lo) / (hi - lo)
    se = (p * (1 - p)).sqrt() * (hi - lo) / n**0.5
    assert ((out.mean(0) - x).abs() <= 5 * se + 1e-6).all()
    var = (x - lo) * (hi - x)  # the estimate's standard error is below (hi - lo)^2 / (2 sqrt(n)): 5 of them
    assert ((out.var(0) - var).abs() <= 5 * (hi - lo) ** 2 / (2 * n**0.5)).all()
