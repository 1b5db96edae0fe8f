"""The quantization codec: unbiased (also on its own Philox draws), bounded variance, exact packing, finite
decodes of finite rows (fp16 parameter overflow), and Triton equal to torch."""

from __future__ import annotations

import pytest
import torch

from gnnq.comm.codec import MessageQuantization, NoiseKey, NonFiniteMessageError, UniformCodec
from gnnq.comm.direction import Direction
from gnnq.comm.encoder import MixedWidthEncoder, UniformEncoder
from gnnq.comm.kernels import philox, torch_codec, triton_codec
from gnnq.comm.kernels.backends import BACKENDS, TORCH
from gnnq.comm.kernels.philox import RowStreams
from gnnq.comm.wire_layout import WireLayout

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
    _, step = torch_codec.param_values(*torch_codec.row_params(x, bits, pd))
    # Each draw has variance <= step^2/4; the mean of n draws lies within 5 standard errors.
    tol = 5 * step.float()[:, None] / 2 / n**0.5
    assert ((mean - x).abs() <= tol).all(), float(((mean - x).abs() / tol).max())


@pytest.mark.parametrize("pd", PARAMS)
@pytest.mark.parametrize("bits", BITS)
def test_error_variance_within_bound(bits, pd):
    x = torch.randn(6, 100, generator=torch.Generator().manual_seed(2)) * 3
    err = _draws(x, bits, pd, 2000, seed=3) - x
    per_row = err.pow(2).sum(2).mean(0)  # E ||decode - x||^2 per row
    _, step = torch_codec.param_values(*torch_codec.row_params(x, bits, pd))
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
    assert torch.equal(torch_codec.unpack_dequantize(wire, dim, bits, pd, out=torch.empty_like(out)), out), "into place"
    if rows:
        zero, step = torch_codec.param_values(*torch_codec.row_params(x, bits, pd))
        assert ((out - x).abs() <= step.float()[:, None] * (1 + 1e-5)).all()
        levels = (1 << bits) - 1
        assert (out >= zero.float()[:, None]).all() and (
            out <= (zero.float() + levels * step.float())[:, None] + 1e-4
        ).all()


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
    apart = torch.cat(
        [torch_codec.quantize_pack(x[i : i + 1], almost_one[i : i + 1], bits, torch.float16) for i in range(3)]
    )
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
    out = torch_codec.unpack_dequantize(
        torch_codec.quantize_pack(x, torch.rand_like(x), 4, torch.float32), 5, 4, torch.float32
    )
    assert torch.equal(out, x)


@pytest.mark.parametrize("backend", ["torch", "c"])
def test_nonfinite_message_named_or_zeroed_over_sent_rows_only(backend):
    x = torch.randn(5, 6)
    x[2, 3] = float("nan")
    x[1, 0] = float("inf")
    x[4, :] = float("nan")  # never sent: neither an error nor counted
    rows, key = torch.tensor([0, 1, 2, 2, 3]), NoiseKey(1, 0, 2, "bwd", 0)
    with pytest.raises(NonFiniteMessageError, match="layer 2 backward"):
        UniformEncoder(UniformCodec(4, torch.float16), BACKENDS[backend]).encode(
            x, rows, [2, 3], key, "layer 2 backward"
        )
    zeroing = UniformEncoder(UniformCodec(4, torch.float16, nonfinite="zero"), BACKENDS[backend])
    message = zeroing.encode(x, rows, [2, 3], key, "layer 2 backward")
    assert message.nonfinite_zeroed == 2, "each zeroed source value once, though row 2 is sent twice"
    assert torch.isfinite(zeroing.decode(message.wire, 6)).all()
    clean = torch.nan_to_num(x, nan=0.0, posinf=0.0, neginf=0.0)
    assert torch.equal(message.wire, zeroing.encode(clean, rows, [2, 3], key, "test").wire), (
        "the same draws as a clean message"
    )
    assert (
        UniformEncoder(UniformCodec(4, torch.float16), BACKENDS[backend])
        .encode(x, rows[[0, 4]], [2], key, "t")
        .nonfinite_zeroed
        == 0
    )


