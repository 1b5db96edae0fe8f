"""Split a partitioned graph into per-rank parts with halo plans.

Rank r's local node numbering is: its inner nodes (sorted by global id), then its halo
nodes (remote in-neighbours of inner nodes) ordered by owner rank, then global id. The
rows rank q sends to rank r are exactly r's halo nodes owned by q in the same order, so
the buffer an all-to-all delivers (concatenated by source rank) is the halo block itself.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Iterator

import numpy as np
import scipy.sparse as sp
import torch

from gnnq.data.graph import Graph
from gnnq.data.sparse_rows import csr_tensor


@dataclass
class Part:
    """Everything one rank holds of the graph. Index tensors are int64, local unless noted."""

    rank: int
    nparts: int
    num_global_nodes: int
    num_classes: int
    multilabel: bool
    metric: str
    inner_ids: torch.Tensor  # global ids of inner nodes
    halo_ids: torch.Tensor  # global ids of halo nodes
    halo_counts: torch.Tensor  # per owner rank: number of halo rows received from it
    indptr: torch.Tensor  # local CSR over in-edges of inner nodes (n_inner + 1)
    indices: torch.Tensor  # local source index of each in-edge (inner rows, then halo rows)
    in_degree: torch.Tensor  # global in-degree of inner nodes (float32)
    out_degree: torch.Tensor  # global out-degree of inner and halo nodes (float32)
    send_idx: torch.Tensor  # inner rows to send, concatenated by destination rank
    send_counts: torch.Tensor  # per destination rank: number of rows sent to it
    x: torch.Tensor  # features of inner nodes (a sparse CSR tensor for sparse features)
    y: torch.Tensor  # labels of inner nodes
    train_mask: torch.Tensor
    val_mask: torch.Tensor
    test_mask: torch.Tensor

    @property
    def num_inner(self) -> int:
        return int(self.inner_ids.numel())

    @property
    def num_halo(self) -> int:
        return int(self.halo_ids.numel())

    def to(self, device) -> "Part":
        """A copy whose tensors live on ``device``."""
        return Part.from_dict(
            {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in self.to_dict().items()}
        )

    def clone(self) -> "Part":
        """A copy whose tensors are its own (``copy.deepcopy`` cannot copy a sparse CSR tensor: its storage is not
        accessible; ``Tensor.clone`` copies dense and sparse tensors alike)."""
        return Part.from_dict({k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in self.to_dict().items()})

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, d: dict) -> "Part":
        return cls(**{f.name: d[f.name] for f in fields(cls)})


def build_parts(graph: Graph, parts: np.ndarray, nparts: int) -> list[Part]:
    """Build every rank's Part from the global graph and a node → part assignment."""
    return list(iter_parts(graph, parts, nparts))


def iter_parts(graph: Graph, parts: np.ndarray, nparts: int) -> Iterator[Part]:
    """Rank 0's Part, then rank 1's, ...: one at a time, so a caller that writes each and drops it never holds
    more than one part besides the graph (what a products-size graph needs: docs/runs.md#resources)."""
    n = graph.num_nodes
    src, dst = graph.edge_index
    owner = parts.astype(part_dtype(nparts))
    dst_owner = owner[dst]  # one byte per edge below 128 parts: the only whole-graph array built here
    in_deg = np.bincount(dst, minlength=n).astype(np.float32)
    out_deg = np.bincount(src, minlength=n).astype(np.float32)

    local_of = np.empty(n, dtype=np.int64)  # global id -> local index within its own part
    inner_by_part = []
    for r in range(nparts):
        inner = np.flatnonzero(owner == r)
        local_of[inner] = np.arange(inner.size)
        inner_by_part.append(inner)

    halo_by_part = []  # per part r: (halo global ids ordered by owner, then id; counts per owner)
    seen = np.zeros(n, dtype=bool)
    for r in range(nparts):
        seen[src[dst_owner == r]] = True
        seen[inner_by_part[r]] = False
        remote = np.flatnonzero(seen)  # sorted ids
        seen[remote] = False
        remote = remote[np.argsort(owner[remote], kind="stable")]  # stable keeps the id order within an owner
        halo_by_part.append((remote, np.bincount(owner[remote], minlength=nparts)))

    local_here = np.empty(n, dtype=np.int64)  # global id -> local index in part r (inner, then halo)
    for r in range(nparts):
        inner = inner_by_part[r]
        halo, halo_counts = halo_by_part[r]
        sel = np.flatnonzero(dst_owner == r)
        e_src, e_dst = src[sel], dst[sel]
        del sel
        order = np.lexsort((e_src, e_dst))  # by destination, then source
        e_src, e_dst = e_src[order], e_dst[order]
        del order
        local_here[inner] = np.arange(inner.size)
        local_here[halo] = inner.size + np.arange(halo.size)
        col = local_here[e_src]
        del e_src
        indptr = np.zeros(inner.size + 1, dtype=np.int64)
        np.cumsum(np.bincount(local_of[e_dst], minlength=inner.size), out=indptr[1:])
        del e_dst
        # Rows r sends to q: q's halo rows owned by r, in q's order.
        send_rows, send_counts = [], np.zeros(nparts, dtype=np.int64)
        for q in range(nparts):
            q_halo, q_counts = halo_by_part[q]
            start = int(q_counts[:r].sum())
            rows = q_halo[start : start + int(q_counts[r])]
            send_rows.append(local_of[rows])
            send_counts[q] = rows.size
        node_ids = np.concatenate([inner, halo])
        yield Part(
            rank=r,
            nparts=nparts,
            num_global_nodes=n,
            num_classes=graph.num_classes,
            multilabel=graph.multilabel,
            metric=graph.metric,
            inner_ids=torch.from_numpy(inner),
            halo_ids=torch.from_numpy(halo),
            halo_counts=torch.from_numpy(halo_counts.astype(np.int64)),
            indptr=torch.from_numpy(indptr),
            indices=torch.from_numpy(col),
            in_degree=torch.from_numpy(in_deg[inner]),
            out_degree=torch.from_numpy(out_deg[node_ids]),
            send_idx=torch.from_numpy(np.concatenate(send_rows).astype(np.int64)),
            send_counts=torch.from_numpy(send_counts),
            x=features_tensor(graph.x[inner]),
            y=torch.from_numpy(np.ascontiguousarray(graph.y[inner])),
            train_mask=torch.from_numpy(graph.train_mask[inner]),
            val_mask=torch.from_numpy(graph.val_mask[inner]),
            test_mask=torch.from_numpy(graph.test_mask[inner]),
        )
        del col, indptr, node_ids, send_rows  # the caller has written this part: nothing of it stays here


def features_tensor(x) -> torch.Tensor:
    """Rows of features as a tensor: dense from a NumPy array, sparse CSR (int64 indices) from a SciPy CSR matrix."""
    if not sp.issparse(x):
        return torch.from_numpy(np.ascontiguousarray(x))
    return csr_tensor(
        torch.from_numpy(x.indptr.astype(np.int64)),
        torch.from_numpy(x.indices.astype(np.int64)),
        torch.from_numpy(np.ascontiguousarray(x.data, dtype=np.float32)),
        x.shape,
    )


def part_dtype(nparts: int) -> type:
    """The smallest signed integer type that holds part ids 0..nparts-1."""
    return np.int8 if nparts <= 127 else np.int16 if nparts <= 32767 else np.int32
