"""Assign every node to one part: METIS (edge-cut minimizing, balanced) or random."""

from __future__ import annotations

import os
import signal

import numpy as np

from gnnq import lifetime
from gnnq.config.registry import PARTITIONERS as PARTITIONER_REGISTRY
from gnnq.data.loaders import edge_keys, edges_from_keys
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
    xadj, adjncy = metis_adjacency(edge_index, num_nodes)
    parts = _in_child(_metis_membership, nparts, xadj, adjncy, seed)
    sizes = np.bincount(parts, minlength=nparts)
    if (sizes == 0).any():
        # METIS may leave a part empty on tiny or disconnected graphs; every rank needs nodes.
        raise PartitionError(
            f"METIS left {int((sizes == 0).sum())} of {nparts} parts empty for {num_nodes} nodes; "
            "use fewer parts or partitioner=random"
        )
    return parts


def _metis_membership(nparts: int, xadj: np.ndarray, adjncy: np.ndarray, seed: int) -> np.ndarray:
    import pymetis

    options = pymetis.Options(seed=seed)
    _, membership = pymetis.part_graph(nparts, adjacency=pymetis.CSRAdjacency(xadj, adjncy), options=options)
    return np.asarray(membership, dtype=np.int64)


def _in_child(fn, *args) -> np.ndarray:
    """``fn(*args)`` (an int64 array) computed in a forked child process. METIS' GKlib installs its own SIGTERM
    handler while it runs (its error signal), which would swallow a scheduler's SIGTERM to the launcher: in a child
    the launcher keeps its own handlers, and a stop signal ends the child (SIGKILL) and surfaces here as usual. The
    child dies with the launcher (PR_SET_PDEATHSIG)."""
    if not hasattr(os, "fork"):
        return fn(*args)
    prctl = lifetime.libc_prctl()  # before the fork
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: compute, send, and leave without running the parent's exit handlers
        os.close(read_end)
        status = 1
        try:
            lifetime.die_with_parent(prctl)
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                signal.signal(sig, signal.SIG_DFL)
            try:
                payload = b"K" + np.ascontiguousarray(fn(*args), dtype=np.int64).tobytes()
            except BaseException as exc:  # noqa: BLE001 - any failure goes back to the parent as its message
                payload = b"E" + f"{type(exc).__name__}: {exc}".encode()
            with os.fdopen(write_end, "wb") as out:
                out.write(payload)
            status = 0
        finally:
            os._exit(status)
    os.close(write_end)
    try:
        with os.fdopen(read_end, "rb") as inp:
            payload = inp.read()
        os.waitpid(pid, 0)
    except BaseException:  # a stop signal (KeyboardInterrupt) or any error here: the child goes too
        _kill(pid)
        raise
    if payload[:1] == b"K":
        return np.frombuffer(payload[1:], dtype=np.int64).copy()
    raise PartitionError(f"METIS failed: {payload[1:].decode(errors='replace') or 'the partitioning process died'}")


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass


def metis_adjacency(edge_index: np.ndarray, num_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """(xadj, adjncy): the symmetric adjacency without self loops or duplicates that METIS wants.

    A canonical edge list (sorted by (src, dst), no self loops or duplicates, as every loader returns) that
    holds both directions already is it: its destinations are passed as they are, without a copy. Any
    other edge list is symmetrized into a new one."""
    src, dst = edge_index
    if not is_symmetric_canonical(src, dst, num_nodes):
        src, dst = edges_from_keys(edge_keys(src, dst, num_nodes, undirected=True), num_nodes)
    xadj = np.zeros(num_nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=num_nodes), out=xadj[1:])
    return xadj, np.ascontiguousarray(dst, dtype=np.int64)


def is_symmetric_canonical(src: np.ndarray, dst: np.ndarray, num_nodes: int) -> bool:
    """True when (src, dst) is strictly sorted by (src, dst), has no self loops and holds every edge both ways."""
    if src.size == 0:
        return True
    key = src * np.int64(num_nodes) + dst
    if not (key[1:] > key[:-1]).all() or (src == dst).any():
        return False
    rev = dst * np.int64(num_nodes) + src
    rev.sort()
    return bool(np.array_equal(key, rev))
