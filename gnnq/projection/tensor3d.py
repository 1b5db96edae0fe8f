"""Projections of parallel=tensor3d (Plexus's 3D grid) to a rank count that was not traced, and Plexus's own
performance model's epoch time beside them.

A grid's ranks are not parts of the graph with halos: at K ranks the grid itself changes (Plexus's rule,
``tensor3d_grid.choose_grid``), and with it every block and every collective. So the timelines of K ranks are
rebuilt, not replayed rank by rank (docs/projection.md, "parallel=tensor3d"):

- the graph: ``--graph grow`` nodes and nonzeros times K / W (W: ranks traced), ``same`` the traced graph;
- per epoch, per layer forward then per layer backward (last layer first): the layer's compute, then its collectives
  (``tensor3d_grid.epoch_collectives``: each on the new rank's line of the grid, ``AllReduce.group``), then the rest;
- a layer's compute per direction: a * S + b * M, S = nnz / (d o) * din / i (the block's SpMM), M = N / d * din / i *
  dout / o (its dense products), a, b >= 0 fitted by least squares on the traced layers (equal weights when they
  cannot be); the rest (loss, optimizer, other) scales with the rows per rank;
- quantized grids (``plexus_q``): each layer and direction's collectives carry the traced ratio of its bytes to the
  exact count at the traced grid;
- what the partition methods' replays keep, kept alike: new rank r's compute carries traced rank r mod W's share of
  the traced compute (the recorded imbalance), and every collective the traced cost of one grid collective beyond
  its bytes (``group_overhead``, calibrated as the world all-reduce's overhead is).

``plexus_model_epoch_s``: Plexus's model (performance/comm_model.py v1 and comp_model.py, as tensor3d_grid restates
them) for the same grid: its communication volume per rank over the link's bandwidth, plus its SpMM cost times
seconds per unit, the one constant it lacks, calibrated on the traced run (its layer compute over the model's cost
at the traced grid).
"""

from __future__ import annotations

import statistics

import numpy as np

from gnnq.parallel.tensor3d_grid import (
    FLOAT_BYTES,
    Grid,
    choose_grid,
    epoch_collectives,
    plexus_comm_volume,
    plexus_spmm_cost,
    role_axis,
)
from gnnq.projection.cluster import Cluster
from gnnq.projection.scaling import layer_seconds
from gnnq.projection.timeline import AllReduce, Compute, EpochStart, Op
from gnnq.projection.trace import Trace

EPOCHS = 2  # rebuilt epochs are alike (medians of the traced ones): two show the steady state


def is_grid_trace(trace: Trace) -> bool:
    """A trace of a parallel choice whose messages are the grid's collectives (its registry line says so)."""
    from gnnq.config.registry import PARALLEL

    name = (trace.meta.get("method") or {}).get("parallel")
    return name in PARALLEL and PARALLEL.choice(name).messages == "grid" and "tensor3d" in trace.meta


def graph_at(facts: dict, traced_ranks: int, ranks: int, mode: str) -> tuple[int, int]:
    """(nodes, nonzeros) of the graph projected onto ``ranks`` ranks."""
    if mode == "same" or ranks == traced_ranks:
        return int(facts["nodes"]), int(facts["nnz"])
    scale = ranks / traced_ranks
    return int(round(facts["nodes"] * scale)), int(round(facts["nnz"] * scale))


def layer_work(grid: Grid, nodes: int, nnz: int, dims: list[int], layer: int) -> tuple[float, float]:
    """(S, M): a rank's SpMM and dense work of ``layer`` (padded widths, as the run pads them)."""
    o, i, d = grid.sizes(layer)
    n, din, dout = grid.pad(nodes), grid.pad(dims[layer]), grid.pad(dims[layer + 1])
    return nnz / (d * o) * din / i, n / d * din / i * dout / o


