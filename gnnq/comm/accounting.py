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
TENSOR_TRAIN = "tensor_train"  # parallel=tensor3d: the grid's all-gathers, reduce-scatters and all-reduces in training
TENSOR_EVAL = "tensor_eval"  # parallel=tensor3d: the same collectives in evaluation (forward only)
CONTROL = "control"  # seeds, metrics, parameter broadcast
OVERHEAD = "overhead"  # training work outside epochs: AdaQP's channel profile, row-influence exchange, reassignments


@dataclass
class CommStats:
    """Counters keyed by (category, layer, direction); ``direction`` is "fwd", "bwd" or "input" for
    halo messages (``Direction.accounting``), else "all" or "profile". Safe to add to from several
    threads (the channel profile waits in threads).

    Two times per key (DESIGN.md, "What the reported times mean"):

    - ``seconds``, *exposed* communication: the time the computation waited for messages. On CPU
      the host's time inside posting and waiting calls; on CUDA the time the waiting stream stood
      still at the wait (from CUDA events, resolved when read: no host synchronization per message).
    - ``transfer``: from posting a message to its arrival being observed, hidden behind computation
      or not (on gloo a message is only observed complete inside ``wait``: an upper bound).

    And ``codec``: the time spent encoding and decoding quantized messages.

    ``trace``: where the communicator also reports each message's timeline while an epoch is traced
    (``trainer.trace=true``: a ``gnnq.comm.trace.TraceRecorder``); None: not traced.
    """

    bytes: dict = field(default_factory=lambda: defaultdict(int))
    seconds: dict = field(default_factory=lambda: defaultdict(float))
    transfer: dict = field(default_factory=lambda: defaultdict(float))
    codec: dict = field(default_factory=lambda: defaultdict(float))
    _deferred: list = field(default_factory=list, repr=False, compare=False)  # (counter, key, start event, end event)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    trace: object | None = field(default=None, repr=False, compare=False)

    def add(self, category: str, layer: int, direction: str, nbytes: int, seconds: float) -> None:
        key = (category, layer, direction)
        with self._lock:
            self.bytes[key] += int(nbytes)
            self.seconds[key] += float(seconds)

    def add_seconds(self, counter: str, key: tuple, seconds: float) -> None:
        """Add to one of the time counters: "seconds" (exposed), "transfer" or "codec"."""
        with self._lock:
            getattr(self, counter)[key] += float(seconds)

    def add_interval(self, counter: str, key: tuple, start, end) -> None:
        """Count the time between two recorded CUDA events under ``counter`` once they complete."""
        with self._lock:
            self._deferred.append((counter, key, start, end))

    def resolve(self) -> None:
        """Turn recorded CUDA event intervals into seconds (waits for their end events)."""
        with self._lock:
            deferred, self._deferred = self._deferred, []
        for counter, key, start, end in deferred:
            end.synchronize()
            seconds = start.elapsed_time(end) / 1e3
            with self._lock:
                getattr(self, counter)[key] += seconds

    def total_bytes(self, *categories: str) -> int:
        return sum(v for (c, _, _), v in self.bytes.items() if c in categories)

    def total_seconds(self, *categories: str) -> float:
        """Exposed communication time of these categories."""
        self.resolve()
        return sum(v for (c, _, _), v in self.seconds.items() if c in categories)

    def total_transfer_seconds(self, *categories: str) -> float:
        """Transfer time of these categories (hidden or not)."""
        self.resolve()
        return sum(v for (c, _, _), v in self.transfer.items() if c in categories)

    def total_codec_seconds(self, *categories: str) -> float:
        """Encode and decode time of these categories' quantized messages."""
        self.resolve()
        return sum(v for (c, _, _), v in self.codec.items() if c in categories)

    def reset(self) -> None:
        with self._lock:
            self.bytes.clear()
            self.seconds.clear()
            self.transfer.clear()
            self.codec.clear()
            self._deferred.clear()
