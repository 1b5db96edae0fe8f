"""Collectives over one process group, each timed and byte-counted into CommStats."""

from __future__ import annotations

import pickle
import time
from contextlib import contextmanager

import torch
import torch.distributed as dist

from gnnq.comm.accounting import CommStats


def stream_event(device: torch.device) -> torch.cuda.Event:
    """A timing event recorded now on ``device``'s current stream."""
    event = torch.cuda.Event(enable_timing=True)
    event.record(torch.cuda.current_stream(device))
    return event


class Posted:
    """When a message was posted: a clock reading on CPU, an event on the posting stream on CUDA."""

    def __init__(self, tensor: torch.Tensor):
        self.event = stream_event(tensor.device) if tensor.is_cuda else None
        self.at = time.perf_counter()


class Communicator:
    """Wraps one process group over all ranks: the default one unless ``group`` is given (or none, for one rank)."""

    def __init__(self, stats: CommStats | None = None, group=None):
        self.stats = stats if stats is not None else CommStats()
        self.group = group
        self.distributed = dist.is_available() and dist.is_initialized()
        self.rank = dist.get_rank() if self.distributed else 0
        self.world_size = dist.get_world_size() if self.distributed else 1
        self.members: list[int] | None = None  # a sub-group's global ranks, in group-rank order (split); None: all

    def with_own_group(self) -> "Communicator":
        """A communicator on a new process group over all ranks, counting into the same stats.

        Collective: every rank calls it, in the same order. Messages left in flight on it do not
        hold up collectives on this communicator's group (gloo and NCCL run a group's work in order).
        """
        if self.world_size == 1:
            return self
        return Communicator(self.stats, group=dist.new_group())

    def all_to_all(
        self,
        send: torch.Tensor,
        send_counts: list[int],
        recv_counts: list[int],
        *,
        category: str,
        layer: int,
        direction: str,
    ) -> torch.Tensor:
        """Uneven all-to-all along dim 0: ``send_counts[q]`` rows go to rank q, ``recv_counts[q]`` come from q."""
        return self.all_to_all_start(
            send, send_counts, recv_counts, category=category, layer=layer, direction=direction
        ).wait()

    def all_to_all_start(
        self,
        send: torch.Tensor,
        send_counts: list[int],
        recv_counts: list[int],
        *,
        category: str,
        layer: int,
        direction: str,
        out: torch.Tensor | None = None,
    ) -> "PendingMessage":
        """Post an all-to-all and return at once; ``.wait()`` gives the received rows: in ``out`` if given
        (contiguous, ``send``'s dtype, one row per received row), else in a fresh tensor.

        Exposed time counted: on CPU the host's time inside posting and waiting; on CUDA the time
        the waiting stream stands still (``wait``). Transfer time: from posting to the wait's end.
        """
        shape = (sum(recv_counts),) + tuple(send.shape[1:])
        if out is None:
            out = send.new_empty(shape)
        elif tuple(out.shape) != shape or out.dtype != send.dtype or not out.is_contiguous():
            raise ValueError(
                f"all-to-all into {out.dtype} {tuple(out.shape)}: expected a contiguous {send.dtype} {shape} tensor"
            )
        row_bytes = send[0:1].numel() * send.element_size() if send.dim() > 1 else send.element_size()
        wire_rows = sum(c for q, c in enumerate(send_counts) if q != self.rank)
        key = (category, layer, direction)
        posted = Posted(send)
        work = None
        if self.world_size > 1:
            work = dist.all_to_all_single(
                out, send.contiguous(), recv_counts, send_counts, group=self.group, async_op=True
            )
        else:
            out.copy_(send)
        self.stats.add(*key, wire_rows * row_bytes, _host_seconds(send, posted))
        pending = PendingMessage(self.stats, key, work, out, posted)
        if _tracing(self.stats):
            per_peer = [0 if q == self.rank else row_bytes for q in range(self.world_size)]
            pending.msg = self.stats.trace.post(
                key,
                posted.at,
                time.perf_counter(),
                self._global([int(c) * b for c, b in zip(send_counts, per_peer)]),
                self._global([int(c) * b for c, b in zip(recv_counts, per_peer)]),
            )
        return pending

    def send_start(
        self, tensor: torch.Tensor, dst: int, *, category: str, layer: int, direction: str
    ) -> "PendingMessage":
        """Post a point-to-point send of ``tensor`` to rank ``dst``; ``.wait()`` before reusing it."""
        key = (category, layer, direction)
        tensor = tensor.contiguous()  # held by the returned handle until the send completes
        posted = Posted(tensor)
        work = dist.isend(tensor, dst, group=self.group)  # dst: global rank (groups span all ranks)
        nbytes = tensor.numel() * tensor.element_size()
        self.stats.add(*key, nbytes, _host_seconds(tensor, posted))
        return self._traced(PendingMessage(self.stats, key, work, tensor, posted), dst, nbytes, 0)

    def recv_start(self, out: torch.Tensor, src: int, *, category: str, layer: int, direction: str) -> "PendingMessage":
        """Post a point-to-point receive into ``out`` from rank ``src``; ``.wait()`` gives ``out``."""
        key = (category, layer, direction)
        posted = Posted(out)
        work = dist.irecv(out, src, group=self.group)
        self.stats.add(*key, 0, _host_seconds(out, posted))
        pending = PendingMessage(self.stats, key, work, out, posted)
        return self._traced(pending, src, 0, out.numel() * out.element_size())

    def _traced(self, pending: "PendingMessage", peer: int, sent: int, received: int) -> "PendingMessage":
        """A point-to-point message, traced as a post of ``sent`` bytes to or ``received`` from ``peer``."""
        if _tracing(self.stats):
            send, recv = [0] * self.world_size, [0] * self.world_size
            send[peer], recv[peer] = sent, received
            pending.msg = self.stats.trace.post(pending.key, pending.posted.at, time.perf_counter(), send, recv)
        return pending

    def all_reduce(
        self,
        tensor: torch.Tensor,
        *,
        category: str,
        op=dist.ReduceOp.SUM,
        layer: int = -1,
        direction: str = "all",
        wire: str = "payload",
    ) -> torch.Tensor:
        """In-place all-reduce; its time counted as exposed and as transfer. Bytes counted per rank: ``wire="payload"``
        the payload once; ``"ring"`` what a ring all-reduce puts on the wire, 2 (g-1)/g of the payload (g ranks)."""
        if self.world_size > 1:
            key = (category, layer, direction)
            posted = Posted(tensor)
            dist.all_reduce(tensor, op=op, group=self.group)
            nbytes = tensor.numel() * tensor.element_size()
            if wire == "ring":
                nbytes = 2 * (self.world_size - 1) * nbytes // self.world_size
            self.stats.add(*key, nbytes, 0.0)
            _count_wait(self.stats, key, tensor, posted, posted)
            self._trace_collective(category, posted.at, nbytes, "all_reduce", layer, direction)
        return tensor

    def all_gather(
        self, tensor: torch.Tensor, *, category: str, layer: int = -1, direction: str = "all"
    ) -> torch.Tensor:
        """Every rank's ``tensor`` (all of one shape), concatenated along dim 0 in group-rank order. Counts what
        this rank's shard costs on the wire, (g-1) times its bytes (each of the g-1 peers receives it once)."""
        if self.world_size == 1:
            return tensor
        shard = tensor.contiguous()
        out = shard.new_empty((self.world_size * shard.shape[0],) + tuple(shard.shape[1:]))
        self._collective(dist.all_gather_single, out, shard, shard, category, layer, direction, "all_gather")
        return out

    def reduce_scatter(
        self, tensor: torch.Tensor, *, category: str, layer: int = -1, direction: str = "all"
    ) -> torch.Tensor:
        """The sum over the group of ``tensor``'s block of dim 0 that is this rank's (dim 0 splits into g equal
        blocks, in group-rank order). Counts (g-1) times a block's bytes per rank (ring reduce-scatter)."""
        if self.world_size == 1:
            return tensor
        full = tensor.contiguous()
        if full.shape[0] % self.world_size:
            raise ValueError(f"reduce-scatter of {full.shape[0]} rows over {self.world_size} ranks: not divisible")
        out = full.new_empty((full.shape[0] // self.world_size,) + tuple(full.shape[1:]))
        self._collective(dist.reduce_scatter_tensor, out, full, out, category, layer, direction, "reduce_scatter")
        return out

    def _collective(self, fn, out, inp, shard, category: str, layer: int, direction: str, kind: str) -> None:
        """Run ``fn(out, inp)`` on the group; count (g-1) x ``shard``'s bytes and the wait as exposed and transfer."""
        key = (category, layer, direction)
        posted = Posted(inp)
        fn(out, inp, group=self.group)
        nbytes = (self.world_size - 1) * shard.numel() * shard.element_size()
        self.stats.add(*key, nbytes, 0.0)
        _count_wait(self.stats, key, out, posted, posted)
        self._trace_collective(category, posted.at, nbytes, kind, layer, direction)

    def split(self, groups: list[list[int]]) -> "Communicator":
        """A communicator on the one of ``groups`` (global ranks; together every rank once) that holds this rank,
        counting into the same stats; its ``rank`` and ``world_size`` are within that group.

        Collective: every rank calls it with the same groups, in the same order (each becomes a process group).
        """
        if not self.distributed:
            return self
        mine = None
        for ranks in groups:
            group = dist.new_group(ranks=sorted(ranks))
            if self.rank in ranks:
                mine = Communicator(self.stats, group=group)
                mine.rank, mine.world_size = sorted(ranks).index(self.rank), len(ranks)
                mine.members = sorted(ranks)
        if mine is None:
            raise ValueError(f"rank {self.rank} is in none of the groups {groups}")
        return mine

    def _trace_collective(
        self, category: str, start: float, nbytes: int, kind: str, layer: int = -1, direction: str = "all"
    ) -> None:
        """A blocking collective on the timeline; a sub-group's names its global ranks (``group``)."""
        if _tracing(self.stats):
            self.stats.trace.collective(
                category, start, time.perf_counter(), nbytes, kind, layer, direction, self.members
            )

    def _global(self, per_peer: list[int]) -> list[int]:
        """Per-peer bytes of this group as a list over every rank of the world (a trace's posts name global ranks)."""
        if self.members is None:
            return per_peer
        out = [0] * dist.get_world_size()
        for q, nbytes in zip(self.members, per_peer):
            out[q] = nbytes
        return out

    def broadcast(self, tensor: torch.Tensor, *, src: int = 0, category: str) -> torch.Tensor:
        t0 = time.perf_counter()
        if self.world_size > 1:
            dist.broadcast(tensor, src=src, group=self.group)
            nbytes = tensor.numel() * tensor.element_size()
            if self.rank == src:
                self.stats.add(category, -1, "all", nbytes, time.perf_counter() - t0)
            self._trace_collective(category, t0, nbytes if self.rank == src else 0, "broadcast")
        return tensor

    def all_gather_object(self, obj, *, category: str) -> list:
        """Every rank's ``obj`` (picklable), in rank order; counts this rank's pickled size."""
        if self.world_size == 1:
            return [obj]
        t0 = time.perf_counter()
        out = [None] * self.world_size
        dist.all_gather_object(out, obj, group=self.group)
        nbytes = len(pickle.dumps(obj))
        self.stats.add(category, -1, "all", nbytes, time.perf_counter() - t0)
        self._trace_collective(category, t0, nbytes, "all_gather")
        return out

    def broadcast_object(self, obj, *, src: int = 0, category: str):
        """``obj`` as held by rank ``src``, on every rank."""
        if self.world_size == 1:
            return obj
        t0 = time.perf_counter()
        box = [obj if self.rank == src else None]
        dist.broadcast_object_list(box, src=src, group=self.group)
        nbytes = len(pickle.dumps(obj)) if self.rank == src else 0
        if self.rank == src:
            self.stats.add(category, -1, "all", nbytes, time.perf_counter() - t0)
        self._trace_collective(category, t0, nbytes, "broadcast")
        return box[0]

    def barrier(self) -> None:
        if self.world_size > 1:
            dist.barrier(group=self.group)


@contextmanager
def timed(stats: CommStats, counter: str, key: tuple, tensor: torch.Tensor, phase: str | None = None):
    """Count the time of the enclosed work on ``tensor``'s device under ``counter`` (CUDA: events on the current
    stream). ``phase`` ("encode" or "decode", gnnq.comm.trace): codec work, traced with its message."""
    start = Posted(tensor)
    yield
    if tensor.is_cuda:
        stats.add_interval(counter, key, start.event, stream_event(tensor.device))
    else:
        stats.add_seconds(counter, key, time.perf_counter() - start.at)
    if phase is not None and _tracing(stats):
        stats.trace.codec(key, phase, start.at, time.perf_counter())


def _tracing(stats: CommStats) -> bool:
    """Whether an epoch is being traced (``trainer.trace=true``, inside the epoch's timer)."""
    return stats.trace is not None and stats.trace.active


def _host_seconds(tensor: torch.Tensor, posted: Posted) -> float:
    """Exposed time of posting: the host's on CPU; on CUDA none (the stream, not the host, would wait)."""
    return 0.0 if tensor.is_cuda else time.perf_counter() - posted.at


def _count_wait(stats: CommStats, key: tuple, tensor: torch.Tensor, waited_from: Posted, posted: Posted | None) -> None:
    """Count a finished wait: exposed from ``waited_from``, transfer from ``posted`` (if still to count).

    Call right after the wait: on CPU the clock is read now; on CUDA an event is recorded on the
    current stream, behind the wait, and the intervals resolve when the counters are read.
    """
    if tensor.is_cuda:
        done = stream_event(tensor.device)
        stats.add_interval("seconds", key, waited_from.event, done)
        if posted is not None:
            stats.add_interval("transfer", key, posted.event, done)
        return
    now = time.perf_counter()
    stats.add_seconds("seconds", key, now - waited_from.at)
    if posted is not None:
        stats.add_seconds("transfer", key, now - posted.at)


def _count_transfer(stats: CommStats, key: tuple, tensor: torch.Tensor, posted: Posted) -> None:
    """Count a message's transfer time (from ``posted`` to now), not as exposed."""
    if tensor.is_cuda:
        stats.add_interval("transfer", key, posted.event, stream_event(tensor.device))
    else:
        stats.add_seconds("transfer", key, time.perf_counter() - posted.at)


class PendingMessage:
    """A message in flight: an all-to-all, or one point-to-point send or receive."""

    def __init__(self, stats: CommStats, key: tuple, work, out: torch.Tensor, posted: Posted | None = None):
        self.stats, self.key, self.work, self.out = stats, key, work, out
        self.posted = posted
        self.msg: str | None = None  # its id in the trace (gnnq.comm.trace), when posted while tracing

    def wait(self, exposed: bool = True) -> torch.Tensor:
        """The received tensor. The wait counts as exposed communication unless ``exposed`` is False
        (a side stream waits here, and its consumer's wait is counted where that one waits).

        On CUDA the host does not block: with NCCL the current stream waits for the message.
        """
        waited_from = Posted(self.out) if exposed else None
        started = waited_from.at if exposed else time.perf_counter()
        if self.work is not None:
            self.work.wait()
            self.work = None
        if _tracing(self.stats):
            self.stats.trace.wait(self.key, self.msg, started, time.perf_counter())
        if exposed:
            _count_wait(self.stats, self.key, self.out, waited_from, self.posted)
        elif self.posted is not None:
            _count_transfer(self.stats, self.key, self.out, self.posted)
        self.posted = None
        return self.out

    def count_consumer_wait(self, waited_from: Posted) -> None:
        """Count, as exposed, the wait of the stream that consumes this message (which began at ``waited_from``)."""
        _count_wait(self.stats, self.key, self.out, waited_from, None)

    def is_completed(self) -> bool:
        """Whether the backend reports it done, without waiting (NCCL: a CUDA event query; a gloo
        Work only completes inside ``wait()``). Call ``wait()`` still: it raises a failed message's error."""
        return self.work is None or self.work.is_completed()
