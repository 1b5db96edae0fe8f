"""Per-channel transfer times, measured with every channel of an exchange active at once.

Training posts all its sends together, so a channel's time depends on the traffic around
it (shared NICs, links, copy engines and CPU). The profile therefore sends to every peer
at once, as the real exchange does, and times each incoming channel at its receiver.
"""

from __future__ import annotations

import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor

import torch
import torch.distributed as dist

from gnnq.comm.accounting import OVERHEAD
from gnnq.comm.communicator import Communicator, PendingMessage

# Profile payload is OVERHEAD traffic (work outside epochs); this direction keeps it apart from the rest of it.
PROFILE_DIRECTION = "profile"
_POLL_SLEEP_S = 1e-5

Channel = tuple[int, int]
Samples = dict[Channel, list[tuple[int, float]]]


def profile_channels(comm: Communicator, send_bytes: list[list[int]], repeats: int) -> Samples:
    """Time every channel src -> this rank, with all channels of a round active at once.

    ``send_bytes[k][q]`` is how many bytes this rank sends to rank q in round k; the entry
    for this rank is ignored (nothing crosses the wire). Every rank calls this with the
    same number of rounds. The round sizes of all ranks are exchanged first, so a receiver
    knows what arrives from each peer; a malformed table raises ValueError on every rank.

    All rounds run once untimed (warm-up: the first messages on a channel are several times
    slower), then ``repeats`` timed times, interleaved so that slow drift spreads over all
    sizes. A round starts with a barrier; each rank then takes its own
    clock as the common start, posts a receive per incoming channel and a send per
    outgoing one (``Communicator.recv_start`` / ``send_start``), and records when each receive completes. How completion
    is observed:

    - gloo (CPU): a gloo Work only becomes complete inside ``wait()`` (``is_completed()``
      stays False however long ago the data landed), so one thread per incoming channel
      blocks in ``wait()``, which releases the GIL, and reads the clock when it returns.
    - NCCL (CUDA): ``wait()`` does not block the host, so the receiver polls
      ``is_completed()`` (a CUDA event query) with a very short sleep.

    Returns, for every channel (src, this rank) that carried bytes in some round, its
    ``repeats`` (bytes, seconds) samples per round. Every message goes through ``comm``, which
    counts the bytes this rank sends, warm-up included ((repeats + 1) times the table), under
    (OVERHEAD, -1, PROFILE_DIRECTION), with the time spent posting and waiting. One rank: {}.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    if comm.world_size == 1:
        return {}
    table = _exchange_rounds(comm, send_bytes)
    device = _device()
    rank = comm.rank
    senders = _senders(table, rank)
    send_buf = _buffer(max((max(_peers(row, rank), default=0) for row in table[rank]), default=0), device)
    recv_bufs = {p: _buffer(max(row[rank] for row in rounds), device) for p, rounds in senders}
    samples: Samples = defaultdict(list)
    with ThreadPoolExecutor(max_workers=comm.world_size - 1) as pool:
        for rep in range(repeats + 1):
            for k, out_bytes in enumerate(table[rank]):
                in_bytes = {p: rounds[k][rank] for p, rounds in senders}
                arrivals = _timed_round(comm, send_buf, recv_bufs, out_bytes, in_bytes, pool)
                if rep == 0:
                    continue  # warm-up pass
                for p, t in arrivals.items():
                    samples[(p, rank)].append((in_bytes[p], t))
    return dict(samples)


def _exchange_rounds(comm: Communicator, send_bytes: list[list[int]]) -> list[list[list[int]]]:
    """table[src][k][dst] on every rank; validated after the exchange so all ranks agree on errors."""
    table = comm.all_gather_object([[int(b) for b in row] for row in send_bytes], category=OVERHEAD)
    if len({len(rounds) for rounds in table}) != 1:
        raise ValueError(f"ranks disagree on the number of profile rounds: {[len(r) for r in table]}")
    for src, rounds in enumerate(table):
        for k, row in enumerate(rounds):
            if len(row) != comm.world_size or min(row, default=0) < 0:
                raise ValueError(f"rank {src} round {k}: need {comm.world_size} non-negative byte counts, got {row}")
    return table


def _peers(row: list[int], rank: int) -> list[int]:
    """The byte counts of ``row`` that cross the wire (every entry but this rank's)."""
    return [n for q, n in enumerate(row) if q != rank]


def _senders(table: list[list[list[int]]], rank: int):
    """(src, rounds) for every peer that sends this rank bytes in some round."""
    return [(p, rounds) for p, rounds in enumerate(table) if p != rank and any(row[rank] for row in rounds)]


def _device() -> torch.device:
    if dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _buffer(nbytes: int, device: torch.device) -> torch.Tensor:
    # Zero-filled (not empty) so its pages are touched before the clock runs.
    return torch.zeros(nbytes, dtype=torch.uint8, device=device)


def _timed_round(
    comm: Communicator,
    send_buf: torch.Tensor,
    recv_bufs: dict[int, torch.Tensor],
    out_bytes: list[int],
    in_bytes: dict[int, int],
    pool: ThreadPoolExecutor,
) -> dict[int, float]:
    """One round: the arrival time of each incoming channel."""
    rank, kw = comm.rank, {"category": OVERHEAD, "layer": -1, "direction": PROFILE_DIRECTION}
    comm.barrier()
    t0 = time.perf_counter()
    recvs, sends = {}, []
    # NCCL runs ungrouped send/recv between the same two ranks in posting order on one stream, so
    # if both sides posted their receive first neither would finish: the lower rank sends first.
    for peer in sorted(set(in_bytes) | {q for q in range(len(out_bytes)) if q != rank}):
        for op in ("send", "recv") if rank < peer else ("recv", "send"):
            if op == "recv" and in_bytes.get(peer, 0) > 0:
                recvs[peer] = comm.recv_start(recv_bufs[peer][: in_bytes[peer]], peer, **kw)
            elif op == "send" and peer < len(out_bytes) and out_bytes[peer] > 0:
                sends.append(comm.send_start(send_buf[: out_bytes[peer]], peer, **kw))
    arrivals = _arrival_times(recvs, t0, pool, polling=send_buf.is_cuda)
    for pending in sends:
        pending.wait()
    if send_buf.is_cuda:
        torch.cuda.synchronize(send_buf.device)
    return arrivals


def _arrival_times(recvs: dict, t0: float, pool: ThreadPoolExecutor, *, polling: bool) -> dict[int, float]:
    if polling:
        return _poll(recvs, t0)
    futures = {p: pool.submit(_wait_then_clock, work, t0) for p, work in recvs.items()}
    return {p: f.result() for p, f in futures.items()}


def _wait_then_clock(pending: PendingMessage, t0: float) -> float:
    pending.wait()
    return time.perf_counter() - t0


def _poll(recvs: dict, t0: float) -> dict[int, float]:
    arrivals: dict[int, float] = {}
    while len(arrivals) < len(recvs):
        for p, pending in recvs.items():
            if p not in arrivals and pending.is_completed():
                arrivals[p] = time.perf_counter() - t0
        time.sleep(_POLL_SLEEP_S)
    for pending in recvs.values():
        pending.wait()  # a failed Work also reads as completed: wait() raises its error
    return arrivals
