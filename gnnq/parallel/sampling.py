"""BNS-GCN: each training epoch only a random fraction of the boundary rows is exchanged.

For every pair (owner, receiver) and epoch, both ends draw the same subset of the owner's
boundary rows from a shared seed, so no index lists travel: the owner sends those rows, the
receiver places them in its halo rows and leaves the rest at zero, which drops the edges from
unsampled halo nodes. As in BNS-GCN, a row sampled with probability s/c (s of the c boundary
rows the owner sends this receiver) is scaled by c/s, so the aggregate is unbiased:
E[A @ [h; halo_sampled]] = A @ [h; halo], and its gradient is scaled the same way. The same
subset serves every layer of an epoch (forward and backward). Layer-0 features are fetched
once in full, and evaluation uses the full graph.
"""

from __future__ import annotations

from dataclasses import dataclass

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


def sampled_positions(count: int, rate: float, seed: int, epoch: int, owner: int, receiver: int) -> torch.Tensor:
    """Sorted positions of the s = max(1, round(rate * count)) rows drawn from an owner's ``count`` rows."""
    size = min(count, max(1, round(rate * count))) if count else 0
    if size == count:
        return torch.arange(count)
    gen = torch.Generator().manual_seed(stream_seed("boundary-sample", seed, epoch, owner, receiver))
    return torch.randperm(count, generator=gen)[:size].sort().values


def draw_sample(plan: HaloPlan, rate: float, seed: int, epoch: int, rank: int) -> BoundarySample:
    device = plan.send_idx.device
    send_keep, send_counts, offset = [], [], 0
    for peer, count in enumerate(plan.send_counts):
        keep = sampled_positions(count, rate, seed, epoch, rank, peer)
        send_keep.append(keep + offset)
        send_counts.append(keep.numel())
        offset += count
    recv_pos, recv_scale, recv_counts, offset = [], [], [], 0
    for peer, count in enumerate(plan.recv_counts):
        keep = sampled_positions(count, rate, seed, epoch, peer, rank)
        recv_pos.append(keep + offset)
        recv_scale.append(torch.full((keep.numel(),), count / max(1, keep.numel())))
        recv_counts.append(keep.numel())
        offset += count
    send_idx = plan.send_idx.index_select(0, torch.cat(send_keep).to(device))
    return BoundarySample(
        HaloPlan(send_idx, send_counts, recv_counts), torch.cat(recv_pos).to(device), torch.cat(recv_scale).to(device)
    )


class SamplingStrategy(SyncStrategy):
    def __init__(self, exchange: HaloExchange, graph: LocalGraph, x_inner: torch.Tensor, rate: float = 0.1, seed: int = 0):
        super().__init__(exchange, graph, x_inner)
        self.rate, self.seed = float(rate), int(seed)
        self.sample: BoundarySample | None = None

    def begin_training_epoch(self, epoch: int) -> None:
        super().begin_training_epoch(epoch)
        self.sample = draw_sample(self.exchange.plan, self.rate, self.seed, epoch, self.exchange.comm.rank)

    def aggregate_hidden(self, layer: int, h_inner: torch.Tensor) -> torch.Tensor:
        if not self.traffic.is_training:
            return super().aggregate_hidden(layer, h_inner)  # evaluation: the full graph
        s = self.sample
        rows = self.exchange.fetch(h_inner, layer, self.traffic, s.plan)
        halo = rows.new_zeros((self.exchange.num_halo, rows.shape[1]))
        halo = halo.index_copy(0, s.recv_pos, rows * s.recv_scale[:, None])
        return self.graph.aggregate(torch.cat([h_inner, halo]))
