"""Graph-augmented MLP inputs: [X, ÂX, Â²X, ..., Â^K X] with Â = D^-1/2 (A + I) D^-1/2.

Computed once per (dataset content, K) and cached as ``<data_root>/gamlp/<key>.npy`` (written
atomically) with the sha256 of its bytes in ``<key>.sha256``; a cached file that is missing,
unreadable or fails its checksum is recomputed and rewritten, with a one-line warning. The model
then needs no graph: a GA-MLP graph keeps the nodes, labels and split and drops the edges, so the
exchange layer has no halo rows to move.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from gnnq.data.graph import Graph
from gnnq.data.integrity import check_sha256, file_sha256, warn
from gnnq.errors import CacheError
from gnnq.track.files import write_numpy_atomic, write_text_atomic

FORMAT_VERSION = 1


def normalized_adjacency(edge_index: np.ndarray, num_nodes: int) -> sp.csr_matrix:
    """D^-1/2 (A + I) D^-1/2 with D the degrees of A + I (duplicate edges and self loops counted once)."""
    src, dst = edge_index
    adj = sp.coo_matrix((np.ones(len(src), dtype=np.float64), (dst, src)), shape=(num_nodes, num_nodes)).tocsr()
    adj.data[:] = 1.0  # duplicates summed by tocsr count once
    adj = adj + sp.identity(num_nodes, format="csr")
    adj.data[:] = 1.0  # an existing self loop plus I counts once
    inv_sqrt = 1.0 / np.sqrt(np.asarray(adj.sum(axis=1)).ravel())
    return sp.diags(inv_sqrt) @ adj @ sp.diags(inv_sqrt)


def propagated_features(graph: Graph, hops: int) -> np.ndarray:
    """The (num_nodes, (hops + 1) * num_features) float32 matrix [X, ÂX, ..., Â^hops X]."""
    if hops < 0:
        raise ValueError(f"model.hops={hops} is not allowed; it must be >= 0")
    adj = normalized_adjacency(graph.edge_index, graph.num_nodes)
    blocks = [np.asarray(graph.x.toarray() if graph.sparse_features else graph.x, dtype=np.float64)]
    for _ in range(hops):
        blocks.append(adj @ blocks[-1])
    return np.concatenate(blocks, axis=1).astype(np.float32)


def cache_key(graph: Graph, hops: int) -> str:
    ident = json.dumps({"data": graph.fingerprint(), "hops": hops, "format": FORMAT_VERSION}, sort_keys=True)
    return hashlib.sha256(ident.encode()).hexdigest()[:24]


def cached_features(graph: Graph, hops: int, cache_root: Path) -> np.ndarray:
    """``propagated_features``, read from the cache when present and intact, else computed and written."""
    path = Path(cache_root) / f"{cache_key(graph, hops)}.npy"
    checksum = path.with_suffix(".sha256")
    if path.exists() or checksum.exists():
        try:
            return _read_cached(path, checksum, (graph.num_nodes, (hops + 1) * graph.num_features))
        except CacheError as exc:
            warn(f"recomputing the GA-MLP features: {exc}")
    features = propagated_features(graph, hops)
    write_numpy_atomic(path, features)
    write_text_atomic(checksum, file_sha256(path) + "\n")
    return features


def _read_cached(path: Path, checksum: Path, shape: tuple[int, int]) -> np.ndarray:
    try:
        expected = checksum.read_text().strip()
    except (OSError, ValueError) as exc:
        raise CacheError(f"{checksum} is unreadable ({getattr(exc, 'strerror', None) or type(exc).__name__})") from None
    check_sha256(path, expected, checksum)
    try:
        features = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise CacheError(f"{path} is unreadable ({type(exc).__name__})") from None
    if features.shape != shape or features.dtype != np.float32:
        raise CacheError(f"{path} holds a {features.dtype} array of shape {features.shape}, not float32 {shape}")
    return features


def gamlp_graph(graph: Graph, hops: int, cache_root: Path) -> Graph:
    """The same nodes, labels and split with the propagated features as ``x`` and no edges."""
    return dataclasses.replace(
        graph,
        name=f"{graph.name}-gamlp{hops}",
        x=cached_features(graph, hops, cache_root),
        edge_index=np.zeros((2, 0), dtype=np.int64),
    )
