"""The analytical replay: every rank's timeline on a modelled cluster, event by event.

- Compute takes its traced time divided by the cluster's ``compute_speed``.
- A post hands every part of its message (one per peer with bytes) to the network. A part starts moving when both
  its ranks have posted that message (an all-to-all is a collective: the receiver takes part), or at once when the
  receiver never posts it. It crosses the sender host's uplink and the receiver host's downlink (two ranks of one
  host: that host's intra-host bandwidth); it arrives ``latency`` after its last byte left.
- Links are shared max-min fairly (progressive filling) by the parts in flight on them; rates are recomputed
  whenever a part starts or ends, so a part's time follows what else is in flight.
- A wait ends at max(its own start, the arrival of every part of that message to or from this rank). Compute
  between a post and its wait overlaps the transfer. A wait for a message posted in an earlier epoch (a stale
  exchange) blocks only where it is: the epoch that posted it never waits for it.
- An all-reduce starts when every rank has reached it and is a ring: each rank sends 2(N-1)/N of the bytes to its
  ring successor (ranks host by host, so one flow per host uplink), plus 2(N-1) latencies and the collective's
  calibrated overhead (timeline.AllReduce). A collective on a sub-group (``AllReduce.group``: a line of
  parallel=tensor3d's grid) starts when every member has reached its k-th collective on that group; each member
  sends the bytes it counted to its ring successor among the members, plus 2(g-1) latencies (all-reduce) or g-1
  (all-gather, reduce-scatter). Groups on disjoint ranks run at once, sharing the links they cross.

- With ``comm_interference`` k > 0, a host's compute progresses at 1/(1 + k) of its speed while any part or ring
  flow of that host is in flight (cluster.py); each compute op's busy share is kept (``Projection.busy``: what
  project.clean_compute takes out of a recorded trace's compute).

``tolerance``: parts whose remaining time is within this fraction of the next completion finish together (fewer
rate recomputations on large clusters; error bounded by it).
"""

from __future__ import annotations

import heapq
import statistics
from dataclasses import dataclass, field

import numpy as np

from gnnq.errors import ConfigError
from gnnq.projection.cluster import Cluster
from gnnq.projection.timeline import AllReduce, Compute, EpochStart, Op, Post, Wait


@dataclass
class RankEpoch:
    start: float
    end: float = 0.0
    compute_s: float = 0.0
    halo_wait_s: float = 0.0
    allreduce_s: float = 0.0

    @property
    def epoch_s(self) -> float:
        return self.end - self.start


@dataclass
class Projection:
    """Per rank and epoch the modelled times; the epoch time is the slowest rank's, median over epochs."""

    rank_epochs: list[list[RankEpoch]]
    engine: str = "analytic"
    cluster: dict = field(default_factory=dict)
    busy: list[dict[int, float]] = field(default_factory=list)  # rank -> {op index: share of its time a flow moved}

    @property
    def num_epochs(self) -> int:
        return min(len(e) for e in self.rank_epochs)

    def slowest(self, e: int) -> RankEpoch:
        return max((eps[e] for eps in self.rank_epochs), key=lambda x: x.epoch_s)

    @property
    def per_epoch_s(self) -> list[float]:
        return [self.slowest(e).epoch_s for e in range(self.num_epochs)]

    @property
    def epoch_s(self) -> float:
        return statistics.median(self.per_epoch_s)

    def _median(self, attr: str) -> float:
        return statistics.median(getattr(self.slowest(e), attr) for e in range(self.num_epochs))

    def summary(self) -> dict:
        """Epoch time and its breakdown (the slowest rank of each epoch, medians over epochs)."""
        compute = self._median("compute_s")
        return {
            "epoch_s": self.epoch_s,
            "compute_s": compute,
            "exposed_comm_s": self.epoch_s - compute,
            "halo_wait_s": self._median("halo_wait_s"),
            "allreduce_s": self._median("allreduce_s"),
        }


