"""Data-parallel parameter state: one start for every rank (gradients are summed by ``gnnq.comm.grad_sync``)."""

from __future__ import annotations

import torch

from gnnq.comm import Communicator
from gnnq.comm.accounting import CONTROL


def sync_parameters(model: torch.nn.Module, comm: Communicator) -> None:
    """Make every rank start from rank 0's parameters."""
    for p in model.parameters():
        comm.broadcast(p.data, src=0, category=CONTROL)
