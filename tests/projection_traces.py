"""Write small traces in gnnq's trace format (version 1, docs/projection.md) for the projection's tests.

Only the format is used here, never the trace writer's code: a test states each rank's events by hand and
``write_trace`` adds the meta.json a run would carry.
"""

from __future__ import annotations

import json
from pathlib import Path

MB = 1_000_000


def compute(t0: float, t1: float, what: str = "layer", layer: int | None = 0, direction: str | None = "fwd") -> dict:
    return {"op": "compute", "t0": t0, "t1": t1, "what": what, "layer": layer, "direction": direction}


def post(t0: float, t1: float, msg: str, send: list[int], recv: list[int], direction: str = "fwd", **kw) -> dict:
    return {
        "op": "post",
        "t0": t0,
        "t1": t1,
        "msg": msg,
        "category": "halo",
        "layer": kw.get("layer", 0),
        "direction": direction,
        "send_bytes": send,
        "recv_bytes": recv,
        "encode_s": kw.get("encode_s", 0.0),
    }


def wait(t0: float, t1: float, msg: str, decode_s: float = 0.0) -> dict:
    return {"op": "wait", "t0": t0, "t1": t1, "msg": msg, "decode_s": decode_s}


def allreduce(t0: float, t1: float, nbytes: int) -> dict:
    return {"op": "allreduce", "t0": t0, "t1": t1, "bytes": nbytes, "category": "grad"}


def write_trace(
    run_dir: Path,
    ranks: list[list[list[dict]]],
    *,
    hosts: int,
    ranks_per_host: int = 1,
    link_mbit: float | None = 1000.0,
    latency_ms: float = 0.0,
    epoch_s: list[list[float]] | None = None,
    parts: list[dict] | None = None,
    experiment: str = "fixture",
    stale: bool = False,
    widths: tuple[int, ...] = (64, 32, 8),
) -> Path:
    """``ranks[r][e]``: rank r's events in epoch e; epoch_s defaults to the end of the last event."""
    world = len(ranks)
    tdir = Path(run_dir) / "trace"
    tdir.mkdir(parents=True, exist_ok=True)
    if parts is None:
        parts = [
            {
                "rank": r,
                "inner_nodes": 1000,
                "local_edges": 10000,
                "halo_rows_from": [0] * world,
                "rows_to": [0] * world,
            }
            for r in range(world)
        ]
    meta = {
        "version": 1,
        "world_size": world,
        "hosts": hosts,
        "ranks_per_host": ranks_per_host,
        "rank_host": [r // ranks_per_host for r in range(world)],
        "method": {"parallel": "sync", "experiment": experiment, "quantizer": "fp32", "overlap": False, "stale": stale},
        "cluster": {
            "name": "emulated",
            "link_mbit": link_mbit,
            "latency_ms": latency_ms,
            "cores_per_host": 1.0,
            "pinned": True,
        },
        "model": {"name": "gcn", "layers": len(widths) - 1, "widths": list(widths)},
        "graph": {
            "name": "fixture",
            "num_nodes": 1000 * world,
            "num_edges": 10000 * world,
            "features": widths[0],
            "parts": parts,
        },
        "clock": "perf_counter seconds, relative to each epoch's start on that rank",
    }
    (tdir / "meta.json").write_text(json.dumps(meta))
    for r, epochs in enumerate(ranks):
        lines = []
        for e, events in enumerate(epochs):
            end = epoch_s[r][e] if epoch_s else max((ev["t1"] for ev in events), default=0.0)
            lines.append(json.dumps({"epoch": e, "rank": r, "epoch_s": end, "events": events}))
        (tdir / f"rank{r}.jsonl").write_text("\n".join(lines) + "\n")
    return Path(run_dir)
