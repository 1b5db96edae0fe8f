"""The codec kernels a message can run on, and the one place that chooses between them.

Every backend turns ``src[row_idx]`` and the rows' Philox streams (``philox.RowStreams``) into the
same wire rows, bit for bit (see torch_codec for the layout, philox for the draws): ``torch`` (plain torch ops, any
device), ``c`` (the fused
CPU codec, with a one-pass path for mixed-width messages) and ``triton`` (CUDA).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from gnnq.comm.kernels import c_codec, torch_codec


@dataclass(frozen=True)
class Kernels:
    """One backend's encode and decode of uniform-width wire rows (and, if it has one, of mixed-width buffers)."""

    name: str
    quantize_pack: Callable  # (src, row_idx, streams, bits, param_dtype) -> ((R, row_bytes) uint8, all rows finite)
    unpack_dequantize: Callable  # (wire, dim, bits, param_dtype, out=None) -> (R, dim) fp32: fresh, or out
    encode_mixed: Callable | None = None  # c_codec.encode_mixed's signature
    decode_mixed: Callable | None = None  # c_codec.decode_mixed's signature, out= as unpack_dequantize


TORCH = Kernels("torch", torch_codec.quantize_rows, torch_codec.unpack_dequantize)
C = Kernels("c", c_codec.quantize_pack, c_codec.unpack_dequantize, c_codec.encode_mixed, c_codec.decode_mixed)


def _triton(name: str) -> Callable:
    """triton_codec's ``name``, imported on first call: importing triton takes seconds that a CPU rank never needs."""

    def call(*args, **kwargs):
        from gnnq.comm.kernels import triton_codec

        return getattr(triton_codec, name)(*args, **kwargs)

    return call


TRITON = Kernels("triton", _triton("quantize_pack"), _triton("unpack_dequantize"))
BACKENDS = {k.name: k for k in (TORCH, C, TRITON)}


def kernels_for(device: torch.device | str) -> Kernels:
    """triton (CUDA, when installed), c (CPU, unless ``GNNQ_CPU_CODEC=torch`` or it cannot be built) or torch."""
    device = torch.device(device)
    if device.type == "cuda":
        from gnnq.comm.kernels import triton_codec

        return TRITON if triton_codec.triton_available() else TORCH
    return C if device.type == "cpu" and c_codec.enabled() else TORCH


def kernels_named(name: str) -> Kernels:
    if name not in BACKENDS:
        raise ValueError(f"unknown codec backend {name!r}; allowed: {', '.join(BACKENDS)}")
    return BACKENDS[name]