def test_draws_are_keyed_per_message_and_receiver():
    q = MessageQuantization(None, None, None, seed=7, rank=1)

    def draws(epoch, layer, direction, counts=(3, 0, 2)):
        return philox.uniforms(q.noise_key(epoch, layer, direction).streams(list(counts), "cpu"), 5)

    a = draws(0, 1, Direction.FORWARD)
    assert a.shape == (5, 5) and torch.equal(a, draws(0, 1, Direction.FORWARD))
    assert not torch.equal(a, draws(0, 2, Direction.FORWARD))
    assert not torch.equal(a, draws(0, 1, Direction.BACKWARD))
    assert not torch.equal(a, draws(1, 1, Direction.FORWARD))
    assert not torch.equal(a[:2], a[3:5]), "receivers draw apart"
    assert torch.equal(draws(0, 1, Direction.FORWARD, (3, 4, 2))[7:9], a[3:5]), (
        "a row's draws depend on its receiver block only"
    )
    assert ((a > 0) & (a < 1)).all() and torch.equal(torch.round(a * 2**17), a * 2**17), "16-bit midpoints in (0, 1)"


PHILOX_KAT = {  # Random123's kat_vectors: philox4x32 <rounds> <counter> <key> -> <words>
    7: [
        ([0, 0, 0, 0], [0, 0], [0x5F6FB709, 0x0D893F64, 0x4F121F81, 0x4F730A48]),
        ([0xFFFFFFFF] * 4, [0xFFFFFFFF] * 2, [0x5207DDC2, 0x45165E59, 0x4D8EE751, 0x8C52F662]),
        (
            [0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344],
            [0xA4093822, 0x299F31D0],
            [0x4DFCCABA, 0x190A87F0, 0xC47362BA, 0xB6B5242A],
        ),
    ],
    10: [
        ([0, 0, 0, 0], [0, 0], [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]),
        ([0xFFFFFFFF] * 4, [0xFFFFFFFF] * 2, [0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD]),
        (
            [0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344],
            [0xA4093822, 0x299F31D0],
            [0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1],
        ),
    ],
}


@pytest.mark.parametrize("rounds", sorted(PHILOX_KAT))
def test_philox_known_answers(rounds):
    """Random123's known-answer vectors for Philox4x32-7 (the codec's draws, the default rounds) and -10."""
    for ctr, key, want in PHILOX_KAT[rounds]:
        k0, k1 = torch.tensor([key[0]]), torch.tensor([key[1]])
        words = philox.philox4x32([torch.tensor([c]) for c in ctr], k0, k1, rounds)
        assert [int(w) for w in words] == want
        if rounds == philox.ROUNDS:
            assert [int(w) for w in philox.philox4x32([torch.tensor([c]) for c in ctr], k0, k1)] == want


@pytest.mark.parametrize("backend", ["torch", "c", "c, rows in order"])
@pytest.mark.parametrize("bits", BITS)
def test_keyed_draws_are_unbiased(backend, bits):
    """The mean of n decodes of one row (n independent Philox rows) converges to the row. The C encoder codes gathered
    rows (one row sent n times) in blocks and rows in order (n copies of it) one at a time: both are checked."""
    x = torch.randn(1, 70, generator=torch.Generator().manual_seed(bits)) * 2
    n = 20000
    streams = RowStreams.of_blocks([12345], [n], "cpu")
    src, rows = x, torch.zeros(n, dtype=torch.int64)
    if backend == "c, rows in order":
        src, rows, backend = x.repeat(n, 1), torch.arange(n), "c"
    wire, finite = BACKENDS[backend].quantize_pack(src, rows, streams, bits, torch.float16)
    mean = torch_codec.unpack_dequantize(wire, 70, bits, torch.float16).double().mean(0)
    _, step = torch_codec.param_values(*torch_codec.row_params(x, bits, torch.float16))
    # Each decode's error has variance <= step^2/4, so the mean's standard error is <= step / (2 sqrt(n));
    # 16-bit midpoint draws add a bias of at most 2^-17 steps.
    tol = (5 * step / (2 * n**0.5) + step * 2.0**-17).double()
    assert finite and ((mean - x[0].double()).abs() <= tol).all(), float(((mean - x[0].double()).abs() / tol).max())


OVERFLOW_ROWS = [
    [-70000.0, 1.0, 2.0],
    [0.0, 70000.0, 1.0],
    [70000.0, 70001.0, 70002.0],
    [-65510.0, 0.0, 1.0],
    [65510.0, 65515.0, 65519.0],
    [0.0, 65504.0 * 3, 3.0],
    [3.4e38, -3.4e38, 1.0],
    [-3.4e38, -3.4e38, -3.4e38],
    [1e30, -1e30, 0.0],
    [0.0, 1.0, 65504.0],
]


