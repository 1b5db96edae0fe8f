"""Row influence α: how strongly an error in one message row reaches the receiver's outputs.

Forward, the row of node u sent to rank q is aggregated there with the weights of q's
operator A (GCN: deg_out(u)^-1/2 deg_in(v)^-1/2, SAGE-mean: 1/deg_in(v)), so
α_fwd(u) = Σ_v A_q[v, u], a column sum the receiver knows. Backward, the gradient row of
halo node u goes back to its owner r, where it flows on through r's operator transposed:
α_bwd(u) = Σ_w A_r[u, w], a row sum the owner knows. Each value is moved once to the rank
that sends the row.

That backward weight (``quantizer.backward_influence=returned``, the default) is exact for gnnq's
exchange, where the holder returns the partial gradient of halo node u to its owner, which adds it
to dL/dh_u and passes it on through its own operator transposed (tests/unit/test_influence.py checks it
against a global computation). AdaQP's published weight (``backward_influence=adaqp``; AdaQP/manager/
processing.py, the backward aggregation score) is one value per holder: for the row of u that goes
between u's owner and the holder q, the sum over q's own nodes w with an edge w→u of
deg_out(w)^-1/2 deg_in(u)^-1/2 for GCN (self loops counted in both degrees, as AdaQP adds them) and of
1/deg_out(w) for SAGE. For GCN that is the owner's row sum restricted to q's columns, not the whole
row sum; for SAGE it is not a sum of the mean operator's entries at all. ``adaqp_backward_sums``
computes it at the owner, which holds every in-edge w→u of its inner node u.

The local sums depend on the model's operator, so they are cached per model and
partition under a key that names the model; two models never share an entry.
"""

from __future__ import annotations

from pathlib import Path

import torch

from gnnq.comm.accounting import OVERHEAD
from gnnq.comm.communicator import Communicator
from gnnq.comm.halo import HaloExchange
from gnnq.data.part import Part
from gnnq.models.graph_ops import LocalGraph
from gnnq.track.files import write_torch_atomic

VERSION = 1


def local_sums(graph: LocalGraph) -> dict[str, torch.Tensor]:
    """Column sums over halo columns and row sums over inner rows of the operator."""
    rows, cols, weights = graph.coo()
    weights = weights.double()
    col = torch.zeros(graph.num_cols, dtype=torch.float64, device=weights.device).index_add_(0, cols, weights)
    row = torch.zeros(graph.num_rows, dtype=torch.float64, device=weights.device).index_add_(0, rows, weights)
    return {"halo_col_sums": col[graph.num_rows :].float(), "inner_row_sums": row.float()}


def cache_path(cache_dir: Path, model_name: str, rank: int) -> Path:
    return Path(cache_dir) / f"influence-v{VERSION}-{model_name}-part{rank}.pt"


def cached_local_sums(graph: LocalGraph, model_name: str, rank: int, cache_dir: Path | None) -> dict[str, torch.Tensor]:
    if cache_dir is None:
        return local_sums(graph)
    path = cache_path(cache_dir, model_name, rank)
    if path.is_file():
        sums = torch.load(path, weights_only=True)
        if (
            sums["halo_col_sums"].numel() == graph.num_cols - graph.num_rows
            and sums["inner_row_sums"].numel() == graph.num_rows
        ):
            return {k: v.to(graph.matrix.device) for k, v in sums.items()}
    sums = local_sums(graph)
    write_torch_atomic(path, {k: v.cpu() for k, v in sums.items()})
    return sums


def adaqp_backward_sums(model_name: str, part: Part) -> torch.Tensor:
    """AdaQP's published α_bwd of every row this rank sends, in send order: for the row of inner node u
    sent to holder q, the sum over u's in-edges w→u whose source w is a halo node owned by q of
    (deg_out(w) + 1)^-1/2 (deg_in(u) + 1)^-1/2 for GCN and 1 / deg_out(w) for SAGE (global degrees)."""
    n, nparts = part.num_inner, part.nparts
    device = part.indptr.device
    rows = torch.repeat_interleave(torch.arange(n, device=device), part.indptr.diff())
    cols = part.indices.to(torch.int64)
    from_halo = cols >= n
    rows, cols = rows[from_halo], cols[from_halo]
    if model_name == "sage":
        weights = part.out_degree.double().clamp(min=1.0).reciprocal()[cols]
    else:
        weights = (part.out_degree.double() + 1.0)[cols].rsqrt() * (part.in_degree.double() + 1.0)[rows].rsqrt()
    halo_owner = torch.repeat_interleave(torch.arange(nparts, device=device), part.halo_counts.to(device))
    edge_key = rows * nparts + halo_owner[cols - n]
    keys, slot = torch.unique(edge_key, return_inverse=True)
    sums = torch.zeros(keys.numel(), dtype=torch.float64, device=device).index_add_(0, slot, weights)
    destination = torch.repeat_interleave(torch.arange(nparts, device=device), part.send_counts.to(device))
    send_key = part.send_idx.to(torch.int64) * nparts + destination
    out = torch.zeros(send_key.numel(), dtype=torch.float64, device=device)
    if keys.numel():  # a row with no in-edge from the holder's nodes keeps weight 0
        found = torch.searchsorted(keys, send_key).clamp_(max=keys.numel() - 1)
        hit = keys[found] == send_key
        out[hit] = sums[found[hit]]
    return out.float()


def message_influence(
    comm: Communicator,
    exchange: HaloExchange,
    graph: LocalGraph,
    model_name: str,
    cache_dir: Path | None = None,
    backward_sums: torch.Tensor | None = None,
) -> dict[str, torch.Tensor]:
    """α of every row this rank sends: "fwd" in send order, "bwd" in halo order.

    ``backward_sums``: α_bwd of every row this rank sends, in send order, instead of the operator's row sums
    (AdaQP's per-holder weight)."""
    sums = cached_local_sums(graph, model_name, comm.rank, cache_dir)
    sent_row_sums = sums["inner_row_sums"].index_select(0, exchange.send_idx)
    if backward_sums is not None:
        sent_row_sums = backward_sums.to(sent_row_sums.device)
    kw = {"category": OVERHEAD, "layer": -1}
    to_owners = comm.all_to_all(
        sums["halo_col_sums"][:, None], exchange.recv_counts, exchange.send_counts, direction="bwd", **kw
    )
    to_holders = comm.all_to_all(
        sent_row_sums[:, None],
        exchange.send_counts,
        exchange.recv_counts,
        direction="fwd",
        **kw,
    )
    return {"fwd": to_owners.flatten(), "bwd": to_holders.flatten()}
