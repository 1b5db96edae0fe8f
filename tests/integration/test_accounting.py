"""Exposed communication and transfer time (gnnq.comm.accounting), on real gloo groups.

Exposed: the time the computation waited for a message. Transfer: from posting it to seeing it
arrive, hidden or not. A message whose peer posts late is waited for; one that arrives while the
receiver computes is hidden (transfer counted, little exposed).

Here: the cases with real processes (gloo ranks, torchrun or gnnq); the others are in `tests/unit/test_accounting.py`.
"""

from __future__ import annotations

import time

import torch

from gnnq.comm import Communicator
from gnnq.comm.accounting import HALO_TRAIN
from tests.helpers import run_distributed

LATE_S, COMPUTE_S = 0.4, 0.8


def _exchange(rank0_computes: bool):
    """Rank 1 posts LATE_S after rank 0; rank 0 then waits at once, or computes COMPUTE_S first."""
    comm = Communicator()
    comm.barrier()
    if comm.rank == 1:
        time.sleep(LATE_S)
    rows = torch.full((4, 8), float(comm.rank))
    pending = comm.all_to_all_start(rows, [2, 2], [2, 2], category=HALO_TRAIN, layer=1, direction="fwd")
    if comm.rank == 0 and rank0_computes:
        time.sleep(COMPUTE_S)
    out = pending.wait()
    assert out[:2].eq(0).all() and out[2:].eq(1).all(), "rows arrive in source-rank order"
    return comm.stats.total_seconds(HALO_TRAIN), comm.stats.total_transfer_seconds(HALO_TRAIN)


def test_a_late_message_is_exposed_and_transfer():
    exposed, transfer = run_distributed(2, _exchange, False)[0]
    assert exposed >= LATE_S * 0.9 and transfer >= exposed
    assert transfer - exposed < 0.1, "waiting from the post on: the whole transfer was exposed"


def test_a_message_that_arrives_during_computation_is_hidden():
    exposed, transfer = run_distributed(2, _exchange, True)[0]
    assert transfer >= COMPUTE_S * 0.9, "transfer counts from the post to the wait's end"
    assert exposed < 0.2 < COMPUTE_S - LATE_S, "it had arrived before the wait: hardly anything was exposed"
