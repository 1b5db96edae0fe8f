"""One projection: a trace, a target cluster and an engine -> the modelled epochs.

The recorded cluster calibrates the one thing a trace cannot split by itself: the all-reduce's own overhead. For the
k-th all-reduce of an epoch, the rank that reached it last waited for no one, so its duration is the collective's
time; what exceeds the ring's transfer time on the recorded cluster (reductions, protocol) is kept as the
all-reduce's overhead and added wherever it is projected (median over epochs).

A recorded cluster with ``comm_interference`` k > 0 (``--recorded-cluster emulated``) also takes out of the trace the
compute its own messages slowed down (clean_compute): each compute op of traced length d, whose time was a share f busy
with the host's messages when the recording is replayed on the recorded cluster, keeps d * (1 - f * k / (1 + k)): the
compute it would have taken on an idle host. f depends on the cleaned compute, so the replay is repeated (3 times).
"""

from __future__ import annotations

import statistics
from dataclasses import replace

from gnnq.errors import ConfigError
from gnnq.projection.cluster import Cluster
from gnnq.projection.engine import AnalyticEngine, Projection
from gnnq.projection.timeline import Compute, Op, rank_timeline
from gnnq.projection.trace import Trace

ENGINES = ("analytic", "simgrid")


def ring_seconds(cluster: Cluster, nbytes: float, world: int, crosses_hosts: bool) -> float:
    """Ring all-reduce alone on ``cluster``: 2(N-1)/N of the bytes over the ring's slowest link, 2(N-1) latencies."""
    if world <= 1:
        return 0.0
    bw = cluster.link_Bps if crosses_hosts else cluster.intra_Bps
    lat = (cluster.latency_ms if crosses_hosts else cluster.intra_latency_ms) / 1e3
    return 2 * (world - 1) / world * nbytes / bw + 2 * (world - 1) * lat


def allreduce_overheads(trace: Trace, recorded: Cluster | None) -> list[float]:
    """Per all-reduce of an epoch (k-th), the collective's own overhead on the recorded cluster (seconds)."""
    w = trace.world_size
    crosses = len(set(trace.meta["rank_host"])) > 1
    per_k: dict[int, list[float]] = {}
    for e in range(trace.num_epochs):
        lists = [
            [ev for ev in trace.epochs[r][e]["events"] if ev["op"] == "allreduce" and ev.get("group") is None]
            for r in range(w)
        ]
        for k in range(min(len(x) for x in lists)):
            fastest = min(x[k]["t1"] - x[k]["t0"] for x in lists)
            transfer = ring_seconds(recorded, lists[0][k]["bytes"], w, crosses) if recorded else 0.0
            per_k.setdefault(k, []).append(max(0.0, fastest - transfer))
    return [statistics.median(per_k[k]) for k in sorted(per_k)]


def recorded_timelines(trace: Trace, recorded: Cluster | None) -> list[list[Op]]:
    """Every recorded rank's timeline, its all-reduces carrying the calibrated overheads (and, where the recorded
    cluster slows compute while messages move, its compute cleaned of that slowdown)."""
    over = allreduce_overheads(trace, recorded)
    n = trace.num_epochs
    timelines = [rank_timeline(trace.epochs[r][:n], [over] * n) for r in range(trace.world_size)]
    if recorded is not None and recorded.comm_interference > 0:
        timelines = clean_compute(timelines, recorded, [int(h) for h in trace.meta["rank_host"]])
    return timelines


def clean_compute(timelines: list[list[Op]], recorded: Cluster, rank_host: list[int], rounds: int = 3):
    """The timelines with each compute op as long as it would have been on a host that moved no bytes meanwhile."""
    k = recorded.comm_interference
    clean = timelines
    for _ in range(rounds):
        busy = AnalyticEngine(recorded, rank_host).run(clean).busy
        clean = [
            [
                replace(op, seconds=op.seconds * (1 - busy[r].get(i, 0.0) * k / (1 + k)))
                if isinstance(op, Compute)
                else op
                for i, op in enumerate(ops)
            ]
            for r, ops in enumerate(timelines)
        ]
    return clean


def make_engine(name: str, cluster: Cluster, rank_host: list[int] | None = None, simgrid_model: str = "LV08"):
    if name == "analytic":
        return AnalyticEngine(cluster, rank_host)
    if name == "simgrid":
        if cluster.comm_interference > 0:
            raise ConfigError("comm_interference is modelled by the analytic engine only: use --engine analytic")
        from gnnq.projection.simgrid_engine import SimGridEngine

        return SimGridEngine(cluster, rank_host, simgrid_model)
    raise ConfigError(f"--engine {name!r}: allowed: {', '.join(ENGINES)}")


def project_recorded(
    trace: Trace, cluster: Cluster, recorded: Cluster | None, engine: str = "analytic", simgrid_model: str = "LV08"
) -> Projection:
    """The recorded ranks, as placed when traced, on ``cluster`` (same hosts and ranks per host as the trace)."""
    if cluster.world_size != trace.world_size:
        raise ConfigError(
            f"the cluster has {cluster.world_size} ranks, the trace {trace.world_size}: use scaling.project_scaled"
        )
    rank_host = [int(h) for h in trace.meta["rank_host"]] if cluster.hosts == trace.meta["hosts"] else None
    return make_engine(engine, cluster, rank_host, simgrid_model).run(recorded_timelines(trace, recorded))
