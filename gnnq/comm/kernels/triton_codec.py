"""Triton kernels for the GPU path, bit-identical to ``torch_codec`` (and to the C codec).

``quantize_pack``: one program per sent row gathers the row from the source embedding
(no separate index_select), finds its min/max (and whether it holds NaN or inf), rounds the
parameters exactly as ``torch_codec.row_params`` does (fp16, or flagged bfloat16 where fp16
overflows), draws its uniforms inline with ``tl.philox`` (Philox4x32 with ``philox.ROUNDS`` rounds, as
``philox.py`` maps them to columns), quantizes and packs 8/b codes per byte into the wire row.
``unpack_dequantize``: one program per received row reads the
parameters and codes and writes fp32 values into the destination buffer. Feature dims of any
size are handled in BLOCK-sized chunks. Bit-identity with torch needs IEEE arithmetic: divisions
are ``tl.div_rn`` (Triton's ``/`` on fp32 is an approximate division on NVIDIA GPUs) and both
kernels are compiled with ``enable_fp_fusion=False``, so ``zero + code * step`` is not contracted
into a fused multiply-add (torch rounds the product, then the sum). Under TRITON_INTERPRET=1 both run on CPU tensors.
"""

from __future__ import annotations

import torch

try:
    import triton
    import triton.language as tl
except ImportError:  # the gpu extra is not installed
    triton = None

from gnnq.comm.kernels.philox import ROUNDS, RowStreams
from gnnq.comm.kernels.torch_codec import check_out, code_bytes, row_bytes


def triton_available() -> bool:
    return triton is not None


