"""Data-parallel parameter state: one start for every rank, gradients summed over ranks."""

from __future__ import annotations

import torch

from gnnq.comm import Communicator
from gnnq.comm.accounting import CONTROL, GRAD_SYNC


def sync_parameters(model: torch.nn.Module, comm: Communicator) -> None:
    """Make every rank start from rank 0's parameters."""
    for p in model.parameters():
        comm.broadcast(p.data, src=0, category=CONTROL)


def all_reduce_gradients(model: torch.nn.Module, comm: Communicator) -> None:
    """Sum parameter gradients over ranks (each rank's loss is already divided by the global count)."""
    if comm.world_size == 1:
        return
    params = list(model.parameters())
    flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in params])
    comm.all_reduce(flat, category=GRAD_SYNC)
    offset = 0
    for p in params:
        p.grad = flat[offset : offset + p.numel()].view_as(p)
        offset += p.numel()
