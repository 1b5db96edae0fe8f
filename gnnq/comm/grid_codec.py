"""pdADMM-G-Q's messages: values on a finite grid, sent as densely packed level indices.

The grid Δ = {lo + i * step : i = 0 .. levels-1}, step = (hi - lo) / (levels - 1); the paper's
default is the integers -1..20 (22 levels). ``project`` is the O(n) round-and-clamp projection
(the public code compared every value with every level: O(|Δ| n) time and memory). A value on
the grid is sent as its index in ceil(log2(levels)) bits, packed across byte boundaries, so 22
levels cost 5 bits instead of the 32 of the float32 the public code pickled.

Both ends compute a grid value as ``lo + index * step`` with the same fp32 operations, so the
receiver decodes exactly the tensor the sender holds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from gnnq.comm.codec import NonFiniteMessageError


@dataclass(frozen=True)
class Grid:
    lo: float
    hi: float
    levels: int

    def __post_init__(self):
        if self.levels < 2 or not self.hi > self.lo:
            raise ValueError(
                f"a grid needs levels >= 2 and hi > lo; got lo={self.lo}, hi={self.hi}, levels={self.levels}"
            )
        if self.levels > 2**16:
            raise ValueError(f"at most 65536 grid levels are supported; got {self.levels}")
        ends = self.values(torch.tensor([0, 1, self.levels - 2, self.levels - 1]))
        if not (ends[1] > ends[0] and ends[3] > ends[2]):
            raise ValueError(
                f"grid lo={self.lo}, hi={self.hi}, levels={self.levels}: neighbouring values are equal in fp32; "
                "use fewer levels"
            )

    @property
    def step(self) -> float:
        return (self.hi - self.lo) / (self.levels - 1)

    @property
    def bits(self) -> int:
        return max(1, math.ceil(math.log2(self.levels)))

    def indices(self, x: torch.Tensor) -> torch.Tensor:
        """Index of the nearest grid value of every element (int64; ties round half to even; ±inf
        to the ends). NaN has no nearest value: it raises, rather than decoding differently."""
        if bool(torch.isnan(x).any()):
            raise NonFiniteMessageError("NaN in a grid-quantized message (p or q of parallel=admm); the run diverged")
        return torch.round((x.float() - self.lo) / self.step).clamp_(0, self.levels - 1).long()

    def values(self, idx: torch.Tensor) -> torch.Tensor:
        return self.lo + idx.float() * self.step

    def project(self, x: torch.Tensor) -> torch.Tensor:
        """The nearest point of Δ to each element (elementwise Euclidean projection)."""
        return self.values(self.indices(x))

    def wire_bytes(self, numel: int) -> int:
        return math.ceil(numel * self.bits / 8)

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """The packed indices of ``x``'s nearest grid values (uint8, ``wire_bytes(x.numel())`` long)."""
        return pack_bits(self.indices(x).reshape(-1), self.bits)

    def decode(self, wire: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
        return self.values(unpack_bits(wire, self.bits, math.prod(shape))).reshape(shape)


@dataclass(frozen=True)
class GridMessages:
    """quantizer=grid (pdADMM-G-Q, the codec family): p (sent backward) and q (sent forward) on one grid; either
    None where it is sent in fp32. pdADMM-G's links (gnnq.admm.links) encode with it."""

    p: Grid | None
    q: Grid | None

    @classmethod
    def from_config(cls, qcfg, seed: int, rank: int) -> "GridMessages":
        grid = Grid(float(qcfg.grid_min), float(qcfg.grid_max), int(qcfg.grid_levels))
        return cls(grid if qcfg.quantize_p else None, grid if qcfg.quantize_q else None)


def pack_bits(codes: torch.Tensor, bits: int) -> torch.Tensor:
    """Pack non-negative integer codes below 2**bits, ``bits`` each, least significant bit first."""
    shifts = torch.arange(bits, device=codes.device)
    planes = ((codes.reshape(-1, 1) >> shifts) & 1).to(torch.uint8).reshape(-1)
    pad = (-planes.numel()) % 8
    if pad:
        planes = torch.cat([planes, planes.new_zeros(pad)])
    weights = torch.tensor([1 << i for i in range(8)], dtype=torch.uint8, device=codes.device)
    return (planes.reshape(-1, 8) * weights).sum(dim=1, dtype=torch.int32).to(torch.uint8)


def unpack_bits(wire: torch.Tensor, bits: int, count: int) -> torch.Tensor:
    """The first ``count`` codes of a ``pack_bits`` buffer, as int64."""
    shifts = torch.arange(8, device=wire.device)
    planes = ((wire.reshape(-1, 1).long() >> shifts) & 1).reshape(-1)[: count * bits]
    weights = torch.tensor([1 << i for i in range(bits)], dtype=torch.int64, device=wire.device)
    return (planes.reshape(count, bits) * weights).sum(dim=1)
