"""Message quantization for the exchange layer: codecs, their seeded draws, and the config mapping."""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass, field

import torch

from gnnq.comm.kernels import c_codec, torch_codec, triton_codec
from gnnq.errors import GnnqError

PARAM_DTYPES = torch_codec.PARAM_DTYPES


class NonFiniteMessageError(GnnqError):
    """A message to be quantized holds NaN or inf."""


@dataclass(frozen=True)
class UniformCodec:
    """Stochastic rounding to ``bits`` per value with per-row zero point and step (see torch_codec)."""

    bits: int
    param_dtype: torch.dtype
    nonfinite: str = "error"  # error | zero

    def at_bits(self, bits: int) -> "UniformCodec":
        """The same codec at another width."""
        return self if bits == self.bits else dataclasses.replace(self, bits=bits)

    def row_bytes(self, dim: int) -> int:
        return torch_codec.row_bytes(dim, self.bits, self.param_dtype)

    @staticmethod
    def backend(t: torch.Tensor) -> str:
        """triton (CUDA), c (CPU, see c_codec) or torch: what encodes and decodes ``t``'s messages."""
        if t.is_cuda:
            return "triton" if triton_codec.triton_available() else "torch"
        return "c" if t.device.type == "cpu" and c_codec.enabled() else "torch"

    def check_finite(self, src: torch.Tensor, what: str) -> tuple[torch.Tensor, int]:
        """``src`` with NaN/inf zeroed (or an error, per ``nonfinite``) and how many were zeroed."""
        # A finite sum (one read, no mask) proves every value finite; an overflowing one falls through to the exact check.
        if src.numel() == 0 or bool(torch.isfinite(src.sum())) or bool(torch.isfinite(src).all()):
            return src, 0
        if self.nonfinite == "error":
            raise NonFiniteMessageError(
                f"non-finite values (NaN/inf) in the {what} message; set quantizer.nonfinite=zero to zero and count them"
            )
        zeroed = int((~torch.isfinite(src)).sum())
        return torch.nan_to_num(src, nan=0.0, posinf=0.0, neginf=0.0), zeroed

    def encode(self, src: torch.Tensor, row_idx: torch.Tensor, noise: torch.Tensor, what: str) -> tuple[torch.Tensor, int]:
        """Wire rows for ``src[row_idx]``; returns them and the number of non-finite values zeroed."""
        src, zeroed = self.check_finite(src, what)
        src = src.float()
        backend = self.backend(src)
        if backend == "triton":
            return triton_codec.quantize_pack(src, row_idx, noise, self.bits, self.param_dtype), zeroed
        if backend == "c":
            return c_codec.quantize_pack(src, row_idx, noise, self.bits, self.param_dtype), zeroed
        return torch_codec.quantize_pack(src.index_select(0, row_idx), noise, self.bits, self.param_dtype), zeroed

    def decode(self, wire: torch.Tensor, dim: int) -> torch.Tensor:
        backend = self.backend(wire)
        if backend == "triton":
            return triton_codec.unpack_dequantize(wire, dim, self.bits, self.param_dtype)
        if backend == "c":
            return c_codec.unpack_dequantize(wire, dim, self.bits, self.param_dtype)
        return torch_codec.unpack_dequantize(wire, dim, self.bits, self.param_dtype)


def stream_seed(*key) -> int:
    return int.from_bytes(hashlib.blake2b(repr(key).encode(), digest_size=8).digest(), "little") >> 1


@dataclass
class MessageQuantization:
    """Which messages are quantized, and the seeded uniform draws for each of them.

    Draws come from a generator per (seed, epoch, layer, direction, sender, receiver), so a
    run is reproducible and two ranks' messages are independent. An adaptive assignment
    sets ``layouts``: per-row widths of each (layer, direction) message; while ``tracing``
    is on, the per-row ranges (max - min) of the training messages sent are kept in ``ranges``.
    """

    forward: UniformCodec | None
    backward: UniformCodec | None
    inputs: UniformCodec | None
    seed: int
    rank: int = 0
    epoch: int = 0
    layouts: dict = field(default_factory=dict)
    tracing: bool = False
    ranges: dict = field(default_factory=dict)

    def codec(self, direction: str) -> UniformCodec | None:
        return {"fwd": self.forward, "bwd": self.backward, "input": self.inputs}[direction]

    def layout(self, layer: int, direction: str):
        return self.layouts.get((layer, direction))

    def observe(self, layer: int, direction: str, src: torch.Tensor, rows: torch.Tensor) -> None:
        """Keep the row ranges of a training message (only while tracing)."""
        if self.tracing and rows.numel():
            mn, mx = torch.aminmax(src.detach().index_select(0, rows).float(), dim=1)
            self.ranges[(layer, direction)] = (mx - mn).nan_to_num(0.0, 0.0, 0.0).cpu()

    def noise(self, counts: list[int], dim: int, layer: int, direction: str, device: torch.device) -> torch.Tensor:
        """Uniform [0, 1) draws for a send buffer whose rows go to peers in ``counts`` order."""
        parts = []
        for peer, rows in enumerate(counts):
            if rows:
                gen = torch.Generator(device=device)
                gen.manual_seed(stream_seed(self.seed, self.epoch, layer, direction, self.rank, peer))
                parts.append(torch.rand((rows, dim), generator=gen, device=device))
        return torch.cat(parts) if parts else torch.empty((0, dim), device=device)

    def state_dict(self) -> dict:
        """What a resumed run needs: the adaptive layouts and the ranges traced so far.

        The uniform draws need nothing: they are seeded per (epoch, layer, direction, sender, receiver)."""
        return {
            "layouts": [{"layer": k[0], "direction": k[1], **v.state_dict()} for k, v in sorted(self.layouts.items())],
            "ranges": [{"layer": k[0], "direction": k[1], "ranges": v} for k, v in sorted(self.ranges.items())],
        }

    def load_state_dict(self, state: dict) -> None:
        from gnnq.comm.wire_layout import WireLayout

        self.layouts = {(e["layer"], e["direction"]): WireLayout.from_state_dict(e) for e in state["layouts"]}
        self.ranges = {(e["layer"], e["direction"]): e["ranges"] for e in state["ranges"]}

    def describe(self) -> dict:
        def bits(c):
            return c.bits if c is not None else 32

        return {"forward_bits": bits(self.forward), "backward_bits": bits(self.backward), "input_bits": bits(self.inputs)}


def message_quantization(qcfg, seed: int, rank: int) -> MessageQuantization | None:
    """Map ``quantizer.*`` to a MessageQuantization (None for exact fp32 messages)."""
    if qcfg.name == "fp32":
        return None
    param_dtype = PARAM_DTYPES[qcfg.param_dtype]
    fwd = UniformCodec(qcfg.bits, param_dtype, qcfg.nonfinite)
    grad_bits = qcfg.bits if qcfg.grad_bits is None else qcfg.grad_bits
    bwd = None if grad_bits == 32 else UniformCodec(grad_bits, param_dtype, qcfg.nonfinite)
    inputs = fwd if qcfg.quantize_input else None
    return MessageQuantization(fwd, bwd, inputs, seed, rank)
