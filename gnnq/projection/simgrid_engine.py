"""The same replay on SimGrid (https://simgrid.org), evaluated against the analytical engine (docs/projection.md).

One SimGrid host per modelled host in a full zone: every host has an uplink and a downlink (SHARED links of the
cluster's bandwidth) and a loopback link of the intra-host bandwidth; the route between two hosts is the sender's
uplink and the receiver's downlink. Each rank is an actor that replays its timeline: compute is ``sleep_for``, a post
puts one asynchronous message per peer (``put_async``) and takes one per peer (``get_async``), a wait waits for this
rank's parts of the message, and an all-reduce runs the ring algorithm itself (2(N-1) steps of 1/N of the bytes).
SimGrid's network model (``model``: LV08, its default, with its bandwidth and latency corrections for TCP; CM02,
plain max-min sharing) decides how long each message takes.

SimGrid allows one engine per process, so every replay runs in a forked child. Its Python bindings come from
Debian's ``python3-simgrid`` (3.32, built for the system Python 3.11): when ``import simgrid`` fails, the Debian
directory is tried, which works for any CPython 3.11.
"""

from __future__ import annotations

import glob
import multiprocessing
import sys

from gnnq.errors import ConfigError
from gnnq.projection.cluster import Cluster
from gnnq.projection.engine import Projection, RankEpoch
from gnnq.projection.timeline import AllReduce, Compute, EpochStart, Op, Post, Wait

DEBIAN_DIR = "/usr/lib/python3/dist-packages"
MODELS = ("LV08", "CM02")


def simgrid_module():
    """The simgrid module, or ConfigError saying how to install it."""
    try:
        import simgrid
    except ImportError:
        tag = f"cpython-{sys.version_info.major}{sys.version_info.minor}"
        if not glob.glob(f"{DEBIAN_DIR}/simgrid.{tag}-*.so"):
            raise ConfigError(
                "engine=simgrid needs SimGrid's Python bindings: apt-get install python3-simgrid "
                f"(Debian's build is for Python 3.11; this is {sys.version_info.major}.{sys.version_info.minor})"
            ) from None
        sys.path.append(DEBIAN_DIR)
        import simgrid
    return simgrid


class SimGridEngine:
    name = "simgrid"

    def __init__(self, cluster: Cluster, rank_host: list[int] | None = None, model: str = "LV08"):
        if model not in MODELS:
            raise ConfigError(f"--simgrid-model {model!r}: allowed: {', '.join(MODELS)}")
        self.cluster, self.model = cluster, model
        self.rank_host = rank_host or cluster.rank_host()

    def run(self, timelines: list[list[Op]]) -> Projection:
        if any(isinstance(op, AllReduce) and op.group is not None for ops in timelines for op in ops):
            raise ConfigError(
                "collectives on sub-groups (parallel=tensor3d's grid) are modelled by the analytic engine only: "
                "use --engine analytic"
            )
        simgrid_module()  # a clear error here, before forking
        ctx = multiprocessing.get_context("fork")
        parent, child = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_child, args=(child, self.cluster, self.rank_host, timelines, self.model))
        proc.start()
        child.close()
        try:
            ok, payload = parent.recv()
        except EOFError:
            ok, payload = False, "the SimGrid process died"
        proc.join()
        if not ok:
            raise ConfigError(f"SimGrid replay failed: {payload}")
        return Projection(payload, self.name, {**self.cluster.to_dict(), "simgrid_model": self.model})


def _child(conn, cluster, rank_host, timelines, model) -> None:
    try:
        conn.send((True, _simulate(cluster, rank_host, timelines, model)))
    except BaseException as exc:  # noqa: BLE001 - any failure goes back as the message
        conn.send((False, f"{type(exc).__name__}: {exc}"))
    finally:
        conn.close()