@pytest.mark.parametrize("pd", PARAMS)
@pytest.mark.parametrize("bits", BITS)
def test_finite_rows_decode_finite_and_close(bits, pd):
    """fp16 parameters that would overflow fall back to flagged bf16 ones (same row size); +-2^126 bounds the rest."""
    x = torch.tensor(OVERFLOW_ROWS)
    n = 50
    rows = torch.arange(len(x)).repeat_interleave(n)
    encoder = UniformEncoder(UniformCodec(bits, pd), TORCH)
    message = encoder.encode(x, rows, [rows.numel()], NoiseKey(3, 1, 1, "fwd", 0), "test")
    assert message.wire.numel() == sum(message.send_bytes) == rows.numel() * torch_codec.row_bytes(3, bits, pd)
    out = encoder.decode(message.wire, 3).view(len(x), n, 3)
    assert torch.isfinite(out).all()
    zero, step = torch_codec.param_values(*torch_codec.row_params(x, bits, pd))
    inside = x.abs() <= torch_codec.LIMIT  # beyond +-2^126 values saturate
    err = (out - x[:, None, :]).abs().amax(1)
    assert ((err <= step[:, None] * (1 + 1e-5)) | ~inside).all()
    if pd == torch.float16:
        flagged = torch_codec.row_params(x, bits, pd)[1].view(torch.int16) < 0
        assert flagged[0] and bool(flagged[1]) == (bits == 1), "min below -65504; step 70000 / (2^b - 1) above 65504"
        assert not flagged[4] and not flagged[9], "only rows whose fp16 parameters overflow"


@pytest.mark.slow  # Triton's interpreter on CPU: about 20 s per case
@pytest.mark.needs_extra("gpu")  # triton; skips without it (tests/conftest.py)
@pytest.mark.parametrize("pd", PARAMS)
@pytest.mark.parametrize("bits", BITS)
def test_triton_kernels_equal_torch_bit_for_bit(bits, pd):
    gen = torch.Generator().manual_seed(bits)
    for dim in DIMS:
        src = torch.randn(30, dim, generator=gen) * 3
        src[4] = 0.0
        src[5] = 1.25
        src[6] = -0.0
        src[6, dim // 2] = 0.0
        src[8, 0] = -70000.0  # fp16 parameters overflow
        src[9] *= 1e35
        for idx in (
            torch.tensor([], dtype=torch.int64),
            torch.tensor([7]),
            torch.tensor([4, 5, 0, 29, 5, 11, 3, 6, 8, 9]),
        ):
            streams = RowStreams.of_blocks(
                [dim, 2**62 + bits], [idx.numel() // 2, idx.numel() - idx.numel() // 2], "cpu"
            )
            want, ok = torch_codec.quantize_rows(src, idx, streams, bits, pd)
            got, ok_t = triton_codec.quantize_pack(src, idx, streams, bits, pd, block=64)
            assert ok and ok_t and torch.equal(got, want), (dim, idx.tolist())
            decoded = torch_codec.unpack_dequantize(want, dim, bits, pd)
            assert torch.equal(
                triton_codec.unpack_dequantize(got, dim, bits, pd, block=64).view(torch.int32),
                decoded.view(torch.int32),
            )
            full = torch.full((idx.numel() + 2, dim), 7.0, device=got.device)  # into place: rows 1.. of a bigger buffer
            triton_codec.unpack_dequantize(got, dim, bits, pd, out=full[1:-1], block=64)
            assert torch.equal(full[1:-1].view(torch.int32), decoded.view(torch.int32)) and (full[[0, -1]] == 7.0).all()
    src[2, 1] = float("nan")
    assert not triton_codec.quantize_pack(src, torch.tensor([0, 2]), RowStreams.of_blocks([1], [2], "cpu"), bits, pd)[1]


@pytest.mark.needs_extra("gpu")
def test_triton_mixed_widths_equal_torch():
    gen = torch.Generator().manual_seed(5)
    counts = [3, 0, 4]
    bits = torch.tensor([1, 2, 4, 8])[torch.randint(0, 4, (7,), generator=gen)]
    layout = WireLayout(bits, counts, bits, counts)
    src = torch.randn(9, 11, generator=gen)
    src[1, 0] = -7e4
    rows, key = torch.tensor([8, 1, 0, 3, 3, 2, 5]), NoiseKey(9, 2, 1, "bwd", 1)
    wires = [
        MixedWidthEncoder(UniformCodec(8, torch.float16), BACKENDS[b], layout).encode(src, rows, counts, key, "t").wire
        for b in ("torch", "triton")
    ]
    assert torch.equal(wires[0], wires[1])
