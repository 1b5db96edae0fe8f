"""Exposed communication and transfer time (gnnq.comm.accounting), on real gloo groups.

Exposed: the time the computation waited for a message. Transfer: from posting it to seeing it
arrive, hidden or not. A message whose peer posts late is waited for; one that arrives while the
receiver computes is hidden (transfer counted, little exposed).

Here: the in-process cases (no process started); the others are in `tests/integration/test_accounting.py`.
"""

from __future__ import annotations

from gnnq.comm.accounting import HALO_TRAIN, CommStats

KEY = (HALO_TRAIN, 1, "fwd")


class _Clock:
    """The CUDA event protocol the counters use (``synchronize``, ``elapsed_time`` in ms), on a plain clock reading."""

    def __init__(self, ms: float):
        self.ms, self.synchronized = ms, False

    def synchronize(self):
        self.synchronized = True

    def elapsed_time(self, end: "_Clock") -> float:
        return end.ms - self.ms


def test_event_intervals_resolve_into_exposed_and_transfer_when_read():
    """On CUDA, waits are event pairs on the waiting stream, turned into seconds only when the counters are read."""
    stats = CommStats()
    posted, wait_start, done = _Clock(0.0), _Clock(700.0), _Clock(1000.0)
    stats.add_interval("seconds", KEY, wait_start, done)
    stats.add_interval("transfer", KEY, posted, done)
    assert stats.seconds[KEY] == 0 and not done.synchronized, "nothing is resolved (nor waited for) before it is read"
    assert stats.total_seconds(HALO_TRAIN) == 0.3
    assert done.synchronized and stats.total_transfer_seconds(HALO_TRAIN) == 1.0
    stats.reset()
    assert stats.total_seconds(HALO_TRAIN) == stats.total_transfer_seconds(HALO_TRAIN) == 0
