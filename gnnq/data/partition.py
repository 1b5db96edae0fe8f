"""Assign every node to one part: METIS (edge-cut minimizing, balanced) or random."""

from __future__ import annotations

import numpy as np

from gnnq.config.registry import PARTITIONERS as PARTITIONER_REGISTRY
from gnnq.errors import PartitionError

PARTITIONERS = PARTITIONER_REGISTRY.names()


def partition_nodes(edge_index: np.ndarray, num_nodes: int, nparts: int, method: str, seed: int) -> np.ndarray:
    """Return an int64 array of length ``num_nodes`` holding each node's part in 0..nparts-1."""
    if method not in PARTITIONERS:
        raise PartitionError(f"partitioner.name={method!r} is unknown; choose one of {', '.join(PARTITIONERS)}")
    if nparts < 1 or nparts > num_nodes:
        raise PartitionError(f"cannot split {num_nodes} nodes into {nparts} parts (need 1 <= parts <= nodes)")
    if nparts == 1:
        return np.zeros(num_nodes, dtype=np.int64)
    return PARTITIONER_REGISTRY.target(method)(edge_index, num_nodes, nparts, seed)


def random_parts(edge_index: np.ndarray, num_nodes: int, nparts: int, seed: int) -> np.ndarray:
    """Balanced random assignment: a seeded permutation dealt round-robin."""
    perm = np.random.default_rng(seed).permutation(num_nodes)
    parts = np.empty(num_nodes, dtype=np.int64)
    parts[perm] = np.arange(num_nodes) % nparts
    return parts


def metis_parts(edge_index: np.ndarray, num_nodes: int, nparts: int, seed: int) -> np.ndarray:
    import pymetis

    src, dst = edge_index
    keep = src != dst
    # METIS wants a symmetric adjacency without self loops or duplicates.
    und = np.concatenate([np.stack([src[keep], dst[keep]]), np.stack([dst[keep], src[keep]])], axis=1)
    key = np.unique(und[0] * num_nodes + und[1])
    rows, cols = key // num_nodes, key % num_nodes
    xadj = np.zeros(num_nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=num_nodes), out=xadj[1:])
    options = pymetis.Options(seed=seed)
    _, membership = pymetis.part_graph(nparts, adjacency=pymetis.CSRAdjacency(xadj, cols), options=options)
    parts = np.asarray(membership, dtype=np.int64)
    sizes = np.bincount(parts, minlength=nparts)
    if (sizes == 0).any():
        # METIS may leave a part empty on tiny or disconnected graphs; every rank needs nodes.
        raise PartitionError(
            f"METIS left {int((sizes == 0).sum())} of {nparts} parts empty for {num_nodes} nodes; "
            "use fewer parts or partitioner=random"
        )
    return parts
