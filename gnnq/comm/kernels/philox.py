"""The codec's uniform draws: counter-based (Philox4x32-7), computed where they are used.

A message's draws are never materialized by the exchange: every codec kernel derives the draw of
element (r, c) of a sent row from the row's stream key and index alone, so the C and Triton
kernels compute it inline and this module's vectorized torch version gives the same bits.

- Stream key: 64 bits per (seed, epoch, layer, direction, sender, receiver)
  (``gnnq.comm.codec.NoiseKey``), split into the Philox key (k0 = low 32 bits, k1 = high).
- Row index r: the row's position within the block of rows going to that receiver.
- Element (r, c): Philox4x32-7 (Salmon et al., SC'11; the Random123 constants, 7 rounds) of the counter
  (((c >> 6) << 3) | (c & 7), r mod 2^32, r >> 32, 0) gives four 32-bit words. With j = c & 63,
  the draw takes the 16-bit half (j >> 5) of word ((j >> 3) & 3): u16 = (w >> (16 * (j >> 5))) & 0xffff,
  and u = (2 * u16 + 1) * 2^-17, the midpoint of one of 2^16 equal cells of [0, 1), exact in fp32.
  One Philox call thus serves 8 columns, and 8 consecutive columns come from 8 calls' same word
  (one SIMD register of calls in the C kernel).

Seven rounds: Random123's shortest Philox4x32 that passes TestU01's BigCrush (its default, 10, adds a
safety margin for general use). The draws only have to be uniform and independent enough for rounding noise,
and the rounds are most of an encoder's arithmetic (three fewer: about a quarter less time in the C kernel).

16 bits per draw keep stochastic rounding unbiased to within 2^-17 of a step per value (a midpoint
grid errs by at most half a cell either way), below the fp32 rounding of ``(x - zero) / step + u``
itself for 8-bit codes (whose ulp near 255 is 2^-16).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

M0, M1 = 0xD2511F53, 0xCD9E8D57  # round multipliers
W0, W1 = 0x9E3779B9, 0xBB67AE85  # key increments (Weyl sequence)
ROUNDS = 7  # the codec's rounds (philox4x32 takes any; Random123's default is 10)
LO32 = 0xFFFFFFFF
CELL = 2.0**-17  # half of the 2^-16 spacing of the draws


@dataclass(frozen=True)
class RowStreams:
    """Per sent row (in send order): its stream's 64-bit key and its index within its receiver's block (int64, same
    device)."""

    keys: torch.Tensor
    index: torch.Tensor

    def __len__(self) -> int:
        return int(self.keys.numel())

    def select(self, positions: torch.Tensor) -> "RowStreams":
        return RowStreams(self.keys.index_select(0, positions), self.index.index_select(0, positions))

    @classmethod
    def of_blocks(cls, keys: list[int], counts: list[int], device: torch.device | str) -> "RowStreams":
        """Rows grouped by receiver: ``counts[q]`` rows on the stream ``keys[q]``, indexed from 0 in each block."""
        counts_t = torch.tensor(counts, dtype=torch.int64)
        starts = torch.cumsum(counts_t, 0) - counts_t
        total = int(counts_t.sum())
        index = torch.arange(total, dtype=torch.int64) - torch.repeat_interleave(starts, counts_t)
        keys_t = torch.repeat_interleave(torch.tensor(keys, dtype=torch.int64), counts_t)
        return cls(keys_t.to(device), index.to(device))


def _mulhilo(m: int, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(high, low) 32-bit halves of m * x for 32-bit m and x (int64 tensors), without int64 overflow."""
    lo16, hi16 = x & 0xFFFF, x >> 16
    p_lo, p_hi = lo16 * m, hi16 * m  # each < 2^48
    low = (p_lo + ((p_hi & 0xFFFF) << 16)) & LO32
    high = (p_hi + (p_lo >> 16)) >> 16
    return high, low


def philox4x32(c: list[torch.Tensor], k0: torch.Tensor, k1: torch.Tensor, rounds: int = ROUNDS) -> list[torch.Tensor]:
    """Philox4x32-``rounds`` of counters ``c`` (four int64 tensors of 32-bit values) under keys (k0, k1), broadcast."""
    c0, c1, c2, c3 = c
    for _ in range(rounds):
        hi0, lo0 = _mulhilo(M0, c0)
        hi1, lo1 = _mulhilo(M1, c2)
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
        k0, k1 = (k0 + W0) & LO32, (k1 + W1) & LO32
    return [c0, c1, c2, c3]


def uniforms(streams: RowStreams, dim: int) -> torch.Tensor:
    """The (R, dim) fp32 draws of ``streams``' rows: the reference the C and Triton kernels match."""
    rows, device = len(streams), streams.keys.device
    if rows == 0 or dim == 0:
        return torch.empty((rows, dim), dtype=torch.float32, device=device)
    calls = -(-dim // 64) * 8
    c0 = torch.arange(calls, dtype=torch.int64, device=device)[None, :]
    idx = streams.index[:, None]
    zero = torch.zeros_like(idx)
    words = philox4x32(
        [c0, idx & LO32, idx >> 32, zero], streams.keys[:, None] & LO32, (streams.keys[:, None] >> 32) & LO32
    )
    words = torch.stack([w.expand(rows, calls) for w in words], dim=2).view(rows, calls * 4)
    col = torch.arange(dim, dtype=torch.int64, device=device)
    j = col & 63
    pick = (((col >> 6) << 3) | (col & 7)) * 4 + ((j >> 3) & 3)
    u16 = (words.index_select(1, pick) >> ((j >> 5) * 16)) & 0xFFFF
    return (u16 * 2 + 1).to(torch.float32) * CELL
