"""The quantization codec: unbiased, bounded variance, exact packing, and Triton equal to torch."""

from __future__ import annotations

import pytest
import torch

from gnnq.comm.codec import GivenNoise, MessageQuantization, NonFiniteMessageError, UniformCodec
from gnnq.comm.direction import Direction
from gnnq.comm.encoder import UniformEncoder
from gnnq.comm.kernels import torch_codec, triton_codec
from gnnq.comm.kernels.backends import TORCH

BITS = (1, 2, 4, 8)
PARAMS = (torch.float16, torch.float32)
DIMS = (1, 3, 7, 255, 602, 1500)


def _draws(x: torch.Tensor, bits: int, pd: torch.dtype, n: int, seed: int = 0) -> torch.Tensor:
    """``n`` independent decode(encode(x)) draws, shape (n, R, D)."""
    gen = torch.Generator().manual_seed(seed)
    rep = x.repeat(n, 1)
    noise = torch.rand(rep.shape, generator=gen)
    out = torch_codec.unpack_dequantize(torch_codec.quantize_pack(rep, noise, bits, pd), x.shape[1], bits, pd)
    return out.view(n, *x.shape)


@pytest.mark.parametrize("pd", PARAMS)
@pytest.mark.parametrize("bits", BITS)
def test_unbiased(bits, pd):
    x = torch.randn(6, 48, generator=torch.Generator().manual_seed(1)) * 2
    n = 4000
    mean = _draws(x, bits, pd, n).mean(0)
    _, step = torch_codec.row_params(x, bits, pd)
    # Each draw has variance <= step^2/4; the mean of n draws lies within 5 standard errors.
    tol = 5 * step.float()[:, None] / 2 / n**0.5
    assert ((mean - x).abs() <= tol).all(), float(((mean - x).abs() / tol).max())


@pytest.mark.parametrize("pd", PARAMS)
@pytest.mark.parametrize("bits", BITS)
def test_error_variance_within_bound(bits, pd):
    x = torch.randn(6, 100, generator=torch.Generator().manual_seed(2)) * 3
    err = _draws(x, bits, pd, 2000, seed=3) - x
    per_row = err.pow(2).sum(2).mean(0)  # E ||decode - x||^2 per row
    _, step = torch_codec.row_params(x, bits, pd)
    bound = x.shape[1] * step.float() ** 2 / 4
    assert (per_row <= bound * 1.05).all(), (per_row / bound).max()
    assert (per_row > 0).all()


