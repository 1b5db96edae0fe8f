"""Byte and time counters for everything a rank puts on the wire."""

from __future__ import annotations

import threading
from collections import defaultdict
from dataclasses import dataclass, field

# Categories of traffic. Halo traffic of training steps is what `comm_bytes_per_epoch` reports.
HALO_TRAIN = "halo_train"
HALO_EVAL = "halo_eval"
HALO_SETUP = "halo_setup"  # layer-0 input features, fetched once
GRAD_SYNC = "grad_sync"  # parameter-gradient all-reduce (payload size, not the algorithm's wire bytes)
ADMM_TRAIN = "admm_train"  # pdADMM-G: p and q between neighbouring layer blocks
ADMM_EVAL = "admm_eval"  # pdADMM-G: activations passed up for evaluation
CONTROL = "control"  # seeds, metrics, parameter broadcast


@dataclass
class CommStats:
    """Counters keyed by (category, layer, direction); ``direction`` is "fwd", "bwd" or "input" for
    halo messages (``Direction.accounting``), else "all" or "profile". Safe to add to from several
    threads (the channel profile waits in threads)."""

    bytes: dict = field(default_factory=lambda: defaultdict(int))
    seconds: dict = field(default_factory=lambda: defaultdict(float))
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, category: str, layer: int, direction: str, nbytes: int, seconds: float) -> None:
        key = (category, layer, direction)
        with self._lock:
            self.bytes[key] += int(nbytes)
            self.seconds[key] += float(seconds)

    def total_bytes(self, *categories: str) -> int:
        return sum(v for (c, _, _), v in self.bytes.items() if c in categories)

    def total_seconds(self, *categories: str) -> float:
        return sum(v for (c, _, _), v in self.seconds.items() if c in categories)

    def reset(self) -> None:
        self.bytes.clear()
        self.seconds.clear()