def fit_compute(trace: Trace, timelines: list[list[Op]]) -> tuple[dict, dict, dict]:
    """Per direction (a, b) of the layer compute model, the traced seconds per (layer, direction) (mean over ranks of
    the median over epochs) and the traced rest (loss, optimizer, other) per epoch."""
    from scipy.optimize import nnls

    f = trace.meta["tensor3d"]
    grid, dims = Grid(*f["grid"]), list(f["dims"])
    secs = layer_seconds(timelines, trace.num_epochs)
    traced: dict = {}
    for (_, layer, direction), s in secs.items():
        if direction in ("fwd", "bwd") and layer + 1 < len(dims):
            traced.setdefault((layer, direction), []).append(s)
    traced = {k: statistics.fmean(v) for k, v in traced.items()}
    coef = {}
    for direction in ("fwd", "bwd"):
        keys = sorted(k for k in traced if k[1] == direction)
        x = np.array([layer_work(grid, f["nodes"], f["nnz"], dims, k[0]) for k in keys], dtype=float).reshape(-1, 2)
        y = np.array([traced[k] for k in keys])
        sol = None
        if len(keys) >= 2 and (x.max(axis=0) > 0).all():
            scale = x.max(axis=0)
            if np.linalg.matrix_rank(x / scale) == 2:
                sol, _ = nnls(x / scale, y)
                sol = sol / scale if (sol > 0).any() else None
        if sol is None:  # equal weights per unit of work, scaled to the traced total
            work = x.sum() if len(keys) else 0.0
            sol = np.array([y.sum() / work] * 2) if work > 0 else np.zeros(2)
        coef[direction] = (float(sol[0]), float(sol[1]))
    rest = []
    for ops in timelines:
        per_epoch, e = {}, -1
        for op in ops:
            if isinstance(op, EpochStart):
                e += 1
            elif isinstance(op, Compute) and not (op.kind == "layer" and op.layer is not None):
                per_epoch[e] = per_epoch.get(e, 0.0) + op.seconds
        rest.append(statistics.median(per_epoch.values()) if per_epoch else 0.0)
    return coef, traced, {"rest": statistics.fmean(rest)}


def group_overhead(trace: Trace) -> float:
    """The traced cost of one grid collective beyond moving its bytes, calibrated as the world all-reduce's is
    (project.allreduce_overheads, with no recorded link): per k-th collective of an epoch the fastest rank's duration
    (the last to arrive waited for no one), median over epochs, then over the collectives of an epoch."""
    per_k: dict[int, list[float]] = {}
    for e in range(trace.num_epochs):
        lists = [
            [ev for ev in trace.epochs[r][e]["events"] if ev["op"] == "allreduce" and ev.get("group") is not None]
            for r in range(trace.world_size)
        ]
        for k in range(min(len(x) for x in lists)):
            per_k.setdefault(k, []).append(min(x[k]["t1"] - x[k]["t0"] for x in lists))
    return statistics.median(statistics.median(v) for v in per_k.values()) if per_k else 0.0


def rank_shares(timelines: list[list[Op]]) -> list[float]:
    """Each traced rank's layer compute over the ranks' mean (the traced imbalance, kept as the partition methods'
    replays keep theirs)."""
    totals = [sum(op.seconds for op in ops if isinstance(op, Compute) and op.kind == "layer") for ops in timelines]
    mean = statistics.fmean(totals)
    return [t / mean if mean > 0 else 1.0 for t in totals]