def _simulate(cluster: Cluster, rank_host: list[int], timelines: list[list[Op]], model: str):
    sg = simgrid_module()
    engine = sg.Engine(["gnnq-project", "--log=root.thres:critical", f"--cfg=network/model:{model}"])
    zone = sg.NetZone.create_full_zone("cluster")
    hosts = [zone.create_host(f"h{h}", 1e9) for h in range(cluster.hosts)]
    lat, ilat = cluster.latency_ms / 1e3, cluster.intra_latency_ms / 1e3
    bw = cluster.link_Bps if model == "CM02" else cluster.link_Bps / cluster.goodput  # LV08 applies its own factor
    ups = [zone.create_link(f"up{h}", bw).set_latency(lat / 2) for h in range(cluster.hosts)]
    downs = [zone.create_link(f"down{h}", bw).set_latency(lat / 2) for h in range(cluster.hosts)]
    loops = [zone.create_link(f"loop{h}", cluster.intra_Bps).set_latency(ilat) for h in range(cluster.hosts)]
    for i in range(cluster.hosts):
        for j in range(cluster.hosts):
            down = ups[j] if cluster.duplex == "half" else downs[j]  # half duplex: one link per host, both ways
            links = [loops[i]] if i == j else [ups[i], down]
            zone.add_route(hosts[i].netpoint, hosts[j].netpoint, None, None, [sg.LinkInRoute(x) for x in links], False)
    zone.seal()
    world = len(timelines)
    epochs: list[list[RankEpoch]] = [[] for _ in range(world)]
    ring = sorted(range(world), key=lambda q: (rank_host[q], q))

    def actor(r: int) -> None:
        comms: dict[str, list] = {}
        ar_k = 0
        for op in timelines[r]:
            now = sg.Engine.clock
            if isinstance(op, EpochStart):
                if epochs[r]:
                    epochs[r][-1].end = now
                epochs[r].append(RankEpoch(now))
            elif isinstance(op, Compute):
                d = op.seconds / cluster.compute_speed
                epochs[r][-1].compute_s += d
                if d > 0:
                    sg.this_actor.sleep_for(d)
            elif isinstance(op, Post):
                mine = comms.setdefault(op.msg, [])
                for q in range(world):
                    if q != r and op.send_bytes[q] > 0:
                        mine.append(sg.Mailbox.by_name(f"{op.msg}:{r}:{q}").put_async(r, int(op.send_bytes[q])))
                    if q != r and op.recv_bytes[q] > 0:
                        mine.append(sg.Mailbox.by_name(f"{op.msg}:{q}:{r}").get_async())  # (comm, its buffer)
            elif isinstance(op, Wait):
                for c in comms.pop(op.msg, []):
                    (c[0] if isinstance(c, tuple) else c).wait()  # a get's buffer lives until its comm is done
                epochs[r][-1].halo_wait_s += sg.Engine.clock - now
            elif isinstance(op, AllReduce):
                _ring_allreduce(sg, r, ring, op, ar_k)
                ar_k += 1
                if op.overhead_s > 0:
                    sg.this_actor.sleep_for(op.overhead_s)
                epochs[r][-1].allreduce_s += sg.Engine.clock - now
        if epochs[r]:
            epochs[r][-1].end = sg.Engine.clock

    for r in range(world):
        sg.Actor.create(f"rank{r}", hosts[rank_host[r]], actor, r)
    engine.run()
    return epochs


def _ring_allreduce(sg, r: int, ring: list[int], op: AllReduce, k: int) -> None:
    """Reduce-scatter then all-gather around the ring: 2(N-1) steps, each sending 1/N of the bytes onward."""
    n = len(ring)
    if n == 1 or op.bytes <= 0:
        return
    i = ring.index(r)
    nxt, prv = ring[(i + 1) % n], ring[(i - 1) % n]
    chunk = max(1, int(op.bytes / n))
    for step in range(2 * (n - 1)):
        send = sg.Mailbox.by_name(f"ar{k}:{step}:{r}:{nxt}").put_async(r, chunk)
        recv = sg.Mailbox.by_name(f"ar{k}:{step}:{prv}:{r}").get_async()  # keep its buffer until the comm is done
        send.wait()
        recv[0].wait()