@pytest.mark.parametrize("pd", PARAMS)
@pytest.mark.parametrize("bits", BITS)
@pytest.mark.parametrize("dim", DIMS)
@pytest.mark.parametrize("rows", (0, 1, 37))
def test_round_trip_and_row_size(bits, pd, dim, rows):
    gen = torch.Generator().manual_seed(dim * 10 + rows)
    x = torch.randn(rows, dim, generator=gen) * 4
    wire = torch_codec.quantize_pack(x, torch.rand(rows, dim, generator=gen), bits, pd)
    pbytes = 4 if pd == torch.float16 else 8
    assert wire.dtype == torch.uint8 and wire.shape == (rows, -(-dim * bits // 8) + pbytes)
    out = torch_codec.unpack_dequantize(wire, dim, bits, pd)
    assert out.shape == (rows, dim)
    if rows:
        zero, step = torch_codec.row_params(x, bits, pd)
        assert ((out - x).abs() <= step.float()[:, None] * (1 + 1e-5)).all()
        levels = (1 << bits) - 1
        assert (out >= zero.float()[:, None]).all() and (out <= (zero.float() + levels * step.float())[:, None] + 1e-4).all()


def test_packing_layout():
    x = torch.tensor([[0.0, 1.0, 2.0, 3.0, 3.0]])
    wire = torch_codec.quantize_pack(x, torch.zeros_like(x), 2, torch.float32)
    zero, step = wire[0, :8].view(torch.float32)
    assert (zero.item(), step.item()) == (0.0, 1.0)
    # codes 0,1,2,3 packed LSB first into one byte, then code 3 padded with zeros in the next.
    assert wire[0, 8:].tolist() == [0 | 1 << 2 | 2 << 4 | 3 << 6, 3]


@pytest.mark.parametrize("bits", BITS)
def test_row_maximum_never_wraps_or_spills(bits):
    x = torch.randn(3, 9)
    almost_one = torch.full_like(x, 1.0 - 2**-24)
    both = torch_codec.quantize_pack(x, almost_one, bits, torch.float16)
    apart = torch.cat([torch_codec.quantize_pack(x[i : i + 1], almost_one[i : i + 1], bits, torch.float16) for i in range(3)])
    assert torch.equal(both, apart), "rows are independent: nothing spills into a neighbour"
    out = torch_codec.unpack_dequantize(both, 9, bits, torch.float16)
    zero, step = (p.float() for p in torch_codec.row_params(x, bits, torch.float16))
    top = zero + ((1 << bits) - 1) * step
    at_max = out.gather(1, x.argmax(1, keepdim=True)).squeeze(1)
    assert torch.equal(at_max, top), "each row's maximum decodes to the top level, never wrapping to the bottom"


@pytest.mark.parametrize("pd", PARAMS)
def test_degenerate_rows_decode_exactly(pd):
    x = torch.stack([torch.zeros(10), torch.full((10,), 1.5), torch.full((10,), -3.25)])
    for bits in BITS:
        out = torch_codec.unpack_dequantize(torch_codec.quantize_pack(x, torch.rand_like(x), bits, pd), 10, bits, pd)
        assert torch.equal(out, x), bits


def test_constant_rows_exact_with_fp32_params():
    x = torch.full((2, 5), 0.1)
    out = torch_codec.unpack_dequantize(torch_codec.quantize_pack(x, torch.rand_like(x), 4, torch.float32), 5, 4, torch.float32)
    assert torch.equal(out, x)


def test_nonfinite_message_named_or_zeroed():
    x = torch.randn(4, 6)
    x[2, 3] = float("nan")
    x[1, 0] = float("inf")
    noise = GivenNoise(torch.rand(4, 6))
    with pytest.raises(NonFiniteMessageError, match="layer 2 backward"):
        UniformEncoder(UniformCodec(4, torch.float16), TORCH).encode(x, torch.arange(4), [4], noise, "layer 2 backward")
    zeroing = UniformEncoder(UniformCodec(4, torch.float16, nonfinite="zero"), TORCH)
    message = zeroing.encode(x, torch.arange(4), [4], noise, "layer 2 backward")
    assert message.nonfinite_zeroed == 2 and torch.isfinite(zeroing.decode(message.wire, 6)).all()


def test_draws_are_seeded_per_message():
    q = MessageQuantization(None, None, None, seed=7, rank=1)

    def draws(epoch, layer, direction):
        return q.noise_key(epoch, layer, direction).draws([3, 0, 2], 5, torch.device("cpu"))

    a = draws(0, 1, Direction.FORWARD)
    assert a.shape == (5, 5) and torch.equal(a, draws(0, 1, Direction.FORWARD))
    assert not torch.equal(a, draws(0, 2, Direction.FORWARD))
    assert not torch.equal(a, draws(0, 1, Direction.BACKWARD))
    assert not torch.equal(a, draws(1, 1, Direction.FORWARD))
    assert not torch.equal(a[:3], a[3:5].new_zeros(0)) and not torch.equal(a[:2], a[3:5])  # peers draw apart


@pytest.mark.needs_extra("gpu")  # triton; skips without it (tests/conftest.py)
@pytest.mark.parametrize("pd", PARAMS)
@pytest.mark.parametrize("bits", BITS)
def test_triton_kernels_equal_torch_bit_for_bit(bits, pd):
    gen = torch.Generator().manual_seed(bits)
    for dim in DIMS:
        src = torch.randn(30, dim, generator=gen) * 3
        src[4] = 0.0
        src[5] = 1.25
        for idx in (torch.tensor([], dtype=torch.int64), torch.tensor([7]), torch.tensor([4, 5, 0, 29, 5, 11, 3])):
            noise = torch.rand(idx.numel(), dim, generator=gen)
            want = torch_codec.quantize_pack(src.index_select(0, idx), noise, bits, pd)
            got = triton_codec.quantize_pack(src, idx, noise, bits, pd, block=64)
            assert torch.equal(got, want), (dim, idx.tolist())
            assert torch.equal(triton_codec.unpack_dequantize(got, dim, bits, pd, block=64),
                               torch_codec.unpack_dequantize(want, dim, bits, pd))  # fmt: skip
