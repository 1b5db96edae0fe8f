"""Stochastic row-wise quantization in plain torch ops: the CPU path and the reference for Triton.

Wire row layout (uint8): [zero point][step][codes]. The two parameters are in the parameter
dtype (fp16: 2 bytes each, fp32: 4), little-endian; codes are packed along the feature
dimension, 8/b per byte, code j of a byte in bits [j*b, (j+1)*b), rows padded to whole bytes.

Encoding uses exactly the parameter values it sends: the zero point is rounded down and the
step up to the parameter dtype, so every value lies in [zero, zero + step * (2^b - 1)] and
stochastic rounding q = floor((x - zero) / step + u), u ~ U[0, 1), is unbiased for what is
decoded, zero + q * step. Codes are clamped to [0, 2^b - 1], so a row's maximum can never wrap.
"""

from __future__ import annotations

import torch

BITS = (1, 2, 4, 8)
PARAM_DTYPES = {"fp16": torch.float16, "fp32": torch.float32}


def code_bytes(dim: int, bits: int) -> int:
    return (dim * bits + 7) // 8


def row_bytes(dim: int, bits: int, param_dtype: torch.dtype) -> int:
    return 2 * torch.finfo(param_dtype).bits // 8 + code_bytes(dim, bits)


def _fp16_step_toward(h: torch.Tensor, up: bool) -> torch.Tensor:
    """The next fp16 value toward +inf (up) or -inf (down)."""
    b = h.view(torch.int16).to(torch.int32)
    neg = b < 0  # sign bit set
    if up:
        nxt = torch.where(neg, b - 1, b + 1)
        nxt = torch.where(b == -32768, torch.ones_like(b), nxt)  # -0 -> smallest positive subnormal
    else:
        nxt = torch.where(neg, b + 1, b - 1)
        nxt = torch.where(b == 0, torch.full_like(b, -32767), nxt)  # +0 -> smallest negative subnormal
    return nxt.to(torch.int16).view(torch.float16)


def row_params(x: torch.Tensor, bits: int, param_dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-row (zero point, step) as sent: zero rounded down, step rounded up to ``param_dtype``."""
    mn, mx = torch.aminmax(x, dim=1)
    # A tensor divisor: on CUDA, torch divides by a Python scalar as a multiply by its reciprocal,
    # which rounds differently from the IEEE division that the CPU and the Triton kernel do.
    levels = torch.full_like(mn, (1 << bits) - 1)
    if param_dtype == torch.float32:
        return mn, (mx - mn) / levels
    zero = mn.to(torch.float16)
    zero = torch.where(zero.float() > mn, _fp16_step_toward(zero, up=False), zero)
    step32 = (mx - zero.float()) / levels
    step = step32.to(torch.float16)
    step = torch.where(step.float() < step32, _fp16_step_toward(step, up=True), step)
    return zero, step


def quantize_pack(x: torch.Tensor, noise: torch.Tensor, bits: int, param_dtype: torch.dtype) -> torch.Tensor:
    """Encode rows of ``x`` (R, D) fp32 with uniform draws ``noise`` (R, D) into wire rows (R, row_bytes)."""
    rows, dim = x.shape
    levels = (1 << bits) - 1
    pbytes = 2 * torch.finfo(param_dtype).bits // 8
    wire = torch.empty((rows, row_bytes(dim, bits, param_dtype)), dtype=torch.uint8, device=x.device)
    if rows == 0:
        return wire
    zero, step = row_params(x, bits, param_dtype)
    z, s = zero.float()[:, None], step.float()[:, None]
    scaled = torch.sub(x, z).div_(torch.where(s > 0, s, torch.ones_like(s))).add_(noise).floor_().clamp_(0, levels)
    codes = scaled.to(torch.uint8)
    wire[:, :pbytes] = torch.stack([zero, step], dim=1).contiguous().view(torch.uint8).view(rows, pbytes)
    per_byte = 8 // bits
    if per_byte == 1:
        wire[:, pbytes:] = codes
        return wire
    pad = (-dim) % per_byte
    if pad:
        codes = torch.nn.functional.pad(codes, (0, pad))
    codes = codes.view(rows, -1, per_byte)
    packed = codes[:, :, 0].clone()
    for j in range(1, per_byte):
        packed |= codes[:, :, j] << (j * bits)
    wire[:, pbytes:] = packed
    return wire


def unpack_dequantize(wire: torch.Tensor, dim: int, bits: int, param_dtype: torch.dtype) -> torch.Tensor:
    """Decode wire rows (R, row_bytes) into fp32 rows (R, dim)."""
    rows = wire.shape[0]
    pbytes = 2 * torch.finfo(param_dtype).bits // 8
    if rows == 0:
        return torch.empty((0, dim), dtype=torch.float32, device=wire.device)
    # A fresh row-major copy: views of a 1-row slice keep the wire's stride, which .view() rejects.
    params = torch.empty((rows, pbytes), dtype=torch.uint8, device=wire.device).copy_(wire[:, :pbytes])
    params = params.view(param_dtype).float()
    per_byte = 8 // bits
    packed = wire[:, pbytes:]
    if per_byte == 1:
        codes = packed.float()
    else:
        mask = (1 << bits) - 1
        codes = torch.stack([(packed >> (j * bits)) & mask for j in range(per_byte)], dim=2)
        codes = codes.view(rows, -1)[:, :dim].float()
    return codes.mul_(params[:, 1:2]).add_(params[:, :1])  # not addcmul: a fused multiply-add rounds differently
