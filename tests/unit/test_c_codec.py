"""The fused C CPU codec: bit for bit the torch codec, for uniform and mixed-width messages, and its fallback."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gnnq.comm.codec import NoiseKey, UniformCodec
from gnnq.comm.encoder import MixedWidthEncoder, UniformEncoder
from gnnq.comm.kernels import c_codec, philox, torch_codec
from gnnq.comm.kernels.backends import kernels_for, kernels_named
from gnnq.comm.kernels.philox import RowStreams
from gnnq.comm.wire_layout import WireLayout
from tests.conftest import skip_or_fail

PARAMS = (torch.float16, torch.float32)


@pytest.fixture(scope="module", autouse=True)
def built():
    if c_codec.compiler() is None:
        skip_or_fail("GNNQ_REQUIRE_C_COMPILER", "no C compiler (cc, gcc or $CC) to build the C codec with")
    if c_codec.library() is None:
        pytest.fail("the C codec did not build on this machine (a C compiler is expected here)")


def same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal bit patterns (so -0 != +0 and NaN == NaN of the same pattern)."""
    if a.dtype == torch.float32:
        a, b = a.view(torch.int32), b.view(torch.int32)
    return a.shape == b.shape and torch.equal(a, b)


def awkward_rows(dim: int, gen: torch.Generator) -> torch.Tensor:
    """Constant rows, signed zeros, huge and tiny magnitudes, values in the fp16 subnormal range."""
    scales = torch.tensor([1.0, 1e-3, 1e3, 1e-6, 3e-8, 1e-30, 1e-41, 6e4, 7e4, 1e20, 1e38])
    x = (torch.randn(len(scales), dim, generator=gen) * scales[:, None]).clamp(
        -3.4e38, 3.4e38
    )  # finite: x 1e38 may overflow
    extra = [
        torch.full((dim,), 2.5),
        torch.zeros(dim),
        torch.full((dim,), -0.0),
        torch.full((dim,), -7.0),
        torch.randn(dim, generator=gen).abs(),
        -torch.randn(dim, generator=gen).abs(),
        torch.randint(-3, 4, (dim,), generator=gen).float() * 2.0**-24,  # exact fp16 subnormals
        torch.tensor([0.0, -0.0] * dim)[:dim],
        torch.tensor([-0.0, 0.0] * dim)[:dim],
        torch.tensor([3.4e38, -3.4e38] * dim)[:dim],
    ]
    return torch.cat([x, torch.stack(extra)])


