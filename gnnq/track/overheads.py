"""Work for training that runs outside an epoch, timed by kind (DESIGN.md: "overhead time").

AdaQP's startup channel profile, its α (row influence) exchange and each bit-width reassignment,
and checkpoint writes, cost wall time that no epoch timer sees. A trainer (and the driver, for
checkpoints) measures each under its kind; the driver charges what was measured to the next
epoch's row (``overhead_time_s``), so time to target and throughput include it, and the run
summary totals it by kind. Their messages go under the ``OVERHEAD`` byte category.
"""

from __future__ import annotations

import time
from contextlib import contextmanager

# The kinds, in the order of a row's ``overhead_by_kind`` and of the cross-rank reduction.
OVERHEAD_KINDS = ("profile", "influence", "assign", "checkpoint")


class OverheadClock:
    """Seconds spent per kind since the last ``take``."""

    def __init__(self):
        self._seconds = dict.fromkeys(OVERHEAD_KINDS, 0.0)

    @contextmanager
    def measure(self, kind: str):
        if kind not in self._seconds:
            raise ValueError(f"overhead kind {kind!r}: one of {', '.join(OVERHEAD_KINDS)}")
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self._seconds[kind] += time.perf_counter() - t0

    def take(self) -> list[float]:
        """Seconds per kind (``OVERHEAD_KINDS`` order) since the last take; resets them."""
        taken = [self._seconds[k] for k in OVERHEAD_KINDS]
        self._seconds = dict.fromkeys(OVERHEAD_KINDS, 0.0)
        return taken
