"""Triton kernels for the GPU path, bit-identical to ``torch_codec`` (and to the C codec).

``quantize_pack``: a program encodes a few sent rows (``TILE`` values at a time) in one pass: it gathers each
row from the source embedding (no separate index_select), finds its min/max (and whether it holds NaN or inf),
rounds the parameters exactly as ``torch_codec.row_params`` does (fp16, or flagged bfloat16 where fp16
overflows), draws its uniforms inline with ``tl.philox`` (Philox4x32 with ``philox.ROUNDS`` rounds), quantizes
and packs 8/b codes per byte into the wire row. The tile is laid out as (Philox calls, 8): one call's four words
give the draws of 8 columns (``philox.py``'s mapping), so a draw costs an eighth of a Philox call, and the
row stays in registers between its min/max and its codes (rows longer than ``MAX_CHUNK`` are read twice).
``unpack_dequantize``: a program reads a few received rows' parameters and code bytes, a (bytes, 8/b) tile
at a time, and writes fp32 values into the destination buffer. Bit-identity with torch needs IEEE arithmetic:
divisions are ``tl.div_rn`` (Triton's ``/`` on fp32 is an approximate division on NVIDIA GPUs) and both
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
    def _store_param(ptr, value, mask):
        """An fp32 parameter, little-endian."""
        b = value.to(tl.int32, bitcast=True)
        tl.store(ptr, (b & 0xFF).to(tl.uint8), mask=mask)
        tl.store(ptr + 1, ((b >> 8) & 0xFF).to(tl.uint8), mask=mask)
        tl.store(ptr + 2, ((b >> 16) & 0xFF).to(tl.uint8), mask=mask)
        tl.store(ptr + 3, ((b >> 24) & 0xFF).to(tl.uint8), mask=mask)

    @triton.jit
    def _load_param(ptr, mask):
        b = (
            tl.load(ptr, mask=mask, other=0).to(tl.int32)
            | (tl.load(ptr + 1, mask=mask, other=0).to(tl.int32) << 8)
            | (tl.load(ptr + 2, mask=mask, other=0).to(tl.int32) << 16)
            | (tl.load(ptr + 3, mask=mask, other=0).to(tl.int32) << 24)
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
    def _per_row(x, ROWS: tl.constexpr, CALLS: tl.constexpr, OP: tl.constexpr):
        """Reduce a (ROWS * CALLS, 8) tile per row (min 0, max 1, sum 2), broadcast back as (ROWS * CALLS, 1)."""
        x = tl.reshape(x, [ROWS, CALLS * 8])
        if OP == 0:
            r = tl.min(x, axis=1)
        elif OP == 1:
            r = tl.max(x, axis=1)
        else:
            r = tl.sum(x, axis=1)
        return tl.reshape(tl.broadcast_to(r[:, None], [ROWS, CALLS]), [ROWS * CALLS, 1])

    @triton.jit
    def _tile_cols(start, k):
        """Columns of a (T, 8) tile: tile row t holds Philox call k (of its row) and its 8 columns (philox.py)."""
        m = tl.arange(0, 8)[None, :]
        return start + (k >> 3) * 64 + (k & 7) + 8 * m

    @triton.jit
    def _chunk_draws(key, r0, r1, call, ROUNDS: tl.constexpr):
        """The (T, 8) draws of Philox calls ``call`` (T, 1): one Philox call per 8 columns, as philox.py maps them."""
        zero = tl.zeros_like(call)
        w0, w1, w2, w3 = tl.philox(
            key, call.to(tl.uint32), r0 + zero.to(tl.uint32), r1 + zero.to(tl.uint32), zero.to(tl.uint32), ROUNDS
        )
        m = tl.arange(0, 8)[None, :]
        word = m & 3
        w = tl.where(word == 0, w0, tl.where(word == 1, w1, tl.where(word == 2, w2, w3)))
        u16 = ((w >> ((m >> 2) * 16).to(tl.uint32)) & 0xFFFF).to(tl.int32)
        return (u16 * 2 + 1).to(tl.float32) * 7.62939453125e-06  # 2^-17

    @triton.jit
    def _encode_chunk(
        v,
        cols,
        ok,
        u,
        zero,
        denom,
        k,
        start,
        first_row,
        rows,
        out_ptr,
        out_stride,
        num_code_bytes,
        BITS: tl.constexpr,
        PB: tl.constexpr,
        CALLS: tl.constexpr,
        T: tl.constexpr,
    ):
        """Quantize a (T, 8) tile (as ``_tile_cols`` lays it out) and store its packed bytes: code j of a byte is
        column 8/BITS * byte + j, and consecutive tile rows hold consecutive columns (k & 7)."""
        LEVELS: tl.constexpr = (1 << BITS) - 1
        PER_BYTE: tl.constexpr = 8 // BITS
        q = tl.floor(tl.div_rn(v - zero, denom) + u)
        q = tl.minimum(tl.maximum(q, 0.0), LEVELS)
        q = tl.where(ok, q, 0.0).to(tl.int32) << ((k % PER_BYTE) * BITS)
        if PER_BYTE > 1:  # PER_BYTE consecutive tile rows make one byte: disjoint bits, so their sum is their OR
            q = tl.sum(tl.reshape(q, [T // PER_BYTE, PER_BYTE, 8]), axis=1)
        tt = tl.arange(0, T // PER_BYTE)[:, None] * PER_BYTE  # the first tile row of each byte
        row = first_row + tt // CALLS
        byte = _tile_cols(start, tt % CALLS) // PER_BYTE
        dest = out_ptr + row.to(tl.int64) * out_stride + PB + byte
        tl.store(dest, q.to(tl.uint8), mask=(byte < num_code_bytes) & (row < rows))

    @triton.jit
    def _quantize_pack_kernel(
        src_ptr,
        idx_ptr,
        keys_ptr,
        index_ptr,
        out_ptr,
        bad_ptr,
        rows,
        dim,
        src_stride,
        out_stride,
        num_code_bytes,
        BITS: tl.constexpr,
        PARAM_FP16: tl.constexpr,
        CALLS: tl.constexpr,
        ROWS: tl.constexpr,
        ONE_CHUNK: tl.constexpr,
        ROUNDS: tl.constexpr,
    ):
        """ROWS rows per program; a row in chunks of CALLS * 8 columns, a (ROWS * CALLS, 8) tile per chunk."""
        T: tl.constexpr = ROWS * CALLS
        CHUNK: tl.constexpr = CALLS * 8
        t = tl.arange(0, T)[:, None]
        k = t % CALLS  # the tile row's Philox call within the chunk
        first_row = tl.program_id(0) * ROWS
        row = first_row + t // CALLS
        row_ok = row < rows
        src = src_ptr + tl.load(idx_ptr + row, mask=row_ok, other=0).to(tl.int64) * src_stride
        lo = tl.full((T, 1), float("inf"), tl.float32)
        hi = tl.full((T, 1), float("-inf"), tl.float32)
        nz = tl.zeros((T, 1), tl.float32)
        first_zero = tl.full((T, 1), dim, tl.int32)
        if ONE_CHUNK:  # the whole row in one tile: read once, kept in registers
            cols = _tile_cols(0, k)
            ok = (cols < dim) & row_ok
            v = tl.load(src + cols, mask=ok, other=0.0)
            lo = _per_row(tl.where(ok, v, float("inf")), ROWS, CALLS, 0)
            hi = _per_row(tl.where(ok, v, float("-inf")), ROWS, CALLS, 1)
            nz = _per_row(v - v, ROWS, CALLS, 2)  # NaN from NaN or inf
            first_zero = _per_row(tl.where(ok & (v == 0.0), cols, dim), ROWS, CALLS, 0)
        else:
            for start in range(0, dim, CHUNK):
                cols = _tile_cols(start, k)
                ok = (cols < dim) & row_ok
                v = tl.load(src + cols, mask=ok, other=0.0)
                lo = tl.minimum(lo, _per_row(tl.where(ok, v, float("inf")), ROWS, CALLS, 0))
                hi = tl.maximum(hi, _per_row(tl.where(ok, v, float("-inf")), ROWS, CALLS, 1))
                nz += _per_row(v - v, ROWS, CALLS, 2)
                first_zero = tl.minimum(first_zero, _per_row(tl.where(ok & (v == 0.0), cols, dim), ROWS, CALLS, 0))
        head = row_ok & (k == 0)  # one tile row per row writes the row's parameters and flag
        tl.store(bad_ptr + row, (nz != nz).to(tl.int8), mask=head)
        # torch.aminmax keeps the first of equal values: a 0 min or max has the sign of the row's first zero.
        signed_zero = tl.load(src + first_zero, mask=(first_zero < dim) & row_ok, other=0.0)
        lo = tl.where(lo == 0.0, signed_zero, lo)
        hi = tl.where(hi == 0.0, signed_zero, hi)
        LIMIT: tl.constexpr = 2.0**126
        mn = tl.minimum(tl.maximum(lo, -LIMIT), LIMIT)
        mx = tl.minimum(tl.maximum(hi, -LIMIT), LIMIT)
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
            tl.store(out, (zb & 0xFF).to(tl.uint8), mask=head)
            tl.store(out + 1, ((zb >> 8) & 0xFF).to(tl.uint8), mask=head)
            tl.store(out + 2, (sb & 0xFF).to(tl.uint8), mask=head)
            tl.store(out + 3, ((sb >> 8) & 0xFF).to(tl.uint8), mask=head)
            PB: tl.constexpr = 4
        else:
            zero = mn
            step = tl.div_rn(mx - mn, LEVELS * 1.0)
            _store_param(out, zero, head)
            _store_param(out + 4, step, head)
            PB: tl.constexpr = 8
        denom = tl.where(step > 0, step, 1.0)
        key = tl.load(keys_ptr + row, mask=row_ok, other=0)
        ridx = tl.load(index_ptr + row, mask=row_ok, other=0)
        r0 = (ridx & 0xFFFFFFFF).to(tl.uint32)
        r1 = ((ridx >> 32) & 0xFFFFFFFF).to(tl.uint32)
        if ONE_CHUNK:
            u = _chunk_draws(key, r0, r1, k, ROUNDS)
            _encode_chunk(
                v,
                cols,
                ok,
                u,
                zero,
                denom,
                k,
                0,
                first_row,
                rows,
                out_ptr,
                out_stride,
                num_code_bytes,
                BITS,
                PB,
                CALLS,
                T,
            )
        else:
            for start in range(0, dim, CHUNK):
                cols = _tile_cols(start, k)
                ok = (cols < dim) & row_ok
                v = tl.load(src + cols, mask=ok, other=0.0)
                u = _chunk_draws(key, r0, r1, start // 8 + k, ROUNDS)
                _encode_chunk(
                    v,
                    cols,
                    ok,
                    u,
                    zero,
                    denom,
                    k,
                    start,
                    first_row,
                    rows,
                    out_ptr,
                    out_stride,
                    num_code_bytes,
                    BITS,
                    PB,
                    CALLS,
                    T,
                )

    @triton.jit
    def _unpack_dequantize_kernel(
        wire_ptr,
        out_ptr,
        rows,
        dim,
        num_code_bytes,
        wire_stride,
        out_stride,
        BITS: tl.constexpr,
        PARAM_FP16: tl.constexpr,
        BYTES: tl.constexpr,
        ROWS: tl.constexpr,
    ):
        """ROWS rows per program; a row in chunks of BYTES code bytes, a (ROWS * BYTES, 8 / BITS) tile per chunk."""
        T: tl.constexpr = ROWS * BYTES
        PER_BYTE: tl.constexpr = 8 // BITS
        MASK: tl.constexpr = (1 << BITS) - 1
        t = tl.arange(0, T)[:, None]
        j = tl.arange(0, PER_BYTE)[None, :]
        row = tl.program_id(0) * ROWS + t // BYTES
        row_ok = row < rows
        wire = wire_ptr + row.to(tl.int64) * wire_stride
        if PARAM_FP16:
            PB: tl.constexpr = 4
            zb = tl.load(wire, mask=row_ok, other=0).to(tl.int32) | (
                tl.load(wire + 1, mask=row_ok, other=0).to(tl.int32) << 8
            )
            sb = tl.load(wire + 2, mask=row_ok, other=0).to(tl.int32) | (
                tl.load(wire + 3, mask=row_ok, other=0).to(tl.int32) << 8
            )
            wide = sb >= 0x8000  # flagged: bfloat16 parameters
            sb = sb & 0x7FFF
            zero = tl.where(wide, _bf16_value(zb), _f16_value(zb))
            step = tl.where(wide, _bf16_value(sb), _f16_value(sb))
        else:
            PB: tl.constexpr = 8
            zero = _load_param(wire, row_ok)
            step = _load_param(wire + 4, row_ok)
        out = out_ptr + row.to(tl.int64) * out_stride
        for start in range(0, num_code_bytes, BYTES):
            byte = start + t % BYTES
            byte_ok = (byte < num_code_bytes) & row_ok
            packed = tl.load(wire + PB + byte, mask=byte_ok, other=0).to(tl.int32)
            code = (packed >> (j * BITS)) & MASK
            cols = byte * PER_BYTE + j
            tl.store(out + cols, zero + code.to(tl.float32) * step, mask=(cols < dim) & byte_ok)


TILE = 1024  # values per program's tile: rows per program = TILE // columns per chunk (at least 1)
MAX_CHUNK = 2048  # columns of a row held at once; a longer row is read twice (min/max, then codes), in chunks


def _pow2_at_least(n: int) -> int:
    return 1 << max(0, n - 1).bit_length()


def _chunk_columns(dim: int, block: int | None) -> int:
    """Columns per chunk: a multiple of 64 and a power of two (``block``, or the whole row up to MAX_CHUNK)."""
    cols = block if block is not None else min(_pow2_at_least(-(-dim // 64) * 64), MAX_CHUNK)
    if cols < 64 or cols & (cols - 1):
        raise ValueError(f"block={cols}: columns per chunk must be a power of two of at least 64")
    return cols


def _rows_per_program(chunk: int, rows_per_program: int | None) -> int:
    per_program = rows_per_program or max(1, TILE // chunk)
    if per_program & (per_program - 1):
        raise ValueError(f"rows_per_program={per_program}: must be a power of two")
    return per_program


def quantize_pack(
    src: torch.Tensor,
    row_idx: torch.Tensor,
    streams: RowStreams,
    bits: int,
    param_dtype: torch.dtype,
    block: int | None = None,
    rows_per_program: int | None = None,
    num_warps: int = 4,
) -> tuple[torch.Tensor, bool]:
    """Wire rows for ``src[row_idx]`` (gathered inside the kernel) on the Philox streams of ``streams``; whether all
    finite. ``block`` (columns per chunk), ``rows_per_program`` and ``num_warps`` tune the tiling, never the bytes."""
    dim = src.shape[1]
    rows = row_idx.numel()
    out = torch.empty((rows, row_bytes(dim, bits, param_dtype)), dtype=torch.uint8, device=src.device)
    if not rows:
        return out, True
    if len(streams) != rows:
        raise ValueError(f"{len(streams)} noise streams for {rows} rows")
    bad = torch.empty(rows, dtype=torch.int8, device=src.device)
    src = src.float().contiguous()
    chunk = _chunk_columns(dim, block)
    per_program = _rows_per_program(chunk, rows_per_program)
    _quantize_pack_kernel[(triton.cdiv(rows, per_program),)](
        src,
        row_idx,
        streams.keys.contiguous(),
        streams.index.contiguous(),
        out,
        bad,
        rows,
        dim,
        src.stride(0),
        out.stride(0),
        code_bytes(dim, bits),
        BITS=bits,
        PARAM_FP16=param_dtype == torch.float16,
        CALLS=chunk // 8,
        ROWS=per_program,
        ONE_CHUNK=dim <= chunk,
        ROUNDS=ROUNDS,
        enable_fp_fusion=False,
        num_warps=num_warps,
    )
    return out, not bool(bad.any())


def unpack_dequantize(
    wire: torch.Tensor,
    dim: int,
    bits: int,
    param_dtype: torch.dtype,
    out: torch.Tensor | None = None,
    block: int | None = None,
    rows_per_program: int | None = None,
    num_warps: int = 4,
) -> torch.Tensor:
    """``torch_codec.unpack_dequantize``: into a fresh tensor, or ``out`` (``torch_codec.check_out``). The tiling
    (``block`` columns per chunk, ``rows_per_program``, ``num_warps``) changes no value."""
    out = check_out(out, wire.shape[0], dim, wire.device)
    rows = wire.shape[0]
    if rows and dim:
        wire = wire.contiguous()
        chunk = _chunk_columns(dim, block)
        per_program = _rows_per_program(chunk, rows_per_program)
        _unpack_dequantize_kernel[(triton.cdiv(rows, per_program),)](
            wire,
            out,
            rows,
            dim,
            code_bytes(dim, bits),
            wire.stride(0),
            out.stride(0),
            BITS=bits,
            PARAM_FP16=param_dtype == torch.float16,
            BYTES=chunk * bits // 8,
            ROWS=per_program,
            enable_fp_fusion=False,
            num_warps=num_warps,
        )
    return out
