"""Per-part sizes of a graph split into K parts with gnnq's own partitioner, for projections to more hosts.

``part_stats(dataset_cfg, partitioner, seed, nparts, data_root)``: per part its inner nodes, local edges (in-edges of
inner nodes, as a rank's CSR holds them), marginal nodes (inner nodes with a remote in-neighbour) and the halo rows
it receives from each other part (``halo_rows_from``) and sends to each (``rows_to``), the same quantities a trace's
meta.json lists for the recorded parts. The real partition is computed once and its statistics cached as JSON under
``<data root>/parts/projection/`` (keyed by the dataset config, partitioner, seed and K).
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import numpy as np

from gnnq.data.partition import partition_nodes
from gnnq.data.registry import load_dataset

FORMAT = 1


def stats_from_assignment(edge_index: np.ndarray, assignment: np.ndarray, nparts: int) -> list[dict]:
    src, dst = edge_index
    owner_src, owner_dst = assignment[src], assignment[dst]
    inner = np.bincount(assignment, minlength=nparts)
    local_edges = np.bincount(owner_dst, minlength=nparts)
    cross = owner_src != owner_dst
    pairs = np.unique(src[cross].astype(np.int64) * nparts + owner_dst[cross])  # (remote source node, its reader)
    reader = pairs % nparts
    owner = assignment[pairs // nparts]
    halo = np.bincount(reader * nparts + owner, minlength=nparts * nparts).reshape(nparts, nparts)
    marginal = np.bincount(assignment[np.unique(dst[cross])], minlength=nparts)
    cut_in = np.bincount(owner_dst[cross], minlength=nparts)
    return [
        {
            "rank": p,
            "inner_nodes": int(inner[p]),
            "local_edges": int(local_edges[p]),
            "marginal_nodes": int(marginal[p]),
            "cut_in_edges": int(cut_in[p]),
            "halo_rows_from": [int(x) for x in halo[p]],
            "rows_to": [int(x) for x in halo[:, p]],
        }
        for p in range(nparts)
    ]


def _structure_only(dataset_cfg: dict) -> dict:
    """The synthetic generator draws edges before features: one feature column gives the same edges, cheaply."""
    cfg = dict(dataset_cfg)
    if cfg.get("name") == "synthetic":
        cfg["feature_dim"] = 1
    return cfg


def cache_path(data_root: Path, dataset_cfg: dict, partitioner: str, seed: int, nparts: int) -> Path:
    ident = json.dumps(
        {"data": dataset_cfg, "partitioner": partitioner, "seed": seed, "nparts": nparts, "format": FORMAT},
        sort_keys=True,
        default=str,
    )
    return Path(data_root) / "parts" / "projection" / f"{hashlib.sha256(ident.encode()).hexdigest()[:24]}.json"


def part_stats(dataset_cfg: dict, partitioner: str, seed: int, nparts: int, data_root: Path) -> dict:
    """{"parts": [...], "num_nodes", "num_edges", "partition_time_s", "cached": bool} for the graph in K parts."""
    from omegaconf import OmegaConf

    path = cache_path(data_root, dataset_cfg, partitioner, seed, nparts)
    if path.is_file():
        try:
            return {**json.loads(path.read_text()), "cached": True}
        except ValueError:
            pass  # a damaged entry is rebuilt below
    graph = load_dataset(OmegaConf.create(_structure_only(dataset_cfg)))
    t0 = time.perf_counter()
    assignment = partition_nodes(graph.edge_index, graph.num_nodes, nparts, partitioner, seed)
    took = time.perf_counter() - t0
    out = {
        "num_nodes": graph.num_nodes,
        "num_edges": int(graph.edge_index.shape[1]),
        "nparts": nparts,
        "partitioner": partitioner,
        "partition_time_s": round(took, 3),
        "parts": stats_from_assignment(graph.edge_index, assignment, nparts),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(out))
    tmp.replace(path)
    return {**out, "cached": False}


def extrapolate(known: dict[int, dict], nparts: int, num_nodes: int, num_edges: int) -> dict:
    """Part sizes for ``nparts`` parts beyond what was partitioned for real, by a stated rule (docs/projection.md).

    ``known``: K -> part_stats(...) of real partitions (at least one, K >= 2). Every part is alike: N/K inner nodes,
    E/K local edges. The cut fraction phi (in-edges from other parts) follows 1 - phi(K) = alpha * K**-beta, fitted on
    the real K (log-log; one K: beta = 1). A part's cut in-edges spread evenly over the K - 1 others; from each it
    receives n * (1 - exp(-gamma * m / n)) distinct rows (m of its cut in-edges from that peer, n nodes there: random
    sources, with gamma fitted at the largest real K for how METIS concentrates them)."""
    ks = sorted(known)
    phis = []
    for k in ks:
        ps = known[k]["parts"]
        phis.append(sum(p["cut_in_edges"] for p in ps) / max(1, sum(p["local_edges"] for p in ps)))
    lk, lin = np.log(ks), np.log(np.clip(1 - np.array(phis), 1e-9, None))
    if len(ks) >= 2:
        beta, log_alpha = np.polyfit(lk, lin, 1)
        beta = -beta
    else:
        beta = 1.0
        log_alpha = lin[0] + np.log(ks[0])
    last = known[ks[-1]]["parts"]
    k_last = ks[-1]
    n_l = np.mean([p["inner_nodes"] for p in last])
    m_l = np.mean([p["cut_in_edges"] for p in last]) / (k_last - 1)
    h_l = np.mean([sum(p["halo_rows_from"]) for p in last]) / (k_last - 1)
    gamma = -np.log(max(1e-12, 1 - min(h_l / n_l, 1 - 1e-12))) * n_l / m_l if m_l > 0 else 1.0
    n, e = num_nodes / nparts, num_edges / nparts
    phi = float(np.clip(1 - np.exp(log_alpha) * nparts ** (-beta), 0.0, 1.0))
    m = phi * e / (nparts - 1)
    h = int(round(n * (1 - np.exp(-gamma * m / n))))
    parts = [
        {
            "rank": p,
            "inner_nodes": int(round(n)),
            "local_edges": int(round(e)),
            "marginal_nodes": int(round(min(n, n * (1 - np.exp(-phi * e / n))))),
            "cut_in_edges": int(round(phi * e)),
            "halo_rows_from": [0 if q == p else h for q in range(nparts)],
            "rows_to": [0 if q == p else h for q in range(nparts)],
        }
        for p in range(nparts)
    ]
    rule = {"alpha": float(np.exp(log_alpha)), "beta": float(beta), "gamma": float(gamma), "phi": phi, "from_k": ks}
    return {"num_nodes": num_nodes, "num_edges": num_edges, "nparts": nparts, "parts": parts, "extrapolated": rule}
