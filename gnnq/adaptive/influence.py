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
against a global computation). AdaQP's exchange differs: the owner sends its output gradient
forward to the holders, and its published weight (``backward_influence=adaqp``) is
Σ_{w→u} deg_out(w)^-1/2 deg_in(u)^-1/2 for GCN (the same as gnnq's row sum) and
Σ_{w→u} 1 / deg_out(w) for SAGE, where gnnq's row sum of the mean operator is 1 for every u with
in-edges. ``adaqp_backward_sums`` computes the published weight from the partition.

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
        if sums["halo_col_sums"].numel() == graph.num_cols - graph.num_rows and sums["inner_row_sums"].numel() == graph.num_rows:
            return {k: v.to(graph.matrix.device) for k, v in sums.items()}
    sums = local_sums(graph)
    write_torch_atomic(path, {k: v.cpu() for k, v in sums.items()})
    return sums


def adaqp_backward_sums(model_name: str, part: Part) -> torch.Tensor | None:
    """AdaQP's published α_bwd of every inner node: Σ_{w→u} 1 / deg_out(w) (global degrees) for SAGE;
    None for GCN, where it equals the operator's row sum."""
    if model_name != "sage":
        return None
    rows = torch.repeat_interleave(torch.arange(part.num_inner, device=part.indptr.device), part.indptr.diff())
    weights = part.out_degree.double().clamp(min=1.0).reciprocal()[part.indices]
    return torch.zeros(part.num_inner, dtype=torch.float64, device=weights.device).index_add_(0, rows, weights).float()


def message_influence(comm: Communicator, exchange: HaloExchange, graph: LocalGraph, model_name: str,
                      cache_dir: Path | None = None, backward_sums: torch.Tensor | None = None) -> dict[str, torch.Tensor]:  # fmt: skip
    """α of every row this rank sends: "fwd" in send order, "bwd" in halo order.

    ``backward_sums``: α_bwd of every inner node instead of the operator's row sums (AdaQP's weight)."""
    sums = cached_local_sums(graph, model_name, comm.rank, cache_dir)
    if backward_sums is not None:
        sums = {**sums, "inner_row_sums": backward_sums.to(sums["inner_row_sums"].device)}
    kw = {"category": OVERHEAD, "layer": -1}
    to_owners = comm.all_to_all(
        sums["halo_col_sums"][:, None], exchange.recv_counts, exchange.send_counts, direction="bwd", **kw
    )
    to_holders = comm.all_to_all(
        sums["inner_row_sums"].index_select(0, exchange.send_idx)[:, None],
        exchange.send_counts,
        exchange.recv_counts,
        direction="fwd",
        **kw,
    )
    return {"fwd": to_owners.flatten(), "bwd": to_holders.flatten()}