@pytest.mark.parametrize("pd", PARAMS)
@pytest.mark.parametrize("bits", torch_codec.BITS)
@pytest.mark.parametrize("dim", [1, 3, 7, 255, 256, 602])
def test_encode_decode_bit_identical(bits, pd, dim):
    gen = torch.Generator().manual_seed(dim * 10 + bits)
    src = awkward_rows(dim, gen)
    rows = torch.cat([torch.arange(src.shape[0]), torch.randint(0, src.shape[0], (17,), generator=gen)])
    streams = RowStreams.of_blocks([dim, 2**63 - 1, 0], [5, 0, rows.numel() - 5], "cpu")
    want, finite = torch_codec.quantize_rows(src, rows, streams, bits, pd)
    wire, c_finite = c_codec.quantize_pack(src, rows, streams, bits, pd)
    assert same(wire, want) and finite and c_finite
    decoded = torch_codec.unpack_dequantize(want, dim, bits, pd)
    assert same(c_codec.unpack_dequantize(wire, dim, bits, pd), decoded)
    # Into place: the destination rows of a bigger buffer (as the halo rows of [inner; halo]), rows around untouched.
    full = torch.full((rows.numel() + 3, dim), 7.0)
    assert c_codec.unpack_dequantize(wire, dim, bits, pd, out=full[2:-1]).data_ptr() == full[2].data_ptr()
    assert same(full[2:-1], decoded) and (full[:2] == 7.0).all() and (full[-1] == 7.0).all()
    full.fill_(7.0)
    assert same(torch_codec.unpack_dequantize(want, dim, bits, pd, out=full[1:-2]), decoded) and (full[0] == 7.0).all()


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(torch_codec.BITS),
    st.sampled_from(PARAMS),
    st.integers(1, 40),
    st.integers(1, 6),
    st.lists(st.floats(width=32, allow_nan=False, allow_infinity=False), min_size=1, max_size=240),
    st.integers(0, 2**31),
)
def test_encode_decode_bit_identical_hypothesis(bits, pd, dim, nrows, values, seed):
    gen = torch.Generator().manual_seed(seed)
    src = (
        torch.tensor(values, dtype=torch.float32).repeat(nrows * dim // len(values) + 1)[: nrows * dim].view(nrows, dim)
    )
    rows = torch.randint(0, nrows, (nrows + 2,), generator=gen)
    streams = RowStreams.of_blocks([seed, seed + 1], [1, nrows + 1], "cpu")
    want = torch_codec.quantize_rows(src, rows, streams, bits, pd)[0]
    assert same(c_codec.quantize_pack(src, rows, streams, bits, pd)[0], want)
    assert same(c_codec.unpack_dequantize(want, dim, bits, pd), torch_codec.unpack_dequantize(want, dim, bits, pd))


def test_empty_inputs_and_scattered_decode():
    src = torch.randn(4, 5)
    empty, _ = c_codec.quantize_pack(
        src, torch.empty(0, dtype=torch.int64), RowStreams.of_blocks([1], [0], "cpu"), 4, torch.float16
    )
    assert empty.shape == (0, torch_codec.row_bytes(5, 4, torch.float16))
    assert c_codec.unpack_dequantize(empty, 5, 4, torch.float16).shape == (0, 5)
    wire, _ = c_codec.quantize_pack(src, torch.tensor([2, 0]), RowStreams.of_blocks([1], [2], "cpu"), 2, torch.float32)
    out = torch.full((4, 5), 9.0)
    c_codec.unpack_dequantize(wire, 5, 2, torch.float32, out=out, out_rows=torch.tensor([3, 1]))
    assert same(out[[3, 1]], torch_codec.unpack_dequantize(wire, 5, 2, torch.float32))
    assert (out[[0, 2]] == 9.0).all()
    for bad in (
        torch.empty(2, 5, dtype=torch.float64),
        torch.empty(5, 2).t(),
        torch.empty(3, 5),
    ):  # dtype, layout, rows
        for decode in (c_codec.unpack_dequantize, torch_codec.unpack_dequantize):
            with pytest.raises(ValueError, match=r"out must be a contiguous fp32 \(2, 5\) tensor on cpu"):
                decode(wire, 5, 2, torch.float32, out=bad)
    with pytest.raises(IndexError):
        c_codec.quantize_pack(src, torch.tensor([4]), RowStreams.of_blocks([1], [1], "cpu"), 2, torch.float32)
    with pytest.raises(ValueError, match="noise streams"):
        c_codec.quantize_pack(src, torch.tensor([1]), RowStreams.of_blocks([1], [2], "cpu"), 2, torch.float32)


@pytest.mark.parametrize("pd", PARAMS)
@pytest.mark.parametrize("dim", [1, 7, 256])
def test_mixed_width_layout_byte_identical(monkeypatch, pd, dim):
    gen = torch.Generator().manual_seed(dim)
    send_counts, recv_counts = [6, 0, 11, 3], [4, 9, 0, 2]
    widths = torch.tensor([1, 2, 4, 8])
    send_bits = widths[torch.randint(0, 3, (sum(send_counts),), generator=gen)]
    recv_bits = widths[torch.randint(1, 4, (sum(recv_counts),), generator=gen)]
    layout = WireLayout(send_bits, send_counts, recv_bits, recv_counts)
    src = awkward_rows(dim, gen)
    rows = torch.randint(0, src.shape[0], (sum(send_counts),), generator=gen)
    # The receive side: a buffer laid out as a peer with the reverse layout would send it.
    peer = WireLayout(recv_bits, recv_counts, send_bits, send_counts)
    peer_rows = torch.randint(0, src.shape[0], (sum(recv_counts),), generator=gen)
    results = {}
    for mode in ("torch", "c"):
        monkeypatch.setenv("GNNQ_CPU_CODEC", mode)
        assert kernels_for(src.device).name == mode
        codec, kernels = UniformCodec(8, pd), kernels_named(mode)
        mine, theirs = MixedWidthEncoder(codec, kernels, layout), MixedWidthEncoder(codec, kernels, peer)
        sent = mine.encode(src, rows, send_counts, NoiseKey(dim, 1, 2, "fwd", 0), "test")
        incoming = theirs.encode(src, peer_rows, recv_counts, NoiseKey(dim, 1, 2, "fwd", 3), "test").wire
        full = torch.full((sum(recv_counts) + 2, dim), 7.0)  # decoded into place: rows 1.. of a bigger buffer
        mine.decode(incoming, dim, out=full[1:-1])
        assert (full[0] == 7.0).all() and (full[-1] == 7.0).all()
        results[mode] = (sent.wire, sent.send_bytes, incoming, mine.decode(incoming, dim), full[1:-1])
    (flat_t, per_t, in_t, out_t, into_t), (flat_c, per_c, in_c, out_c, into_c) = results["torch"], results["c"]
    assert same(flat_c, flat_t) and per_c == per_t and same(in_c, in_t) and same(out_c, out_t)
    assert same(into_t, out_t) and same(into_c, out_t)


@pytest.mark.parametrize("cc", ["no-such-cc", "false"])  # missing, and a compiler that fails
def test_compiler_failure_falls_back_to_torch(monkeypatch, tmp_path, cc):
    monkeypatch.setenv("GNNQ_KERNEL_CACHE", str(tmp_path))
    monkeypatch.setenv("CC", cc)
    monkeypatch.delenv("GNNQ_CPU_CODEC", raising=False)
    c_codec.reset()
    try:
        with pytest.warns(RuntimeWarning, match="C CPU codec is unavailable"):
            assert not c_codec.enabled()
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # warned once only
            assert not c_codec.enabled()
        src, key = torch.randn(6, 9), NoiseKey(0, 0, 1, "fwd", 0)
        kernels = kernels_for(src.device)
        assert kernels.name == "torch"
        wire = (
            UniformEncoder(UniformCodec(4, torch.float16), kernels)
            .encode(src, torch.tensor([5, 0, 2]), [3], key, "test")
            .wire
        )
        want = torch_codec.quantize_pack(src[[5, 0, 2]], philox.uniforms(key.streams([3], "cpu"), 9), 4, torch.float16)
        assert same(wire, want.reshape(-1))
        assert not list(tmp_path.rglob("*.so"))
    finally:
        monkeypatch.undo()
        c_codec.reset()


def test_compile_cache_reused(monkeypatch, tmp_path):
    monkeypatch.setenv("GNNQ_KERNEL_CACHE", str(tmp_path))
    c_codec.reset()
    try:
        assert c_codec.enabled()
        (lib,) = tmp_path.rglob("cpu_codec.so")
        stamp = lib.stat().st_mtime_ns
        c_codec.reset()
        calls = []
        real_run = c_codec.subprocess.run
        monkeypatch.setattr(c_codec.subprocess, "run", lambda cmd, **kw: calls.append(cmd) or real_run(cmd, **kw))
        assert c_codec.enabled()
        assert [c for c in calls if "-shared" in c] == []  # only the version probe ran: no recompilation
        assert list(tmp_path.rglob("cpu_codec.so")) == [lib] and lib.stat().st_mtime_ns == stamp
        assert not [p for p in tmp_path.rglob("*") if p.is_file() and p != lib]  # no temporary files left behind
    finally:
        monkeypatch.undo()
        c_codec.reset()


def test_forcing_the_torch_path(monkeypatch):
    monkeypatch.setenv("GNNQ_CPU_CODEC", "torch")
    assert kernels_for("cpu").name == "torch"
    monkeypatch.setenv("GNNQ_CPU_CODEC", "c")
    assert kernels_for("cpu").name == "c"
    monkeypatch.setenv("GNNQ_CPU_CODEC", "fast")
    with pytest.raises(ValueError):
        kernels_for("cpu")


def extreme_rows(dim: int, gen: torch.Generator) -> torch.Tensor:
    """awkward_rows plus the rows that stress the vector paths: constant, one outlier at the last (tail) column,
    alternating extremes, min and max at lane boundaries."""
    rows = [awkward_rows(dim, gen), torch.full((2, dim), 3.4e38), torch.full((1, dim), -1.5e-45)]
    spike = torch.zeros(2, dim)
    spike[0, -1], spike[1, -1] = 1e30, -1e30
    lanes = torch.randn(2, dim, generator=gen)
    lanes[0, :: max(1, dim // 3)] = 9.0
    lanes[1, 15 if dim > 15 else 0] = -9.0
    return torch.cat([*rows, spike, lanes, torch.arange(dim, dtype=torch.float32)[None] % 3 - 1])


SIMD_DIMS = [1, 3, 7, 8, 15, 16, 17, 31, 63, 64, 65, 127, 128, 129, 255, 256, 257, 383, 384, 600]


def test_every_cpu_variant_built():
    """The variants this CPU has are compiled in and run (a compiler that drops one fails here, not silently)."""
    have = c_codec.cpu_flags()
    paths = c_codec.simd_paths()
    assert paths[:2] == ["scalar", "generic"]
    for name, (needs, _) in c_codec.VARIANTS.items():
        if needs <= have and c_codec.platform.machine().lower() in ("x86_64", "amd64"):
            assert name in paths


@pytest.mark.parametrize("pd", PARAMS)
@pytest.mark.parametrize("bits", torch_codec.BITS)
def test_simd_paths_equal_scalar_on_every_element(bits, pd):
    """Each SIMD path (forced by ``simd=``) against the scalar reference: whole wire rows, every byte, at odd
    lengths around the vector widths (8 and 16 lanes, 64 and 128 columns per Philox batch) and edge values."""
    paths = [p for p in c_codec.simd_paths() if p != "scalar"]
    gen = torch.Generator().manual_seed(bits)
    for dim in SIMD_DIMS:
        src = extreme_rows(dim, gen)
        rows = torch.cat([torch.arange(src.shape[0]), torch.randint(0, src.shape[0], (9,), generator=gen)])
        streams = RowStreams.of_blocks([dim * 7 + bits, 2**63 - 1], [11, rows.numel() - 11], "cpu")
        want, finite = c_codec.quantize_pack(src, rows, streams, bits, pd, simd="scalar")
        assert finite
        for path in paths:
            got, ok = c_codec.quantize_pack(src, rows, streams, bits, pd, simd=path)
            assert ok and same(got, want), (path, dim, int((got != want).sum()))
    assert same(want, torch_codec.quantize_rows(src, rows, streams, bits, pd)[0])  # the reference is torch's


def test_simd_paths_flag_nonfinite_rows_alike():
    src = torch.randn(6, 300)
    src[1, 299], src[3, 17], src[4, 0] = float("nan"), float("inf"), -float("inf")
    for path in c_codec.simd_paths():
        for row in range(6):
            _, ok = c_codec.quantize_pack(
                src, torch.tensor([row]), RowStreams.of_blocks([1], [1], "cpu"), 4, torch.float16, simd=path
            )
            assert ok == (row not in (1, 3, 4)), (path, row)


@pytest.mark.parametrize("dim", [5, 256, 300, 512, 513, 1024])
def test_blocks_of_rows_equal_scalar_around_nonfinite_rows(dim):
    """The SIMD paths code gathered narrow rows in blocks (ranges of the next block taken between the current one's
    codes, then reduced W rows to a vector) and rows in order (or wider than 512) one at a time: on both, every path
    equals the scalar reference byte for byte on row counts that leave partial blocks, with NaN / inf rows and rows
    whose sum overflows (finite: coded) among them, and skips the same rows."""
    gen = torch.Generator().manual_seed(dim)
    src = torch.randn(70, dim, generator=gen) * torch.logspace(-3, 3, 70)[:, None]
    src[3, dim // 2], src[17, 0], src[18, dim - 1], src[40, dim // 3] = float("nan"), float("inf"), -float("inf"), 1.0
    src[41] = 3.0e38  # finite, its sum overflows
    src[42, ::2] = -0.0  # zero minimum's sign
    src[42, 1::2] = 0.0
    for rows in (torch.arange(70), torch.randint(0, 70, (53,), generator=gen)):
        streams = RowStreams.of_blocks([dim, 9], [20, rows.numel() - 20], "cpu")
        for bits in (1, 8):
            want, _ = c_codec.quantize_pack(src, rows, streams, bits, torch.float16, simd="scalar")
            stride = torch_codec.row_bytes(dim, bits, torch.float16)
            finite = [r for r, i in enumerate(rows.tolist()) if i not in (3, 17, 18)]
            for path in c_codec.simd_paths():
                for threads in (1, 2):
                    got, ok = c_codec.quantize_pack(src, rows, streams, bits, torch.float16, simd=path, threads=threads)
                    assert ok == (len(finite) == rows.numel())
                    assert same(got[finite], want[finite]), (path, threads, bits)
            if len(finite) == rows.numel():
                assert same(want, torch_codec.quantize_rows(src, rows, streams, bits, torch.float16)[0])
            assert want.shape == (rows.numel(), stride)


@pytest.mark.parametrize("path", ["scalar", "generic", "auto"])
def test_mixed_widths_and_threads_equal_across_paths(path):
    gen = torch.Generator().manual_seed(3)
    src = extreme_rows(257, gen)
    n = 40
    rows = torch.randint(0, src.shape[0], (n,), generator=gen)
    bits = torch.tensor([1, 2, 4, 8], dtype=torch.int8)[torch.randint(0, 4, (n,), generator=gen)]
    sizes = torch.tensor([torch_codec.row_bytes(257, int(b), torch.float16) for b in bits])
    offsets = torch.cumsum(sizes, 0) - sizes
    streams = RowStreams.of_blocks([5, 6], [13, n - 13], "cpu")
    total = int(sizes.sum())
    want, _ = c_codec.encode_mixed(src, rows, streams, bits, offsets, total, torch.float16, simd="scalar")
    for threads in (1, 2, 3):
        got, _ = c_codec.encode_mixed(
            src, rows, streams, bits, offsets, total, torch.float16, simd=path, threads=threads
        )
        assert same(got, want), threads
        wire, _ = c_codec.quantize_pack(src, rows, streams, 2, torch.float32, simd=path, threads=threads)
        assert same(wire, c_codec.quantize_pack(src, rows, streams, 2, torch.float32, simd="scalar")[0])


def test_forcing_a_simd_path_by_environment(monkeypatch):
    src, rows, streams = torch.randn(5, 70), torch.tensor([4, 0]), RowStreams.of_blocks([1], [2], "cpu")
    monkeypatch.setenv("GNNQ_CODEC_SIMD", "scalar")
    assert c_codec.simd_level() == c_codec.SIMD["scalar"]
    want = c_codec.quantize_pack(src, rows, streams, 4, torch.float16)[0]
    monkeypatch.setenv("GNNQ_CODEC_SIMD", "fastest")
    with pytest.raises(ValueError, match="GNNQ_CODEC_SIMD must be one of auto, scalar, generic, avx2, avx512"):
        c_codec.quantize_pack(src, rows, streams, 4, torch.float16)
    monkeypatch.setenv("GNNQ_CODEC_SIMD", "auto")
    assert same(c_codec.quantize_pack(src, rows, streams, 4, torch.float16)[0], want)
    missing = [p for p in ("avx2", "avx512") if p not in c_codec.simd_paths()]
    for p in missing:  # a path this CPU or build lacks is refused, never run
        with pytest.raises(ValueError, match=f"{p} path is not available"):
            c_codec.quantize_pack(src, rows, streams, 4, torch.float16, simd=p)
    monkeypatch.setenv("GNNQ_CODEC_THREADS", "0")
    with pytest.raises(ValueError, match="GNNQ_CODEC_THREADS must be a whole number >= 1"):
        c_codec.quantize_pack(src, rows, streams, 4, torch.float16)


def test_no_compiler_on_path_falls_back_with_one_warning(tmp_path):
    """A fresh machine without any C compiler on PATH: the torch codec, one warning line, correct bytes."""
    script = (
        "import warnings, torch\n"
        "from gnnq.comm.codec import NoiseKey, UniformCodec\n"
        "from gnnq.comm.encoder import UniformEncoder\n"
        "from gnnq.comm.kernels import philox, torch_codec\n"
        "from gnnq.comm.kernels.backends import kernels_for\n"
        "src, key = torch.randn(6, 9), NoiseKey(0, 0, 1, 'fwd', 0)\n"
        "k = kernels_for('cpu'); k2 = kernels_for('cpu')\n"
        "enc = UniformEncoder(UniformCodec(4, torch.float16), k)\n"
        "wire = enc.encode(src, torch.tensor([5, 0]), [2], key, 't').wire\n"
        "want = torch_codec.quantize_pack(src[[5, 0]], philox.uniforms(key.streams([2], 'cpu'), 9), 4, torch.float16)\n"
        "assert k.name == 'torch' and torch.equal(wire, want.reshape(-1))\n"
        "print('OK')\n"
    )
    empty = tmp_path / "bin"
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("CC", "GNNQ_CPU_CODEC", "GNNQ_CODEC_SIMD")}
    env.update(PATH=str(empty), GNNQ_KERNEL_CACHE=str(tmp_path / "cache"), PYTHONWARNINGS="default")
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "OK", done.stderr
    lines = [line for line in done.stderr.splitlines() if "C CPU codec is unavailable" in line]
    assert len(lines) == 1 and "no C compiler found" in lines[0], done.stderr
    assert not list((tmp_path / "cache").rglob("*.so"))
