"""Stochastic row-wise quantization in plain torch ops: the CPU path and the reference for C and Triton.

Wire row layout (uint8): [zero point][step][codes]. The two parameters are in the parameter
dtype (fp16: 2 bytes each, fp32: 4), little-endian; codes are packed along the feature
dimension, 8/b per byte, code j of a byte in bits [j*b, (j+1)*b), rows padded to whole bytes.

Encoding uses exactly the parameter values it sends: the zero point is rounded down and the
step up to the parameter dtype, so every value lies in [zero, zero + step * (2^b - 1)] and
stochastic rounding q = floor((x - zero) / step + u), u uniform in (0, 1), is unbiased for what is
decoded, zero + q * step. Codes are clamped to [0, 2^b - 1], so a row's maximum can never wrap.

No finite input decodes to a non-finite value:
- fp16 parameters overflow when a row's min is below -65504 (or at least 65520) or its step exceeds
  65504. Such a row falls back to bfloat16 parameters (fp32's range, 8 significant bits; still
  rounded down and up as above), flagged by the sign bit of the step field (a step is never
  negative): the row keeps its size, so every byte count stays ``row_bytes``.
- A row's min and max are clamped to +-2^126 before the parameters are computed, so the step
  (at most 2^127 / (2^b - 1)) and every decoded value stay finite in fp32; values beyond +-2^126
  saturate to the end codes.
"""

from __future__ import annotations

import torch

from gnnq.comm.kernels.philox import RowStreams, uniforms

BITS = (1, 2, 4, 8)
PARAM_DTYPES = {"fp16": torch.float16, "fp32": torch.float32}


def code_bytes(dim: int, bits: int) -> int:
    return (dim * bits + 7) // 8


def row_bytes(dim: int, bits: int, param_dtype: torch.dtype) -> int:
    return 2 * torch.finfo(param_dtype).bits // 8 + code_bytes(dim, bits)


LIMIT = 2.0**126  # rows' min and max are clamped to +-LIMIT (see above)
STEP_FLAG = -0x8000  # the sign bit of a 16-bit step field (as int16): bfloat16 parameters


def _step_toward(h: torch.Tensor, up: bool) -> torch.Tensor:
    """The next fp16 / bf16 value (``h``'s dtype) toward +inf (up) or -inf (down): sign-magnitude bit patterns."""
    b = h.view(torch.int16).to(torch.int32)
    neg = b < 0  # sign bit set
    if up:
        nxt = torch.where(neg, b - 1, b + 1)
        nxt = torch.where(b == -32768, torch.ones_like(b), nxt)  # -0 -> smallest positive subnormal
    else:
        nxt = torch.where(neg, b + 1, b - 1)
        nxt = torch.where(b == 0, torch.full_like(b, -32767), nxt)  # +0 -> smallest negative subnormal
    return nxt.to(torch.int16).view(h.dtype)


def _params16(mn: torch.Tensor, mx: torch.Tensor, levels: torch.Tensor, dtype: torch.dtype):
    """(zero rounded down, step rounded up, whether both fit) in the 16-bit ``dtype``; the step without its sign bit."""
    nearest = mn.to(dtype)
    zero = torch.where(nearest.float() > mn, _step_toward(nearest, up=False), nearest)
    step32 = (mx - zero.float()) / levels
    step = step32.to(dtype)
    step = torch.where(step.float() < step32, _step_toward(step, up=True), step)
    fits = torch.isfinite(nearest) & torch.isfinite(zero) & torch.isfinite(step)  # min beyond +-65504 or step beyond
    return zero, step.abs(), fits  # abs: a -0 step (mx = -0, zero = +0) must not read as the flag