class _Net:
    """Parts in flight, their remaining bytes and max-min fair rates over the hosts' links."""

    def __init__(self, cluster: Cluster, rank_host: list[int]):
        self.c, self.host = cluster, rank_host
        h = cluster.hosts
        self.cap = np.array([cluster.link_Bps] * (2 * h) + [cluster.intra_Bps] * h)  # up h: 2h, down h: 2h+1, intra
        self.rem = np.zeros(0)
        self.res = np.zeros((0, 2), dtype=np.int64)  # a flow's two resources (intra: the same one twice, counted once)
        self.keys: list = []
        self.rate = np.zeros(0)
        self.new: list = []  # (key, resources, bytes) added since the last step
        self.dirty = False

    def latency(self, src: int, dst: int) -> float:
        same = self.host[src] == self.host[dst]
        return (self.c.intra_latency_ms if same else self.c.latency_ms) / 1e3

    def add(self, key, src: int, dst: int, nbytes: float) -> None:
        hs, hd = self.host[src], self.host[dst]
        if hs == hd:
            r = (2 * self.c.hosts + hs, -1)
        elif self.c.duplex == "half":  # one link per host for both directions: its "up" resource
            r = (2 * hs, 2 * hd)
        else:
            r = (2 * hs, 2 * hd + 1)
        self.new.append((key, r, float(nbytes)))
        self.dirty = True

    def _flush(self) -> None:
        """Parts added since the last step join the arrays (once per step, not once per part)."""
        if self.new:
            self.rem = np.concatenate([self.rem, np.array([b for _, _, b in self.new])])
            self.res = np.vstack([self.res, np.array([r for _, r, _ in self.new], dtype=np.int64)])
            self.keys += [k for k, _, _ in self.new]
            self.new = []

    def _rates(self) -> None:
        self._flush()
        n = self.rem.size
        rate = np.zeros(n)
        if n == 0:
            self.rate, self.dirty = rate, False
            return
        a, b = self.res[:, 0], self.res[:, 1]
        has_b = b >= 0
        cap = self.cap.copy()
        free = np.ones(n, dtype=bool)
        nres = cap.size
        while free.any():
            cnt = np.bincount(a[free], minlength=nres) + np.bincount(b[free & has_b], minlength=nres)
            share = np.where(cnt > 0, cap / np.maximum(cnt, 1), np.inf)
            s = share.min()
            bott = share <= s * (1 + 1e-9)
            sel = free & (bott[a] | (has_b & bott[np.where(has_b, b, 0)]))
            rate[sel] = s
            free &= ~sel
            cap -= np.bincount(a[sel], minlength=nres) * s + np.bincount(b[sel & has_b], minlength=nres) * s
            cap = np.maximum(cap, 0.0)
        self.rate, self.dirty = rate, False

    def busy_hosts(self) -> np.ndarray:
        """Per host: does any flow in flight (or just added) use one of its links?"""
        h = self.c.hosts
        res = np.concatenate([self.res.ravel(), np.array([x for _, r, _ in self.new for x in r], dtype=np.int64)])
        res = res[res >= 0]
        busy = np.zeros(h, dtype=bool)
        busy[np.where(res < 2 * h, res // 2, res - 2 * h)] = True
        return busy

    def next_done(self) -> float:
        """Seconds until the next part finishes (inf when none moves)."""
        if self.dirty:
            self._rates()
        if self.rem.size == 0:
            return np.inf
        return float(np.min(self.rem / self.rate))

    def advance(self, dt: float) -> None:
        if self.rem.size and dt > 0:
            if self.dirty:
                self._rates()
            self.rem = self.rem - self.rate * dt

    def pop_done(self, dt_next: float, tolerance: float) -> list:
        """Keys of the parts that have finished (within ``tolerance`` of the step just taken)."""
        if self.rem.size == 0:
            return []
        done = self.rem <= self.rate * dt_next * tolerance + 1e-6
        if not done.any():
            return []
        keys = [k for k, d in zip(self.keys, done) if d]
        keep = ~done
        self.rem, self.res = self.rem[keep], self.res[keep]
        self.keys = [k for k, d in zip(self.keys, done) if not d]
        self.dirty = True
        return keys


class AnalyticEngine:
    name = "analytic"

    def __init__(self, cluster: Cluster, rank_host: list[int] | None = None, tolerance: float = 1e-3):
        self.cluster = cluster
        self.rank_host = rank_host or cluster.rank_host()
        self.tolerance = tolerance

    def run(self, timelines: list[list[Op]]) -> Projection:
        return _Replay(self.cluster, self.rank_host, timelines, self.tolerance).run()


class _Replay:
    def __init__(self, cluster: Cluster, rank_host: list[int], timelines: list[list[Op]], tolerance: float):
        if len(rank_host) != len(timelines):
            raise ConfigError(f"the cluster has {len(rank_host)} ranks but the timelines {len(timelines)}")
        self.c, self.host, self.tl, self.tol = cluster, rank_host, timelines, tolerance
        self.w = len(timelines)
        self.net = _Net(cluster, rank_host)
        self.now = 0.0
        self.heap: list = []
        self.seq = 0
        self.pc = [0] * self.w
        self.epochs: list[list[RankEpoch]] = [[] for _ in range(self.w)]
        self.posters: dict[str, set[int]] = {}
        for r, ops in enumerate(timelines):
            for op in ops:
                if isinstance(op, Post):
                    self.posters.setdefault(op.msg, set()).add(r)
        self.posted: dict[str, dict[int, Post]] = {}
        self.parts: dict[tuple, float | None] = {}  # (msg, src, dst) -> arrival time, None while in flight
        self.need: dict[tuple[str, int], list] = {}  # (msg, rank) -> [parts outstanding, latest arrival]
        self.waiting: dict[tuple[str, int], float] = {}  # (msg, rank) -> when the wait began
        self.ar_count: dict[tuple, int] = {}  # (rank, group) -> collectives of that group it reached
        self.ar_arrived: dict[tuple, dict[int, tuple[float, AllReduce]]] = {}  # (group, k) -> rank -> (when, op)
        self.ar_flows: dict[tuple, list] = {}  # (group, k) -> [ring flows outstanding, latencies + overhead after them]
        self.pending: dict[tuple[str, int], list] = {}  # (msg, rank) -> parts waiting for that rank to post msg
        self.end = [0.0] * self.w
        # comm_interference: per rank its compute in progress [work left, since, rate, op index, start, busy s, busy]
        self.k = cluster.comm_interference
        self.ver = [0] * self.w  # a rank's wake-ups before its last reschedule are stale
        self.comp: list[list | None] = [None] * self.w
        self.busy_prev = np.zeros(cluster.hosts, dtype=bool)
        self.on_host = [[r for r in range(self.w) if rank_host[r] == h] for h in range(cluster.hosts)]
        self.op_busy: list[dict[int, float]] = [{} for _ in range(self.w)]

    def wake(self, t: float, r: int) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (t, self.seq, r, self.ver[r]))

    def run(self) -> Projection:
        for r in range(self.w):
            self.wake(0.0, r)
        while True:
            t_rank = self.heap[0][0] if self.heap else np.inf
            dt = self.net.next_done()
            if self.now + dt <= t_rank and dt < np.inf:
                self.net.advance(dt)
                self.now += dt
                for key in self.net.pop_done(dt, self.tol):
                    self.part_done(key)
            elif t_rank < np.inf:
                self.net.advance(t_rank - self.now)
                self.now = t_rank
                while self.heap and self.heap[0][0] <= t_rank:  # every rank due now, before rates are recomputed
                    _, _, r, ver = heapq.heappop(self.heap)
                    if ver == self.ver[r]:
                        self.step(r)
            else:
                break
            if self.k > 0:
                self.interfere()
        stuck = [r for r in range(self.w) if self.pc[r] < len(self.tl[r])]
        if stuck:
            op = self.tl[stuck[0]][self.pc[stuck[0]]]
            raise ConfigError(f"the replay deadlocked: rank {stuck[0]} never got past {op} (is a trace incomplete?)")
        for r in range(self.w):
            if self.epochs[r]:
                self.epochs[r][-1].end = self.end[r]
        return Projection(self.epochs, AnalyticEngine.name, self.c.to_dict(), self.op_busy)

    def step(self, r: int) -> None:
        """Run rank r's ops from now until it blocks or has computed up to a later time."""
        ops = self.tl[r]
        if self.comp[r] is not None:
            self.compute_done(r)
        while self.pc[r] < len(ops):
            op = ops[self.pc[r]]
            self.pc[r] += 1
            cur = self.epochs[r][-1] if self.epochs[r] else None
            if isinstance(op, EpochStart):
                if cur is not None:
                    cur.end = self.now
                self.epochs[r].append(RankEpoch(self.now))
            elif isinstance(op, Compute):
                d = op.seconds / self.c.compute_speed
                if d > 0 and self.k > 0:
                    busy = bool(self.busy_prev[self.host[r]])
                    rate = self.compute_rate(busy)
                    self.comp[r] = [d, self.now, rate, self.pc[r] - 1, self.now, 0.0, busy]
                    self.wake(self.now + d / rate, r)
                    return
                if cur is not None:
                    cur.compute_s += d
                if d > 0:
                    self.wake(self.now + d, r)
                    return
            elif isinstance(op, Post):
                self.post(r, op)
            elif isinstance(op, Wait):
                if not self.wait(r, op.msg):
                    return
            elif isinstance(op, AllReduce):
                self.allreduce(r, op)
                return
        self.end[r] = self.now

    # -- compute slowed by the host's own messages (comm_interference) --
    def compute_done(self, r: int) -> None:
        _, since, _, idx, start, busy_s, busy = self.comp[r]
        busy_s += (self.now - since) if busy else 0.0
        wall = self.now - start
        self.op_busy[r][idx] = busy_s / wall if wall > 0 else 0.0
        if self.epochs[r]:
            self.epochs[r][-1].compute_s += wall
        self.comp[r] = None

    def compute_rate(self, busy: bool) -> float:
        """Compute speed of a rank whose host's link is ``busy`` (moving its messages), relative to an idle host's."""
        return 1 / (1 + self.k) if busy else 1.0

    def interfere(self) -> None:
        """Hosts whose links started or stopped carrying flows: their computing ranks change speed."""
        busy = self.net.busy_hosts()
        changed = np.nonzero(busy != self.busy_prev)[0]
        self.busy_prev = busy
        for h in changed:
            for r in self.on_host[h]:
                c = self.comp[r]
                if c is None:
                    continue
                elapsed = self.now - c[1]
                c[0] = max(0.0, c[0] - elapsed * c[2])
                c[5] += elapsed if c[6] else 0.0
                c[1], c[6] = self.now, bool(busy[h])
                c[2] = self.compute_rate(c[6])
                self.ver[r] += 1
                self.wake(self.now + c[0] / c[2], r)

    # -- messages --
    def post(self, r: int, op: Post) -> None:
        self.posted.setdefault(op.msg, {})[r] = op
        rec = self.need.setdefault((op.msg, r), [0, 0.0])
        for q in range(self.w):
            if q == r:
                continue
            if op.send_bytes[q] > 0:
                self._want(op.msg, r, q, rec)
            if op.recv_bytes[q] > 0:
                self._want(op.msg, q, r, rec)
        for key in self.pending.pop((op.msg, r), []):  # parts that waited for this rank to take part
            self.net.add(("halo", key), key[1], key[2], self.posted[op.msg][key[1]].send_bytes[key[2]])

    def _ready(self, msg: str, src: int, dst: int) -> bool:
        """Both ends have posted (or the receiver never posts this message)."""
        posted = self.posted[msg]
        return src in posted and (dst in posted or dst not in self.posters.get(msg, ()))

    def _want(self, msg: str, src: int, dst: int, rec: list) -> None:
        """Rank (the owner of ``rec``) needs part src -> dst of ``msg``: count it, start it if both ends are in."""
        key = (msg, src, dst)
        if key in self.parts:
            arrival = self.parts[key]
            if arrival is None:
                rec[0] += 1
            else:
                rec[1] = max(rec[1], arrival)
            return
        if src not in self.posters.get(msg, ()):  # never posted by the sender (a truncated trace): nothing comes
            return
        self.parts[key] = None
        rec[0] += 1
        if self._ready(msg, src, dst):
            self.net.add(("halo", key), src, dst, self.posted[msg][src].send_bytes[dst])
        else:
            missing = src if src not in self.posted[msg] else dst
            self.pending.setdefault((msg, missing), []).append(key)

    def part_done(self, key) -> None:
        kind, ident = key
        if kind == "ring":
            self.ring_done(ident)
            return
        msg, src, dst = ident
        arrival = self.now + self.net.latency(src, dst)
        self.parts[ident] = arrival
        for r in (src, dst):
            rec = self.need.get((msg, r))
            if rec is None or rec[0] == 0:
                continue
            rec[0] -= 1
            rec[1] = max(rec[1], arrival)
            if rec[0] == 0 and (msg, r) in self.waiting:
                began = self.waiting.pop((msg, r))
                t = max(began, rec[1])
                self.epochs[r][-1].halo_wait_s += t - began
                self.wake(t, r)

    def wait(self, r: int, msg: str) -> bool:
        """True when rank r may go on now; else it sleeps until the message is complete."""
        rec = self.need.get((msg, r))
        if rec is None:  # never posted by this rank: nothing it could wait for
            return True
        if rec[0] == 0:
            if rec[1] > self.now:
                self.epochs[r][-1].halo_wait_s += rec[1] - self.now
                self.wake(rec[1], r)
                return False
            return True
        self.waiting[(msg, r)] = self.now
        return False

    # -- all-reduce --
    def allreduce(self, r: int, op: AllReduce) -> None:
        """The k-th collective of rank r on its group (every rank: op.group None) starts when all members arrived."""
        members = op.group if op.group is not None else tuple(range(self.w))
        if r not in members:
            raise ConfigError(f"rank {r} takes part in a collective of group {list(members)} it is not in")
        count = self.ar_count.setdefault((r, op.group), 0)
        self.ar_count[(r, op.group)] += 1
        k = (op.group, count)
        arrived = self.ar_arrived.setdefault(k, {})
        arrived[r] = (self.now, op)
        if len(arrived) < len(members):
            return
        n = len(members)
        ring = sorted(members, key=lambda q: (self.host[q], q))
        if op.group is None:  # the payload; a ring moves 2(N-1)/N of it per rank
            nbytes = 2 * (n - 1) / n * max(o.bytes for _, o in arrived.values())
        else:  # what each member puts on the wire, as counted
            nbytes = max(o.bytes for _, o in arrived.values())
        overhead = max(o.overhead_s for _, o in arrived.values())
        lat = 0.0
        flows = 0
        if n > 1 and nbytes > 0:
            for i, src in enumerate(ring):
                dst = ring[(i + 1) % n]
                self.net.add(("ring", k), src, dst, nbytes)
                flows += 1
                lat = max(lat, self.net.latency(src, dst))
        self.ar_flows[k] = [flows, op.ring_steps(n) * lat + overhead]
        if flows == 0:
            self.ring_done(k, started=True)

    def ring_done(self, k: tuple, started: bool = False) -> None:
        rec = self.ar_flows[k]
        if not started:
            rec[0] -= 1
            if rec[0] > 0:
                return
        end = self.now + rec[1]
        for r, (t, _) in self.ar_arrived.pop(k).items():
            self.epochs[r][-1].allreduce_s += end - t
            self.wake(end, r)
