"""trainer.trace=true with parallel=tensor3d on 4 gloo ranks: the grid's collectives on the timeline (each on its
line of the grid, with its layer and direction), their bytes the analytic count, and the analytic engine replays
them (gnnq.projection)."""

from __future__ import annotations

import time

from gnnq.comm import Communicator
from gnnq.comm.trace import TraceRecorder
from gnnq.parallel.tensor3d_grid import Grid, epoch_bytes
from gnnq.projection.cluster import Cluster
from gnnq.projection.engine import AnalyticEngine
from gnnq.projection.timeline import rank_timeline
from gnnq.train.tensor3d import Tensor3dTrainer
from tests.helpers import random_graph, run_distributed
from tests.integration.test_tensor3d import LAYERS, _cfg, _whole_part

GRID = (2, 2, 1)


def _traced_step(quantizer: str):
    graph = random_graph()
    comm = Communicator()
    trainer = Tensor3dTrainer(_cfg(GRID, "double", "every_epoch", True, quantizer), _whole_part(graph), comm)
    lines: list[dict] = []
    comm.stats.trace = TraceRecorder(comm.rank, comm.world_size, lines.append)
    t0 = time.perf_counter()
    comm.stats.trace.begin_epoch(1, t0)
    trainer.train_step(1)
    comm.stats.trace.end_epoch(time.perf_counter() - t0)
    comm.stats.trace = None
    return {"line": lines[0], "dims": trainer.dims, "nodes": graph.num_nodes}


def _check(results: list[dict], exact: bool) -> None:
    grid = Grid(*GRID)
    for rank, res in enumerate(results):
        events = [e for e in res["line"]["events"] if e["op"] == "allreduce"]
        assert events and all(rank in e["group"] and len(e["group"]) == 2 for e in events)
        assert {e["layer"] for e in events} == set(range(LAYERS)) and {e["direction"] for e in events} == {"fwd", "bwd"}
        for post in (e for e in res["line"]["events"] if e["op"] == "post"):
            assert len(post["send_bytes"]) == 4 and post["send_bytes"][rank] == 0
    sent = sum(
        e["bytes"] if e["op"] == "allreduce" else sum(e["send_bytes"])
        for res in results
        for e in res["line"]["events"]
        if e["op"] in ("allreduce", "post")
    )
    analytic = sum(
        epoch_bytes(grid, results[0]["nodes"], results[0]["dims"], bias=True, inputs_every_epoch=True).values()
    )
    assert sent == analytic if exact else 0 < sent < analytic
    timelines = [rank_timeline([res["line"]]) for res in results]
    proj = AnalyticEngine(Cluster(hosts=4, ranks_per_host=1, link_gbit=0.001)).run(timelines)
    assert proj.epoch_s > sent / 4 / (0.001e9 / 8) / 2  # at 1 Mbit/s the bytes dominate: the replay moved them


def test_tensor3d_trace_fp32():
    _check(run_distributed(4, _traced_step, "fp32"), exact=True)


def test_tensor3d_trace_quantized():
    _check(run_distributed(4, _traced_step, "uniform"), exact=False)
