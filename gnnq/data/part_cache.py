"""On-disk cache of per-rank parts, keyed by everything the parts depend on.

Layout: ``<data_root>/parts/<key>/part<r>.pt`` plus ``meta.json``. The key hashes the
dataset's content fingerprint, the partitioner and its seed, the number of parts and
the format version, so a change to any of them builds a fresh entry. Entries are
written to a temporary directory and renamed into place, so a killed build never
leaves a half-written entry behind. Parts are loaded with ``weights_only=True``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from gnnq.data.graph import Graph
from gnnq.data.halo import Part, build_parts
from gnnq.data.partition import partition_nodes

FORMAT_VERSION = 1


def cache_key(dataset_fingerprint: str, partitioner: str, seed: int, nparts: int) -> str:
    ident = json.dumps(
        {"data": dataset_fingerprint, "partitioner": partitioner, "seed": seed, "nparts": nparts, "format": FORMAT_VERSION},
        sort_keys=True,
    )
    return hashlib.sha256(ident.encode()).hexdigest()[:24]


def prepare_parts(graph: Graph, partitioner: str, seed: int, nparts: int, cache_root: Path) -> tuple[Path, dict]:
    """Return the cache directory holding the parts (building it if needed) and its metadata."""
    key = cache_key(graph.fingerprint(), partitioner, seed, nparts)
    entry = Path(cache_root) / key
    meta_path = entry / "meta.json"
    if meta_path.is_file():
        return entry, json.loads(meta_path.read_text())

    t0 = time.perf_counter()
    assignment = partition_nodes(graph.edge_index, graph.num_nodes, nparts, partitioner, seed)
    t_partition = time.perf_counter() - t0
    parts = build_parts(graph, assignment, nparts)
    meta = {
        "key": key,
        "format": FORMAT_VERSION,
        "dataset": graph.name,
        "partitioner": partitioner,
        "seed": seed,
        "nparts": nparts,
        "num_nodes": graph.num_nodes,
        "num_edges": graph.num_edges,
        "edge_cut": _edge_cut(graph.edge_index, assignment),
        "inner_nodes": [p.num_inner for p in parts],
        "halo_nodes": [p.num_halo for p in parts],
        "partition_time_s": round(t_partition, 4),
    }
    Path(cache_root).mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=cache_root))
    try:
        for p in parts:
            torch.save(p.to_dict(), tmp / f"part{p.rank}.pt")
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1))
        try:
            os.rename(tmp, entry)
        except OSError:
            if not meta_path.is_file():  # not a concurrent builder that won the race
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return entry, meta


def load_part(entry: Path, rank: int) -> Part:
    return Part.from_dict(torch.load(Path(entry) / f"part{rank}.pt", weights_only=True))


def _edge_cut(edge_index: np.ndarray, assignment: np.ndarray) -> int:
    return int((assignment[edge_index[0]] != assignment[edge_index[1]]).sum())
