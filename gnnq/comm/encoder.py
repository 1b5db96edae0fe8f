"""Encode a message's rows to wire bytes, and wire bytes back to rows: the seam between codec and transport.

An encoder is built for one codec on one backend (``kernels_for`` chooses it, once per device)
and knows nothing of ranks or process groups. ``encode(src, rows, counts, noise, what)`` takes
the rows ``src[rows]`` (grouped by destination, ``counts`` rows each), the message's ``NoiseKey``
(the kernels draw from its Philox streams inline) and returns a ``WireMessage``: one flat uint8
buffer and the bytes it holds for each destination. Finiteness is checked once per message, on
the rows sent, by the encoding kernel itself; only a message with NaN/inf is encoded twice. The exchange sends those
bytes as they are and hands
what arrives (``recv_bytes`` from each peer) to ``decode``, which writes the rows into their
destination (``out``: the halo rows of the receiver's buffer) or a fresh tensor. Uniform messages are the codec's wire
rows back to back; mixed-width ones (AdaQP) follow a ``WireLayout``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch

from gnnq.comm.kernels.backends import Kernels
from gnnq.comm.kernels.philox import RowStreams
from gnnq.comm.kernels.torch_codec import check_out
from gnnq.comm.wire_layout import WireLayout


class Noise(Protocol):
    def streams(self, counts: list[int], device: torch.device) -> RowStreams: ...


class RowCodec(Protocol):
    """What an encoder needs of its codec (``gnnq.comm.codec.UniformCodec``)."""

    bits: int
    param_dtype: torch.dtype

    def at_bits(self, bits: int) -> "RowCodec": ...

    def row_bytes(self, dim: int) -> int: ...

    def without_nonfinite(
        self, src: torch.Tensor, rows: torch.Tensor, what: str
    ) -> tuple[torch.Tensor, torch.Tensor, int]: ...


@dataclass(frozen=True)
class WireMessage:
    """An encoded message: ``wire`` (flat uint8) holds ``send_bytes[q]`` bytes for rank q, in rank order."""

    wire: torch.Tensor
    send_bytes: list[int]
    nonfinite_zeroed: int


class UniformEncoder:
    """Every row at the codec's width: the wire is the codec's wire rows, back to back."""

    def __init__(self, codec: RowCodec, kernels: Kernels):
        self.codec, self.kernels = codec, kernels

    @property
    def backend(self) -> str:
        return self.kernels.name

    def encode(self, src: torch.Tensor, rows: torch.Tensor, counts: list[int], noise: Noise, what: str) -> WireMessage:
        dim, c = src.shape[1], self.codec
        streams = noise.streams(counts, src.device)
        wire, finite = self.kernels.quantize_pack(src, rows, streams, c.bits, c.param_dtype)
        zeroed = 0
        if not finite:
            src, rows, zeroed = c.without_nonfinite(src, rows, what)
            wire, _ = self.kernels.quantize_pack(src, rows, streams, c.bits, c.param_dtype)
        return WireMessage(wire.reshape(-1), self.recv_bytes(counts, dim), zeroed)

    def recv_bytes(self, counts: list[int], dim: int) -> list[int]:
        """Bytes of ``counts[q]`` rows from (or to) each rank q."""
        row = self.codec.row_bytes(dim)
        return [int(n) * row for n in counts]

    def decode(self, wire: torch.Tensor, dim: int, out: torch.Tensor | None = None) -> torch.Tensor:
        """The received rows, decoded into a fresh tensor or into ``out`` (their destination rows, fp32, contiguous)."""
        c = self.codec
        return self.kernels.unpack_dequantize(wire.view(-1, c.row_bytes(dim)), dim, c.bits, c.param_dtype, out=out)


class MixedWidthEncoder:
    """Rows at the widths of a ``WireLayout`` (one layer and direction of an adaptive assignment)."""

    def __init__(self, codec: RowCodec, kernels: Kernels, layout: WireLayout):
        self.codec, self.kernels, self.layout = codec, kernels, layout

    @property
    def backend(self) -> str:
        return self.kernels.name

    def encode(self, src: torch.Tensor, rows: torch.Tensor, counts: list[int], noise: Noise, what: str) -> WireMessage:
        """``counts`` must be the layout's send counts (the partition's full plan)."""
        dim, codec = src.shape[1], self.codec
        streams = noise.streams(counts, src.device)  # by position in the send buffer, whatever the row's width
        flat, finite = self._encode(src, rows, streams, dim)
        zeroed = 0
        if not finite:
            src, rows, zeroed = codec.without_nonfinite(src, rows, what)
            flat, _ = self._encode(src, rows, streams, dim)
        return WireMessage(flat, self.layout.send.bytes_per_peer(codec, dim), zeroed)

    def _encode(
        self, src: torch.Tensor, rows: torch.Tensor, streams: RowStreams, dim: int
    ) -> tuple[torch.Tensor, bool]:
        side, codec = self.layout.send, self.codec
        if dim and self.kernels.encode_mixed is not None:  # one pass over the whole message
            bits, offsets, total = side.wire_plan(codec, dim)
            return self.kernels.encode_mixed(src, rows, streams, bits, offsets, total, codec.param_dtype)
        wires, finite = {}, True
        for b in self.layout.widths:
            pos = side.positions_on(b, src.device)
            wires[b], ok = self.kernels.quantize_pack(
                src, rows.index_select(0, pos), streams.select(pos), b, codec.param_dtype
            )
            finite &= ok
        pieces = [
            wires[b][side.offsets[b][q] : side.offsets[b][q + 1]].reshape(-1)
            for q in range(len(side.counts))
            for b in self.layout.widths
        ]
        flat = torch.cat(pieces) if pieces else torch.empty(0, dtype=torch.uint8, device=src.device)
        return flat, finite

    def recv_bytes(self, counts: list[int], dim: int) -> list[int]:
        """Bytes from each rank, per the layout (``counts``: its receive counts)."""
        return self.layout.recv.bytes_per_peer(self.codec, dim)

    def decode(self, flat: torch.Tensor, dim: int, out: torch.Tensor | None = None) -> torch.Tensor:
        """As ``UniformEncoder.decode``: every row straight to its place in a fresh tensor or ``out``."""
        side, codec = self.layout.recv, self.codec
        if dim and self.kernels.decode_mixed is not None:
            bits, offsets, total = side.wire_plan(codec, dim)
            return self.kernels.decode_mixed(flat, dim, bits, offsets, total, codec.param_dtype, out=out)
        widths = self.layout.widths
        out = check_out(out, int(self.layout.recv_bits.numel()), dim, flat.device)
        sizes = {b: codec.at_bits(b).row_bytes(dim) for b in widths}
        chunks = {b: [] for b in widths}
        start = 0
        for q in range(len(side.counts)):
            for b in widths:
                n = (side.offsets[b][q + 1] - side.offsets[b][q]) * sizes[b]
                chunks[b].append(flat[start : start + n])
                start += n
        for b in widths:
            wire = torch.cat(chunks[b]).view(-1, sizes[b])
            out.index_copy_(
                0, side.positions_on(b, flat.device), self.kernels.unpack_dequantize(wire, dim, b, codec.param_dtype)
            )
        return out