if triton is not None:

    @triton.jit
    def _store_param(ptr, value):
        """An fp32 parameter, little-endian."""
        b = value.to(tl.int32, bitcast=True)
        tl.store(ptr, (b & 0xFF).to(tl.uint8))
        tl.store(ptr + 1, ((b >> 8) & 0xFF).to(tl.uint8))
        tl.store(ptr + 2, ((b >> 16) & 0xFF).to(tl.uint8))
        tl.store(ptr + 3, ((b >> 24) & 0xFF).to(tl.uint8))

    @triton.jit
    def _load_param(ptr):
        b = (
            tl.load(ptr).to(tl.int32)
            | (tl.load(ptr + 1).to(tl.int32) << 8)
            | (tl.load(ptr + 2).to(tl.int32) << 16)
            | (tl.load(ptr + 3).to(tl.int32) << 24)
        )
        return b.to(tl.float32, bitcast=True)

    @triton.jit
    def _bf16_bits(x):
        """fp32 -> bfloat16 bit pattern (int32), round to nearest even (finite x), as torch."""
        b = x.to(tl.int32, bitcast=True)
        return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) & 0xFFFF

    @triton.jit
    def _bits16_next(b, UP: tl.constexpr):
        """The next 16-bit float pattern (fp16 or bf16, as int32 in [0, 65535]) toward +inf (UP) or -inf."""
        neg = b >= 0x8000
        if UP:
            n = tl.where(neg, b - 1, b + 1)
            n = tl.where(b == 0x8000, 1, n)
        else:
            n = tl.where(neg, b + 1, b - 1)
            n = tl.where(b == 0, 0x8001, n)
        return n

    @triton.jit
    def _f16_value(b):
        return b.to(tl.int16).to(tl.float16, bitcast=True).to(tl.float32)

    @triton.jit
    def _bf16_value(b):
        return (b << 16).to(tl.float32, bitcast=True)

    @triton.jit
    def _quantize_pack_kernel(
        src_ptr,
        idx_ptr,
        keys_ptr,
        index_ptr,
        out_ptr,
        bad_ptr,
        dim,
        src_stride,
        out_stride,
        num_code_bytes,
        BITS: tl.constexpr,
        PARAM_FP16: tl.constexpr,
        BLOCK: tl.constexpr,
        ROUNDS: tl.constexpr,
    ):
        row = tl.program_id(0)
        src = src_ptr + tl.load(idx_ptr + row).to(tl.int64) * src_stride
        lo = tl.full((BLOCK,), float("inf"), tl.float32)
        hi = tl.full((BLOCK,), float("-inf"), tl.float32)
        nz = tl.zeros((BLOCK,), tl.float32)
        first_zero = tl.full((BLOCK,), dim, tl.int32)
        for start in range(0, dim, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            m = cols < dim
            v = tl.load(src + cols, mask=m, other=0.0)
            lo = tl.minimum(lo, tl.where(m, v, float("inf")))
            hi = tl.maximum(hi, tl.where(m, v, float("-inf")))
            nz += v - v  # NaN from NaN or inf
            first_zero = tl.minimum(first_zero, tl.where(m & (v == 0.0), cols, dim))
        bad = tl.sum(nz, axis=0)
        # torch.aminmax keeps the first of equal values: a 0 min or max has the sign of the row's first zero.
        first = tl.min(first_zero, axis=0)
        signed_zero = tl.load(src + first, mask=first < dim, other=0.0)
        lo_min = tl.min(lo, axis=0)
        hi_max = tl.max(hi, axis=0)
        lo_min = tl.where(lo_min == 0.0, signed_zero, lo_min)
        hi_max = tl.where(hi_max == 0.0, signed_zero, hi_max)
        tl.store(bad_ptr + row, (bad != bad).to(tl.int8))
        LIMIT: tl.constexpr = 2.0**126
        mn = tl.minimum(tl.maximum(lo_min, -LIMIT), LIMIT)
        mx = tl.minimum(tl.maximum(hi_max, -LIMIT), LIMIT)
        LEVELS: tl.constexpr = (1 << BITS) - 1
        out = out_ptr + row.to(tl.int64) * out_stride
        if PARAM_FP16:
            near = mn.to(tl.float16).to(tl.int16, bitcast=True).to(tl.int32) & 0xFFFF
            zb = tl.where(_f16_value(near) > mn, _bits16_next(near, False), near)
            zero = _f16_value(zb)
            step32 = tl.div_rn(mx - zero, LEVELS * 1.0)
            sb = step32.to(tl.float16).to(tl.int16, bitcast=True).to(tl.int32) & 0xFFFF
            sb = tl.where(_f16_value(sb) < step32, _bits16_next(sb, True), sb)
            fits = ((near & 0x7C00) != 0x7C00) & ((zb & 0x7C00) != 0x7C00) & ((sb & 0x7C00) != 0x7C00)
            # Where fp16 overflows: bfloat16 parameters, flagged by the step's sign bit.
            wzb = _bf16_bits(mn)
            wzb = tl.where(_bf16_value(wzb) > mn, _bits16_next(wzb, False), wzb)
            wzero = _bf16_value(wzb)
            wstep32 = tl.div_rn(mx - wzero, LEVELS * 1.0)
            wsb = _bf16_bits(wstep32)
            wsb = tl.where(_bf16_value(wsb) < wstep32, _bits16_next(wsb, True), wsb) & 0x7FFF
            sb = sb & 0x7FFF
            zero = tl.where(fits, zero, wzero)
            step = tl.where(fits, _f16_value(sb), _bf16_value(wsb))
            zb = tl.where(fits, zb, wzb)
            sb = tl.where(fits, sb, wsb | 0x8000)
            tl.store(out, (zb & 0xFF).to(tl.uint8))
            tl.store(out + 1, ((zb >> 8) & 0xFF).to(tl.uint8))
            tl.store(out + 2, (sb & 0xFF).to(tl.uint8))
            tl.store(out + 3, ((sb >> 8) & 0xFF).to(tl.uint8))
            PB: tl.constexpr = 4
        else:
            zero = mn
            step = tl.div_rn(mx - mn, LEVELS * 1.0)
            _store_param(out, zero)
            _store_param(out + 4, step)
            PB: tl.constexpr = 8
        denom = tl.where(step > 0, step, 1.0)
        key = tl.load(keys_ptr + row)
        ridx = tl.load(index_ptr + row)
        r0 = (ridx & 0xFFFFFFFF).to(tl.uint32)
        r1 = ((ridx >> 32) & 0xFFFFFFFF).to(tl.uint32)
        PER_BYTE: tl.constexpr = 8 // BITS
        for start in range(0, num_code_bytes, BLOCK):
            bcols = start + tl.arange(0, BLOCK)
            acc = tl.zeros((BLOCK,), tl.int32)
            for j in tl.static_range(PER_BYTE):
                cols = bcols * PER_BYTE + j
                m = cols < dim
                v = tl.load(src + cols, mask=m, other=0.0)
                u = _uniform(key, r0, r1, cols, ROUNDS)
                q = tl.floor(tl.div_rn(v - zero, denom) + u)
                q = tl.minimum(tl.maximum(q, 0.0), LEVELS)
                q = tl.where(m, q, 0.0)
                acc = acc | (q.to(tl.int32) << (j * BITS))
            tl.store(out + PB + bcols, acc.to(tl.uint8), mask=bcols < num_code_bytes)

    @triton.jit
    def _uniform(key, r0, r1, cols, ROUNDS: tl.constexpr):
        """philox.py's draw of columns ``cols`` of the row (r1:r0) on stream ``key``."""
        c0 = (((cols >> 6) << 3) | (cols & 7)).to(tl.uint32)
        zero = tl.zeros_like(c0)
        w0, w1, w2, w3 = tl.philox(key, c0, zero + r0, zero + r1, zero, ROUNDS)
        j = cols & 63
        word = (j >> 3) & 3
        w = tl.where(word == 0, w0, tl.where(word == 1, w1, tl.where(word == 2, w2, w3)))
        u16 = ((w >> ((j >> 5) * 16).to(tl.uint32)) & 0xFFFF).to(tl.int32)
        return (u16 * 2 + 1).to(tl.float32) * 7.62939453125e-06  # 2^-17

    @triton.jit
    def _unpack_dequantize_kernel(
        wire_ptr,
        out_ptr,
        dim,
        wire_stride,
        out_stride,
        BITS: tl.constexpr,
        PARAM_FP16: tl.constexpr,
        BLOCK: tl.constexpr,
    ):
        row = tl.program_id(0)
        wire = wire_ptr + row.to(tl.int64) * wire_stride
        if PARAM_FP16:
            PB: tl.constexpr = 4
            zb = tl.load(wire).to(tl.int32) | (tl.load(wire + 1).to(tl.int32) << 8)
            sb = tl.load(wire + 2).to(tl.int32) | (tl.load(wire + 3).to(tl.int32) << 8)
            wide = sb >= 0x8000  # flagged: bfloat16 parameters
            sb = sb & 0x7FFF
            zero = tl.where(wide, _bf16_value(zb), _f16_value(zb))
            step = tl.where(wide, _bf16_value(sb), _f16_value(sb))
        else:
            PB: tl.constexpr = 8
            zero = _load_param(wire)
            step = _load_param(wire + 4)
        PER_BYTE: tl.constexpr = 8 // BITS
        MASK: tl.constexpr = (1 << BITS) - 1
        out = out_ptr + row.to(tl.int64) * out_stride
        for start in range(0, dim, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            m = cols < dim
            byte = tl.load(wire + PB + cols // PER_BYTE, mask=m, other=0).to(tl.int32)
            code = (byte >> ((cols % PER_BYTE) * BITS)) & MASK
            tl.store(out + cols, zero + code.to(tl.float32) * step, mask=m)


def quantize_pack(
    src: torch.Tensor, row_idx: torch.Tensor, streams: RowStreams, bits: int, param_dtype: torch.dtype, block: int = 256
) -> tuple[torch.Tensor, bool]:
    """Wire rows for ``src[row_idx]`` (gathered inside the kernel) on the Philox streams of ``streams``; whether all
    finite."""
    dim = src.shape[1]
    rows = row_idx.numel()
    out = torch.empty((rows, row_bytes(dim, bits, param_dtype)), dtype=torch.uint8, device=src.device)
    if not rows:
        return out, True
    if len(streams) != rows:
        raise ValueError(f"{len(streams)} noise streams for {rows} rows")
    bad = torch.empty(rows, dtype=torch.int8, device=src.device)
    src = src.float().contiguous()
    _quantize_pack_kernel[(rows,)](
        src,
        row_idx,
        streams.keys.contiguous(),
        streams.index.contiguous(),
        out,
        bad,
        dim,
        src.stride(0),
        out.stride(0),
        code_bytes(dim, bits),
        BITS=bits,
        PARAM_FP16=param_dtype == torch.float16,
        BLOCK=block,
        ROUNDS=ROUNDS,
        enable_fp_fusion=False,
    )
    return out, not bool(bad.any())


def unpack_dequantize(
    wire: torch.Tensor, dim: int, bits: int, param_dtype: torch.dtype, out: torch.Tensor | None = None, block: int = 256
) -> torch.Tensor:
    """``torch_codec.unpack_dequantize``: into a fresh tensor, or ``out`` (``torch_codec.check_out``)."""
    out = check_out(out, wire.shape[0], dim, wire.device)
    if wire.shape[0] and dim:
        wire = wire.contiguous()
        _unpack_dequantize_kernel[(wire.shape[0],)](
            wire,
            out,
            dim,
            wire.stride(0),
            out.stride(0),
            BITS=bits,
            PARAM_FP16=param_dtype == torch.float16,
            BLOCK=block,
            enable_fp_fusion=False,
        )
    return out
