"""BNS-GCN: each training epoch only a random fraction of the boundary rows is exchanged.

For every pair (owner, receiver) and epoch, both ends draw the same subset of the owner's
boundary rows from a shared seed, so no index lists travel: the owner sends those rows, the
receiver places them in its halo rows and leaves the rest at zero, which drops the edges from
unsampled halo nodes. Of the c boundary rows an owner could send a receiver, it sends
s = int(rate * c) (``sample_size="floor"``, BNS-GCN's code: a channel with c < 1/rate sends
nothing) or s = max(1, round(rate * c)) (``"at_least_one"``, gnnq's default: every channel keeps
a row, so no boundary edge is dropped in every epoch). As in BNS-GCN, a row sampled with
probability s/c is scaled by c/s, so the aggregate is unbiased (for s > 0):
E[A @ [h; halo_sampled]] = A @ [h; halo], and its gradient is scaled the same way. The same
subset serves every layer of an epoch (forward and backward). Layer-0 features are fetched
once in full, and evaluation uses the full graph.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from gnnq.comm.codec import stream_seed
from gnnq.comm.halo import HaloExchange, HaloPlan
from gnnq.models.graph_ops import LocalGraph
from gnnq.parallel.sync import SyncStrategy


@dataclass
class BoundarySample:
    """One epoch's sample: the sub-plan to exchange, and where (and how scaled) received rows go."""

    plan: HaloPlan
    recv_pos: torch.Tensor  # halo positions of the received rows
    recv_scale: torch.Tensor  # per received row: c / s of its owner's channel


SAMPLE_SIZES = {
    "floor": lambda rate, count: int(rate * count),
    "at_least_one": lambda rate, count: max(1, round(rate * count)),
}


def sampled_positions(
    count: int, rate: float, seed: int, epoch: int, owner: int, receiver: int, sample_size: str = "at_least_one"
) -> torch.Tensor:
    """Sorted positions of the s rows (``sample_size``'s rule, see the module's doc) drawn from an owner's ``count``
    rows."""
    size = min(count, SAMPLE_SIZES[sample_size](rate, count)) if count else 0
    if size == count:
        return torch.arange(count)
    gen = torch.Generator().manual_seed(stream_seed("boundary-sample", seed, epoch, owner, receiver))
    return torch.randperm(count, generator=gen)[:size].sort().values


def draw_sample(
    plan: HaloPlan, rate: float, seed: int, epoch: int, rank: int, sample_size: str = "at_least_one"
) -> BoundarySample:
    device = plan.send_idx.device
    send_keep, send_counts, offset = [], [], 0
    for peer, count in enumerate(plan.send_counts):
        keep = sampled_positions(count, rate, seed, epoch, rank, peer, sample_size)
        send_keep.append(keep + offset)
        send_counts.append(keep.numel())
        offset += count
    recv_pos, recv_scale, recv_counts, offset = [], [], [], 0
    for peer, count in enumerate(plan.recv_counts):
        keep = sampled_positions(count, rate, seed, epoch, peer, rank, sample_size)
        recv_pos.append(keep + offset)
        recv_scale.append(torch.full((keep.numel(),), count / max(1, keep.numel())))
        recv_counts.append(keep.numel())
        offset += count
    send_idx = plan.send_idx.index_select(0, torch.cat(send_keep).to(device))
    return BoundarySample(
        HaloPlan(send_idx, send_counts, recv_counts), torch.cat(recv_pos).to(device), torch.cat(recv_scale).to(device)
    )


class SamplingStrategy(SyncStrategy):
    config_keys: ClassVar[dict[str, str]] = {"rate": "sampling_rate", "sample_size": "sample_size"}
    takes_seed: ClassVar[bool] = True

    def __init__(
        self,
        exchange: HaloExchange,
        graph: LocalGraph,
        x_inner: torch.Tensor,
        rate: float = 0.1,
        seed: int = 0,
        sample_size: str = "at_least_one",
        inputs: str = "once",
    ):
        super().__init__(exchange, graph, x_inner, inputs)
        if sample_size not in SAMPLE_SIZES:
            raise ValueError(f"sample_size={sample_size!r}: allowed {', '.join(SAMPLE_SIZES)}")
        self.rate, self.seed, self.sample_size = float(rate), int(seed), sample_size
        self.sample: BoundarySample | None = None

    def begin_training_epoch(self, epoch: int) -> None:
        super().begin_training_epoch(epoch)
        self.sample = draw_sample(
            self.exchange.plan, self.rate, self.seed, epoch, self.exchange.comm.rank, self.sample_size
        )

    def aggregate_hidden(self, layer: int, h_inner: torch.Tensor, before_dropout=None) -> torch.Tensor:
        if not self.traffic.is_training:
            return super().aggregate_hidden(layer, h_inner)  # evaluation: the full graph
        s = self.sample
        rows = self.exchange.fetch(h_inner, layer, self.traffic, s.plan)
        halo = rows.new_zeros((self.exchange.num_halo, rows.shape[1]))
        halo = halo.index_copy(0, s.recv_pos, rows * s.recv_scale[:, None])
        return self.graph.aggregate(torch.cat([h_inner, halo]))
