"""Message quantization: the uniform codec's parameters, the noise key of each message, and the codec families.

What a message is encoded with lives here; how it is encoded (which kernels, which layout) lives
in ``gnnq.comm.encoder``, and how the bytes travel in ``gnnq.comm.halo``. A codec family is the class a
``quantizer`` choice names (gnnq.config.registry.QUANTIZERS): ``Fp32Messages``, ``UniformMessages``,
``AdaptiveMessages`` here, ``gnnq.comm.grid_codec.GridMessages`` for pdADMM-G-Q. Each builds its
messages' quantization from ``quantizer.*`` (``from_config``), declares its ``resources``, and says which
encoder a message gets (``encoder``: the exchange asks, it names no encoder itself).
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass

import torch

from gnnq.comm.direction import Direction
from gnnq.comm.encoder import MixedWidthEncoder, UniformEncoder
from gnnq.comm.kernels import torch_codec
from gnnq.comm.kernels.backends import Kernels
from gnnq.comm.kernels.philox import RowStreams
from gnnq.comm.wire_layout import WireLayout
from gnnq.config.registry import QUANTIZERS
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

    def without_nonfinite(
        self, src: torch.Tensor, rows: torch.Tensor, what: str
    ) -> tuple[torch.Tensor, torch.Tensor, int]:
        """For a message whose rows ``src[rows]`` hold NaN/inf: an error (``nonfinite=error``), or those rows
        with NaN/inf zeroed (as a new source, and its row index) and how many values of ``src`` were zeroed."""
        if self.nonfinite == "error":
            raise NonFiniteMessageError(
                f"non-finite values (NaN/inf) in the {what} message; set quantizer.nonfinite=zero to zero and "
                "count them"
            )
        zeroed = int((~torch.isfinite(src.index_select(0, rows.unique()))).sum())  # each sent value once
        clean = torch.nan_to_num(src.index_select(0, rows), nan=0.0, posinf=0.0, neginf=0.0)
        return clean, torch.arange(rows.numel(), device=rows.device), zeroed


def stream_seed(*key) -> int:
    return int.from_bytes(hashlib.blake2b(repr(key).encode(), digest_size=8).digest(), "little") >> 1


@dataclass(frozen=True)
class NoiseKey:
    """Names one message's uniform draws: a Philox stream per (seed, epoch, layer, direction, sender, receiver).

    So a run is reproducible and two ranks' messages are independent. ``direction`` is the plain
    string ("fwd", "bwd", "input"): it is part of the key's text. The codec kernels compute the
    draws themselves from each row's stream and index (``gnnq.comm.kernels.philox``).
    """

    seed: int
    epoch: int
    layer: int
    direction: str
    sender: int

    def stream_key(self, receiver: int) -> int:
        return stream_seed(self.seed, self.epoch, self.layer, self.direction, self.sender, receiver)

    def streams(self, counts: list[int], device: torch.device | str) -> RowStreams:
        """The streams of a send buffer whose rows go to peers in ``counts`` order."""
        return RowStreams.of_blocks([self.stream_key(q) for q in range(len(counts))], counts, device)


class UniformMessages:
    """quantizer=uniform: every training message at one width per direction (``UniformCodec``)."""

    @classmethod
    def from_config(cls, qcfg, seed: int, rank: int) -> "MessageQuantization":
        param_dtype = PARAM_DTYPES[qcfg.param_dtype]
        fwd = UniformCodec(qcfg.bits, param_dtype, qcfg.nonfinite)
        grad_bits = qcfg.bits if qcfg.grad_bits is None else qcfg.grad_bits
        bwd = None if grad_bits == 32 else UniformCodec(grad_bits, param_dtype, qcfg.nonfinite)
        inputs = fwd if qcfg.quantize_input else None
        return MessageQuantization(fwd, bwd, inputs, seed, rank, family=cls)

    @staticmethod
    def encoder(codec: UniformCodec, kernels: Kernels, layout: WireLayout | None):
        """The encoder of one message: the codec's rows back to back, or, where the exchange's row widths give
        the message a layout (quantizer=adaptive), rows at the layout's widths."""
        return UniformEncoder(codec, kernels) if layout is None else MixedWidthEncoder(codec, kernels, layout)


class AdaptiveMessages(UniformMessages):
    """quantizer=adaptive (AdaQP): the uniform codec until the assigner (gnnq.adaptive) gives the exchange per-row
    widths; then each training message follows its layer's and direction's ``WireLayout``."""


class Fp32Messages:
    """quantizer=fp32: exact fp32 rows, no codec (``from_config`` gives None)."""

    @classmethod
    def from_config(cls, qcfg, seed: int, rank: int) -> None:
        return None


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
    family: type = UniformMessages  # the codec family that built it: says which encoder a message gets

    def codec(self, direction: Direction) -> UniformCodec | None:
        return {Direction.FORWARD: self.forward, Direction.BACKWARD: self.backward, Direction.INPUT: self.inputs}[
            direction
        ]

    def encoder(self, direction: Direction, kernels: Kernels, layout: WireLayout | None, bits: int | None = None):
        """The encoder of a training message in ``direction`` (``layout``: its per-row widths, if any; ``bits``: the
        message's own width, for strategies that pick one per message); None: exact fp32."""
        codec = self.codec(direction)
        if codec is not None and bits is not None:
            codec = codec.at_bits(bits)
        return None if codec is None else self.family.encoder(codec, kernels, layout)

    def noise_key(self, epoch: int, layer: int, direction: Direction) -> NoiseKey:
        return NoiseKey(self.seed, int(epoch), int(layer), Direction(direction).value, self.rank)

    def describe(self, inputs_every_epoch: bool = False) -> dict:
        """What the record says of the messages' widths: per direction the bits (32: exact), or ``"adaptive"``
        where the assigner picks each row group's width (``bit_choices``; the first cycle at ``first_cycle_bits``).
        ``inputs_every_epoch`` (``parallel.inputs=every_epoch``): the layer-0 features travel every epoch as layer
        0's forward message, with its codec, not once at setup with the input codec; ``inputs`` says which."""
        adaptive = self.family is AdaptiveMessages

        def bits(c):
            return 32 if c is None else "adaptive" if adaptive else c.bits

        out = {
            "forward_bits": bits(self.forward),
            "backward_bits": bits(self.backward),
            "input_bits": bits(self.forward if inputs_every_epoch else self.inputs),
            "inputs": "every_epoch" if inputs_every_epoch else "once",
        }
        if adaptive:
            out["first_cycle_bits"] = self.forward.bits
        return out


def message_quantization(qcfg, seed: int, rank: int) -> MessageQuantization | None:
    """Map ``quantizer.*`` to a MessageQuantization (None for exact fp32 messages): the family it names builds it."""
    return QUANTIZERS.target(qcfg.name).from_config(qcfg, seed, rank)