def row_params(x: torch.Tensor, bits: int, param_dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-row (zero point, step) as sent: zero rounded down, step rounded up to ``param_dtype``.

    For fp16, rows whose parameters overflow fp16 get bfloat16 ones instead; both are returned as
    fp16 tensors holding the wire's bit patterns (``param_values`` reads them)."""
    mn, mx = torch.aminmax(x, dim=1)
    mn, mx = mn.clamp(-LIMIT, LIMIT), mx.clamp(-LIMIT, LIMIT)
    # A tensor divisor: on CUDA, torch divides by a Python scalar as a multiply by its reciprocal,
    # which rounds differently from the IEEE division that the CPU and the Triton kernel do.
    levels = torch.full_like(mn, (1 << bits) - 1)
    if param_dtype == torch.float32:
        return mn, (mx - mn) / levels
    zero, step, fits = _params16(mn, mx, levels, torch.float16)
    wide = ~fits
    if bool(wide.any()):
        zb, sb, _ = _params16(mn[wide], mx[wide], levels[wide], torch.bfloat16)
        # Bit patterns through int16: a bf16 pattern may be an fp16 NaN, which float copies may rewrite.
        zbits, sbits = zero.view(torch.int16).clone(), step.view(torch.int16).clone()
        zbits[wide], sbits[wide] = zb.view(torch.int16), sb.view(torch.int16) | STEP_FLAG
        zero, step = zbits.view(torch.float16), sbits.view(torch.float16)
    return zero, step


def param_values(zero: torch.Tensor, step: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The fp32 values of wire parameters (fp16 bit patterns may be flagged bfloat16 ones; fp32 are values)."""
    if zero.dtype == torch.float32:
        return zero, step
    sbits = step.view(torch.int16)
    wide = sbits < 0
    step_bits = (sbits & 0x7FFF).view(torch.float16)
    z = torch.where(wide, zero.view(torch.bfloat16).float(), zero.float())
    s = torch.where(wide, step_bits.view(torch.bfloat16).float(), step_bits.float())
    return z, s


def quantize_pack(x: torch.Tensor, noise: torch.Tensor, bits: int, param_dtype: torch.dtype) -> torch.Tensor:
    """Encode rows of ``x`` (R, D) fp32 with uniform draws ``noise`` (R, D) into wire rows (R, row_bytes)."""
    rows, dim = x.shape
    levels = (1 << bits) - 1
    pbytes = 2 * torch.finfo(param_dtype).bits // 8
    wire = torch.empty((rows, row_bytes(dim, bits, param_dtype)), dtype=torch.uint8, device=x.device)
    if rows == 0:
        return wire
    zero, step = row_params(x, bits, param_dtype)
    z, s = (v[:, None] for v in param_values(zero, step))
    scaled = torch.sub(x, z).div_(torch.where(s > 0, s, torch.ones_like(s))).add_(noise).floor_().clamp_(0, levels)
    codes = scaled.to(torch.uint8)
    params = (
        torch.stack([zero.view(torch.int16), step.view(torch.int16)], dim=1)
        if pbytes == 4
        else torch.stack([zero, step], dim=1)
    )
    wire[:, :pbytes] = params.contiguous().view(torch.uint8).view(rows, pbytes)
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


def all_finite(x: torch.Tensor) -> bool:
    # A finite sum (one read, no mask) proves every value finite; an overflowing one falls through to the exact check.
    return x.numel() == 0 or bool(torch.isfinite(x.sum())) or bool(torch.isfinite(x).all())


def quantize_rows(
    src: torch.Tensor, row_idx: torch.Tensor, streams: RowStreams, bits: int, param_dtype: torch.dtype
) -> tuple[torch.Tensor, bool]:
    """Wire rows of ``src[row_idx]`` on the Philox draws of ``streams``, and whether those rows were all finite."""
    x = src.index_select(0, row_idx).float()
    return quantize_pack(x, uniforms(streams, x.shape[1]), bits, param_dtype), all_finite(x)


def unpack_dequantize(
    wire: torch.Tensor, dim: int, bits: int, param_dtype: torch.dtype, out: torch.Tensor | None = None
) -> torch.Tensor:
    """Decode wire rows (R, row_bytes) into fp32 rows (R, dim): a fresh tensor, or ``out`` (``check_out``'s rules)."""
    rows = wire.shape[0]
    pbytes = 2 * torch.finfo(param_dtype).bits // 8
    out = check_out(out, rows, dim, wire.device)
    if rows == 0 or dim == 0:
        return out
    # A fresh row-major copy: views of a 1-row slice keep the wire's stride, which .view() rejects.
    params = torch.empty((rows, pbytes), dtype=torch.uint8, device=wire.device).copy_(wire[:, :pbytes])
    zero, step = param_values(*params.view(param_dtype).unbind(1))
    per_byte = 8 // bits
    packed = wire[:, pbytes:]
    if per_byte == 1:
        codes = packed
    else:
        mask = (1 << bits) - 1
        codes = torch.stack([(packed >> (j * bits)) & mask for j in range(per_byte)], dim=2).view(rows, -1)[:, :dim]
    # Two roundings, as C and Triton: not addcmul (a fused multiply-add rounds differently).
    return torch.mul(codes, step[:, None], out=out).add_(zero[:, None])


def check_out(out: torch.Tensor | None, rows: int, dim: int, device: torch.device) -> torch.Tensor:
    """The decode's destination: ``out`` if given (fp32, (rows, dim), rows contiguous: a row range of a
    bigger buffer will do), else a fresh (rows, dim) fp32 tensor on ``device``."""
    if out is None:
        return torch.empty((rows, dim), dtype=torch.float32, device=device)
    if (
        out.dtype != torch.float32
        or tuple(out.shape) != (rows, dim)
        or not out.is_contiguous()
        or out.device != torch.device(device)
    ):
        raise ValueError(
            f"out must be a contiguous fp32 ({rows}, {dim}) tensor on {device}, not {out.dtype} "
            f"{tuple(out.shape)} on {out.device}"
        )
    return out
