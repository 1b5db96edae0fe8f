"""Triton kernels for the GPU path, bit-identical to ``torch_codec`` given the same draws.

``quantize_pack``: one program per sent row gathers the row from the source embedding
(no separate index_select), finds its min/max, rounds the parameters exactly as
``torch_codec.row_params`` does, quantizes with the given uniform draws and packs 8/b codes
per byte into the wire row. ``unpack_dequantize``: one program per received row reads the
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

from gnnq.comm.kernels.torch_codec import code_bytes, row_bytes


def triton_available() -> bool:
    return triton is not None


if triton is not None:

    @triton.jit
    def _store_param(ptr, value, PARAM_FP16: tl.constexpr):
        if PARAM_FP16:
            b = value.to(tl.float16).to(tl.int16, bitcast=True).to(tl.int32)
            tl.store(ptr, (b & 0xFF).to(tl.uint8))
            tl.store(ptr + 1, ((b >> 8) & 0xFF).to(tl.uint8))
        else:
            b = value.to(tl.int32, bitcast=True)
            tl.store(ptr, (b & 0xFF).to(tl.uint8))
            tl.store(ptr + 1, ((b >> 8) & 0xFF).to(tl.uint8))
            tl.store(ptr + 2, ((b >> 16) & 0xFF).to(tl.uint8))
            tl.store(ptr + 3, ((b >> 24) & 0xFF).to(tl.uint8))

    @triton.jit
    def _load_param(ptr, PARAM_FP16: tl.constexpr):
        if PARAM_FP16:
            b = tl.load(ptr).to(tl.int32) | (tl.load(ptr + 1).to(tl.int32) << 8)
            return b.to(tl.int16).to(tl.float16, bitcast=True).to(tl.float32)
        b = (tl.load(ptr).to(tl.int32) | (tl.load(ptr + 1).to(tl.int32) << 8)
             | (tl.load(ptr + 2).to(tl.int32) << 16) | (tl.load(ptr + 3).to(tl.int32) << 24))  # fmt: skip
        return b.to(tl.float32, bitcast=True)

    @triton.jit
    def _fp16_next(h, UP: tl.constexpr):
        b = h.to(tl.int16, bitcast=True).to(tl.int32)
        if UP:
            n = tl.where(b < 0, b - 1, b + 1)
            n = tl.where(b == -32768, 1, n)
        else:
            n = tl.where(b < 0, b + 1, b - 1)
            n = tl.where(b == 0, -32767, n)
        return n.to(tl.int16).to(tl.float16, bitcast=True)

    @triton.jit
    def _quantize_pack_kernel(src_ptr, idx_ptr, noise_ptr, out_ptr, dim, src_stride, noise_stride, out_stride,
                              num_code_bytes, BITS: tl.constexpr, PARAM_FP16: tl.constexpr, BLOCK: tl.constexpr):  # fmt: skip
        row = tl.program_id(0)
        src = src_ptr + tl.load(idx_ptr + row).to(tl.int64) * src_stride
        lo = tl.full((BLOCK,), float("inf"), tl.float32)
        hi = tl.full((BLOCK,), float("-inf"), tl.float32)
        for start in range(0, dim, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            m = cols < dim
            v = tl.load(src + cols, mask=m, other=0.0)
            lo = tl.minimum(lo, tl.where(m, v, float("inf")))
            hi = tl.maximum(hi, tl.where(m, v, float("-inf")))
        mn = tl.min(lo, axis=0)
        mx = tl.max(hi, axis=0)
        LEVELS: tl.constexpr = (1 << BITS) - 1
        if PARAM_FP16:
            z16 = mn.to(tl.float16)
            z16 = tl.where(z16.to(tl.float32) > mn, _fp16_next(z16, False), z16)
            zero = z16.to(tl.float32)
            step32 = tl.div_rn(mx - zero, LEVELS * 1.0)
            s16 = step32.to(tl.float16)
            s16 = tl.where(s16.to(tl.float32) < step32, _fp16_next(s16, True), s16)
            step = s16.to(tl.float32)
            PB: tl.constexpr = 4
        else:
            zero = mn
            step = tl.div_rn(mx - mn, LEVELS * 1.0)
            PB: tl.constexpr = 8
        out = out_ptr + row.to(tl.int64) * out_stride
        _store_param(out, zero, PARAM_FP16)
        _store_param(out + PB // 2, step, PARAM_FP16)
        denom = tl.where(step > 0, step, 1.0)
        noise = noise_ptr + row.to(tl.int64) * noise_stride
        PER_BYTE: tl.constexpr = 8 // BITS
        for start in range(0, num_code_bytes, BLOCK):
            bcols = start + tl.arange(0, BLOCK)
            acc = tl.zeros((BLOCK,), tl.int32)
            for j in tl.static_range(PER_BYTE):
                cols = bcols * PER_BYTE + j
                m = cols < dim
                v = tl.load(src + cols, mask=m, other=0.0)
                u = tl.load(noise + cols, mask=m, other=0.0)
                q = tl.floor(tl.div_rn(v - zero, denom) + u)
                q = tl.minimum(tl.maximum(q, 0.0), LEVELS)
                q = tl.where(m, q, 0.0)
                acc = acc | (q.to(tl.int32) << (j * BITS))
            tl.store(out + PB + bcols, acc.to(tl.uint8), mask=bcols < num_code_bytes)

    @triton.jit
    def _unpack_dequantize_kernel(wire_ptr, out_ptr, dim, wire_stride, out_stride, BITS: tl.constexpr,
                                  PARAM_FP16: tl.constexpr, BLOCK: tl.constexpr):  # fmt: skip
        row = tl.program_id(0)
        wire = wire_ptr + row.to(tl.int64) * wire_stride
        if PARAM_FP16:
            PB: tl.constexpr = 4
        else:
            PB: tl.constexpr = 8
        zero = _load_param(wire, PARAM_FP16)
        step = _load_param(wire + PB // 2, PARAM_FP16)
        PER_BYTE: tl.constexpr = 8 // BITS
        MASK: tl.constexpr = (1 << BITS) - 1
        out = out_ptr + row.to(tl.int64) * out_stride
        for start in range(0, dim, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            m = cols < dim
            byte = tl.load(wire + PB + cols // PER_BYTE, mask=m, other=0).to(tl.int32)
            code = (byte >> ((cols % PER_BYTE) * BITS)) & MASK
            tl.store(out + cols, zero + code.to(tl.float32) * step, mask=m)


def quantize_pack(src: torch.Tensor, row_idx: torch.Tensor, noise: torch.Tensor, bits: int, param_dtype: torch.dtype,
                  block: int = 256) -> torch.Tensor:  # fmt: skip
    """Wire rows for ``src[row_idx]`` (gathered inside the kernel) with uniform draws ``noise`` (R, D)."""
    dim = src.shape[1]
    rows = row_idx.numel()
    out = torch.empty((rows, row_bytes(dim, bits, param_dtype)), dtype=torch.uint8, device=src.device)
    if rows:
        src, noise = src.contiguous(), noise.contiguous()
        _quantize_pack_kernel[(rows,)](src, row_idx, noise, out, dim, src.stride(0), noise.stride(0), out.stride(0),
                                       code_bytes(dim, bits), BITS=bits, PARAM_FP16=param_dtype == torch.float16,
                                       BLOCK=block, enable_fp_fusion=False)  # fmt: skip
    return out


def unpack_dequantize(wire: torch.Tensor, dim: int, bits: int, param_dtype: torch.dtype, block: int = 256) -> torch.Tensor:
    out = torch.empty((wire.shape[0], dim), dtype=torch.float32, device=wire.device)
    if wire.shape[0]:
        wire = wire.contiguous()
        _unpack_dequantize_kernel[(wire.shape[0],)](wire, out, dim, wire.stride(0), out.stride(0), BITS=bits,
                                                    PARAM_FP16=param_dtype == torch.float16, BLOCK=block,
                                                    enable_fp_fusion=False)  # fmt: skip
    return out
