"""Message quantization: the uniform codec's parameters, the seeded draws of each message, and the config mapping.

What a message is encoded with lives here; how it is encoded (which kernels, which layout) lives
in ``gnnq.comm.encoder``, and how the bytes travel in ``gnnq.comm.halo``.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass

import torch

from gnnq.comm.direction import Direction
from gnnq.comm.kernels import torch_codec
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


def stream_seed(*key) -> int:
    return int.from_bytes(hashlib.blake2b(repr(key).encode(), digest_size=8).digest(), "little") >> 1


@dataclass(frozen=True)
class NoiseKey:
    """Names one message's uniform draws: a generator per (seed, epoch, layer, direction, sender, receiver).

    So a run is reproducible and two ranks' messages are independent. ``direction`` is the plain
    string ("fwd", "bwd", "input"): it is part of the seed's text.
    """

    seed: int
    epoch: int
    layer: int
    direction: str
    sender: int

    def draws(self, counts: list[int], dim: int, device: torch.device) -> torch.Tensor:
        """Uniform [0, 1) draws for a send buffer whose rows go to peers in ``counts`` order."""
        parts = []
        for peer, rows in enumerate(counts):
            if rows:
                gen = torch.Generator(device=device)
                gen.manual_seed(stream_seed(self.seed, self.epoch, self.layer, self.direction, self.sender, peer))
                parts.append(torch.rand((rows, dim), generator=gen, device=device))
        return torch.cat(parts) if parts else torch.empty((0, dim), device=device)


@dataclass(frozen=True)
class GivenNoise:
    """Draws handed in whole (tests and benchmarks): ``draws`` returns ``values``, one row per message row."""

    values: torch.Tensor

    def draws(self, counts: list[int], dim: int, device: torch.device) -> torch.Tensor:
        if self.values.shape != (sum(counts), dim):
            raise ValueError(f"noise of shape {tuple(self.values.shape)} for {sum(counts)} rows of {dim}")
        return self.values


@dataclass(frozen=True)
class MessageQuantization:
    """Which messages are quantized (a codec per direction; None: exact fp32) and the seed of their draws.

    Read-only: the epoch of a message comes with the message, and per-row widths (quantizer=adaptive)
    are the assigner's (``gnnq.adaptive.assigner``).
    """

    forward: UniformCodec | None
    backward: UniformCodec | None
    inputs: UniformCodec | None
    seed: int
    rank: int = 0

    def codec(self, direction: Direction) -> UniformCodec | None:
        return {Direction.FORWARD: self.forward, Direction.BACKWARD: self.backward, Direction.INPUT: self.inputs}[direction]

    def noise_key(self, epoch: int, layer: int, direction: Direction) -> NoiseKey:
        return NoiseKey(self.seed, int(epoch), int(layer), Direction(direction).value, self.rank)

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
