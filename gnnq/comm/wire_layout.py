"""Messages whose rows travel at different bit-widths (AdaQP's adaptive assignment).

A message's send buffer lists rows grouped by destination rank. With mixed widths each
rank's segment is sent as one byte string: first its rows at the lowest width, then the
next width, and so on, each row a wire row of the uniform codec at that width. Both sides
hold the same per-row widths (the receiver's are delivered at assignment time), so the
receiver can cut the byte strings apart and put every decoded row back in its place.

This module says where the bytes go; ``gnnq.comm.encoder.MixedWidthEncoder`` fills and reads them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from gnnq.comm.codec import UniformCodec


class WireLayout:
    """Per-row widths of one message (one layer and direction) on this rank, both sides."""

    def __init__(
        self, send_bits: torch.Tensor, send_counts: list[int], recv_bits: torch.Tensor, recv_counts: list[int]
    ):
        if send_bits.numel() != sum(send_counts) or recv_bits.numel() != sum(recv_counts):
            raise ValueError("per-row widths do not match the message's row counts")
        self.send_bits, self.recv_bits = send_bits.to(torch.int64).cpu(), recv_bits.to(torch.int64).cpu()
        self.widths = sorted({int(b) for b in torch.cat([self.send_bits, self.recv_bits]).unique().tolist()})
        self.send = _Side(self.send_bits, send_counts, self.widths)
        self.recv = _Side(self.recv_bits, recv_counts, self.widths)

    def state_dict(self) -> dict:
        """Tensors and plain lists only (a checkpoint loads it with ``torch.load(weights_only=True)``)."""
        return {
            "send_bits": self.send_bits,
            "send_counts": self.send.counts,
            "recv_bits": self.recv_bits,
            "recv_counts": self.recv.counts,
        }

    @classmethod
    def from_state_dict(cls, state: dict) -> "WireLayout":
        return cls(state["send_bits"], state["send_counts"], state["recv_bits"], state["recv_counts"])

    def histogram(self) -> dict[int, int]:
        """Rows sent at each width."""
        return {b: int((self.send_bits == b).sum()) for b in self.widths}


class _Side:
    """Where each width's rows sit in one side's buffer, and how many go to / come from each peer."""

    def __init__(self, bits: torch.Tensor, counts: list[int], widths: list[int]):
        self.counts = [int(c) for c in counts]
        peer = torch.repeat_interleave(torch.arange(len(self.counts)), torch.tensor(self.counts, dtype=torch.int64))
        self.bits = bits
        self.positions, self.offsets, self._on_device, self._plans = {}, {}, {}, {}
        for b in widths:
            pos = torch.nonzero(bits == b).flatten()  # ascending, so grouped by peer
            self.positions[b] = pos
            per_peer = torch.bincount(peer[pos], minlength=len(self.counts))
            self.offsets[b] = [0] + torch.cumsum(per_peer, 0).tolist()

    def positions_on(self, bits: int, device: torch.device) -> torch.Tensor:
        """``positions[bits]`` on ``device``, copied there once."""
        key = (bits, str(device))
        if key not in self._on_device:
            self._on_device[key] = self.positions[bits].to(device)
        return self._on_device[key]

    def wire_plan(self, codec: "UniformCodec", dim: int) -> tuple[torch.Tensor, torch.Tensor, int]:
        """(per-row widths as int8, each row's byte offset in the flat buffer, total bytes) for the C codec."""
        key = (codec.param_dtype, dim)
        if key not in self._plans:
            # Buffer order: per peer, its rows at the lowest width, then the next width, ...
            order = [
                self.positions[b][self.offsets[b][q] : self.offsets[b][q + 1]]
                for q in range(len(self.counts))
                for b in sorted(self.positions)
            ]
            order = torch.cat(order) if order else torch.empty(0, dtype=torch.int64)
            row_bytes = torch.zeros(9, dtype=torch.int64)
            for b in self.positions:
                row_bytes[b] = codec.at_bits(b).row_bytes(dim)
            size = row_bytes[self.bits[order]]
            offsets = torch.empty_like(order)
            offsets[order] = torch.cumsum(size, 0) - size
            self._plans[key] = (self.bits.to(torch.int8), offsets, int(size.sum()))
        return self._plans[key]

    def bytes_per_peer(self, codec: "UniformCodec", dim: int) -> list[int]:
        return [
            sum((self.offsets[b][q + 1] - self.offsets[b][q]) * codec.at_bits(b).row_bytes(dim) for b in self.positions)
            for q in range(len(self.counts))
        ]
