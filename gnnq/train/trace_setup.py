"""Turn tracing on for a full-graph run (``trainer.trace=true``): ``trace/meta.json`` from the config and
every rank's part, and a recorder on the communicator's counters that writes ``trace/rank<r>.jsonl``
(the format: docs/runs.md#traces)."""

from __future__ import annotations

import os
from pathlib import Path

from omegaconf import OmegaConf

from gnnq.comm import Communicator
from gnnq.comm.accounting import CONTROL
from gnnq.comm.trace import TraceRecorder
from gnnq.config.registry import PARALLEL, TRACE_FLAGS
from gnnq.contract import LINK_PRESETS_MBIT
from gnnq.data.part import Part
from gnnq.track.trace_files import EpochLines, write_meta


def start_trace(
    cfg, part: Part, comm: Communicator, run_dir: Path | None, resume: bool = False, extra: dict | None = None
) -> EpochLines:
    """Write the meta file (rank 0; ``extra``: more top-level fields, a trainer's own), attach a recorder to
    ``comm``'s counters; returns this rank's line writer (close it, and set ``comm.stats.trace = None``, when
    training ends). Collective."""
    if run_dir is None:
        raise ValueError("trainer.trace=true needs a run directory to write trace/ into")
    own = {
        "rank": comm.rank,
        "inner_nodes": part.num_inner,
        "local_edges": int(part.indices.numel()),
        "halo_rows_from": [int(c) for c in part.halo_counts.tolist()],
        "rows_to": [int(c) for c in part.send_counts.tolist()],
        "cpus": sorted(os.sched_getaffinity(0)),
    }
    parts = comm.all_gather_object(own, category=CONTROL)
    if comm.rank == 0:
        write_meta(run_dir, trace_meta(cfg, part, parts, experiment_of(run_dir)) | (extra or {}))
    lines = EpochLines(run_dir, comm.rank, resume)
    comm.stats.trace = TraceRecorder(comm.rank, comm.world_size, lines)
    return lines


def stop_trace(comm: Communicator, lines: EpochLines) -> None:
    comm.stats.trace = None
    lines.close()


def trace_meta(cfg, part: Part, parts: list[dict], experiment: str | None) -> dict:
    """meta.json's fields (version and clock aside) from the config, this rank's part and every rank's part facts."""
    world = len(parts)
    c, m = cfg.cluster, cfg.model
    hosts = int(c.get("hosts", 1))
    per_host = max(1, world // max(1, hosts))
    rank_host = [r // per_host for r in range(world)]
    host_cpus = [sorted({cpu for p in parts if rank_host[p["rank"]] == h for cpu in p["cpus"]}) for h in range(hosts)]
    all_cpus = {cpu for cpus in host_cpus for cpu in cpus}
    pinned = hosts > 1 and sum(len(cpus) for cpus in host_cpus) == len(all_cpus)  # no core shared between hosts
    link = c.get("link")
    mbit = c.get("bandwidth_mbit") if link == "custom" else LINK_PRESETS_MBIT.get(link) if link else None
    features, classes = int(part.x.shape[1]), int(part.num_classes)
    layers = int(m.get("layers", 0) or 0)
    hidden = m.get("hidden")
    widths = [features] + [int(hidden)] * (layers - 1) + [classes] if layers and hidden is not None else None
    pcfg = OmegaConf.to_container(cfg.parallel, resolve=True)
    return {
        "world_size": world,
        "hosts": hosts,
        "ranks_per_host": per_host,
        "rank_host": rank_host,
        "method": {
            "parallel": cfg.parallel.name,
            "experiment": experiment,
            "quantizer": cfg.quantizer.name,
            **{flag: flag in PARALLEL.choice(cfg.parallel.name).trace_flags for flag in TRACE_FLAGS},
            "parallel_config": pcfg,
        },
        "cluster": {
            "name": c.name,
            "link_mbit": float(mbit) if mbit is not None else None,
            "latency_ms": float(c.get("latency_ms", 0.0) or 0.0),
            "cores_per_host": float(len(host_cpus[0])) if pinned else len(all_cpus) / max(1, hosts),
            "pinned": pinned,
            "host_cpus": host_cpus,  # an extra field: the cores each host's ranks ran on
        },
        "model": {"name": m.name, "layers": layers, "widths": widths},
        "graph": {
            "name": OmegaConf.select(cfg, "dataset.name", default=None),
            "num_nodes": int(part.num_global_nodes),
            "num_edges": sum(p["local_edges"] for p in parts),  # every edge's destination is inner on one rank
            "features": features,
            "parts": [{k: v for k, v in p.items() if k != "cpus"} for p in parts],
        },
    }


def experiment_of(run_dir: Path) -> str | None:
    """The ``experiment=`` preset the run was composed with (its Hydra overrides), if any."""
    path = Path(run_dir) / ".hydra" / "overrides.yaml"
    if not path.is_file():
        return None
    for override in OmegaConf.load(path) or []:
        name, _, value = str(override).lstrip("+").partition("=")
        if name == "experiment":
            return value
    return None