def byte_ratios(trace: Trace) -> dict:
    """(layer, direction) -> the traced bytes of its messages over the exact count at the traced grid (1: exact)."""
    f = trace.meta["tensor3d"]
    grid = Grid(*f["grid"])
    exact: dict = {}
    for c in epoch_collectives(grid, f["nodes"], f["dims"], bias=f["bias"], inputs_every_epoch=f["inputs_every_epoch"]):
        exact[(c.layer, c.direction)] = exact.get((c.layer, c.direction), 0) + c.wire * FLOAT_BYTES
    sent: dict = {}
    for r in range(trace.world_size):
        for ep in trace.epochs[r][: trace.num_epochs]:
            for ev in ep["events"]:
                key = (ev.get("layer"), ev.get("direction"))
                if ev["op"] == "allreduce" and ev.get("group") is not None:
                    sent[key] = sent.get(key, 0) + ev["bytes"]
                elif ev["op"] == "post":
                    sent[key] = sent.get(key, 0) + sum(ev["send_bytes"])
    per = trace.world_size * trace.num_epochs
    return {k: sent.get(k, 0) / per / v for k, v in exact.items() if v > 0}


def grid_timelines(trace: Trace, recorded: list[list[Op]], cluster: Cluster, mode: str) -> tuple[list, dict]:
    """The timelines of ``cluster``'s ranks on the grid Plexus's rule picks for them, and what was used."""
    f = trace.meta["tensor3d"]
    dims, k, w = list(f["dims"]), cluster.world_size, trace.world_size
    nodes, nnz = graph_at(f, w, k, mode)
    grid = choose_grid(k, nodes, nnz, dims)
    coef, traced, rest = fit_compute(trace, recorded)
    ratios = byte_ratios(trace) if f.get("quantized") else {}
    colls = epoch_collectives(grid, nodes, dims, bias=f["bias"], inputs_every_epoch=f["inputs_every_epoch"])
    rest_s = rest["rest"] * (nodes / k) / (f["nodes"] / w)
    overhead, shares = group_overhead(trace), rank_shares(recorded)
    layers = len(dims) - 1
    order = [(layer, "fwd") for layer in range(layers)] + [(layer, "bwd") for layer in reversed(range(layers))]
    timelines = []
    for r in range(k):
        lines = {a: next(g for g in grid.groups(a) if r in g) for a in ("x", "y", "z")}
        ops: list[Op] = []
        for e in range(EPOCHS):
            ops.append(EpochStart(e))
            for layer, direction in order:
                a, b = coef[direction]
                s_work, m_work = layer_work(grid, nodes, nnz, dims, layer)
                ops.append(Compute((a * s_work + b * m_work) * shares[r % w], "layer", layer, direction))
                for c in (c for c in colls if (c.layer, c.direction) == (layer, direction)):
                    axis = role_axis(layer, c.role)
                    nbytes = int(round(c.wire * FLOAT_BYTES * ratios.get((layer, direction), 1.0)))
                    ops.append(AllReduce(nbytes, "tensor_train", overhead, tuple(lines[axis]), c.kind))
            ops.append(Compute(rest_s * shares[r % w], "other"))
        timelines.append(ops)
    traced_layers = sum(traced.values())
    used = {
        "grid": grid.label(),
        "collective_overhead_s": overhead,
        "_plexus": (grid, nodes, nnz, dims, traced_layers, f),
    }
    return timelines, used


def plexus_model_epoch_s(used: dict, cluster: Cluster) -> dict:
    """Plexus's model's epoch time for the grid of ``used`` on ``cluster``'s link (v1: one bandwidth for every
    axis): its bytes per rank over the link, plus its SpMM cost at seconds per unit calibrated on the trace."""
    grid, nodes, nnz, dims, traced_layers, f = used["_plexus"]
    traced_grid = Grid(*f["grid"])
    unit = plexus_spmm_cost(traced_grid, f["nodes"], f["nnz"], f["dims"][:-1])
    seconds_per_unit = traced_layers / unit if unit > 0 else 0.0
    comm = plexus_comm_volume(grid, nodes, dims) / cluster.link_Bps
    comp = seconds_per_unit * plexus_spmm_cost(grid, nodes, nnz, dims[:-1])
    return {"plexus_model_epoch_s": comm + comp, "plexus_model_comm_s": comm, "plexus_model_comp_s": comp}
