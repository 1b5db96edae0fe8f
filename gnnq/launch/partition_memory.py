"""Before partitioning: will the launcher's partitioning, and then the ranks, fit in this host's memory?

The launcher holds the loaded graph while it partitions; METIS then needs about METIS_EDGE_BYTES per entry
of the symmetric adjacency and METIS_NODE_BYTES per node on top (measured with pymetis 64-bit indices:
docs/runs.md#resources). Building the parts afterwards needs far less (one part at a time, one byte per
edge for the owners). The ranks can only be estimated exactly once the halos are known; before that, each
rank's estimate with no halo node at all (``gnnq.launch.resources.rank_memory_mib`` with halo = 0 and a
perfectly balanced part) is a lower bound: when even that does not fit, no partition would, and the run
is refused before METIS spends minutes on it. The exact check follows after partitioning
(``check_launch_resources``).
"""

from __future__ import annotations

import math

from gnnq.errors import ConfigError
from gnnq.launch.resources import (
    ResourcePlan,
    available_mib,
    feature_row_bytes,
    model_shape,
    rank_memory_mib,
    refuse_ranks_that_do_not_fit,
    warn_if_oversubscribed,
    with_held,
)
from gnnq.track.process_memory import rss_mib

LAUNCHER_BASE_MIB = 300.0  # python, torch, hydra and gnnq in the launcher (RSS), before the graph
METIS_EDGE_BYTES = 140  # per entry of the symmetric adjacency (measured 92-125 B from 2M to 122M entries: it grows)
METIS_NODE_BYTES = 128  # per node (measured about 110 B)
BUILD_EDGE_BYTES = 48  # building the parts: owners (1 B/edge), a part's mask, edges, order and columns
LAUNCHER_FORMULA = (
    f"launcher {LAUNCHER_BASE_MIB:.0f} MiB + the graph in memory (edges, features, labels, masks) "
    f"+ max(METIS: {METIS_EDGE_BYTES} B x adjacency entries + {METIS_NODE_BYTES} B x nodes, "
    f"building parts: {BUILD_EDGE_BYTES} B x edges / parts + 1 B x edges)"
)


def graph_mib(graph) -> float:
    """What the loaded graph holds (MiB): its edges, features, labels and masks."""
    x = (graph.x.data, graph.x.indices, graph.x.indptr) if graph.sparse_features else (graph.x,)
    arrays = (graph.edge_index, *x, graph.y, graph.train_mask, graph.val_mask, graph.test_mask)
    return sum(a.nbytes for a in arrays) / 2**20


def launcher_memory_mib(
    graph_bytes_mib: float, num_nodes: int, adjacency_entries: int, num_edges: int, nparts: int, metis: bool
) -> float:
    """The launcher's estimated peak while partitioning (MiB), by LAUNCHER_FORMULA."""
    build = (BUILD_EDGE_BYTES * num_edges / max(1, nparts) + num_edges) / 2**20
    work = build
    if metis and nparts > 1:
        work = max(work, (METIS_EDGE_BYTES * adjacency_entries + METIS_NODE_BYTES * num_nodes) / 2**20)
    return LAUNCHER_BASE_MIB + graph_bytes_mib + work


def check_before_partitioning(plan: ResourcePlan, graph, nparts: int, metis: bool) -> dict:
    """ConfigError with one line when the launcher's partitioning (``metis``: partitioner=metis), or the ranks even
    without halos, would not fit in this host's memory; else the estimates (MiB) for the record."""
    from gnnq.data.partition import is_symmetric_canonical

    n, e = graph.num_nodes, graph.num_edges
    gmib = graph_mib(graph)
    limit = plan.memory_limit_gib
    avail, source = with_held(available_mib(limit), limit, rss_mib(), "this launcher, counted in the estimate")
    # METIS gets the graph as it is when it holds both directions, else a symmetrized copy of up to twice the edges
    entries = e if metis and is_symmetric_canonical(*graph.edge_index, n) else 2 * e
    launcher = launcher_memory_mib(gmib, n, entries, e, nparts, metis)
    sizes = f"{n:,} nodes, {e:,} edges, {graph.num_features} features, {nparts} parts"
    if avail is not None and launcher > avail:
        raise ConfigError(
            f"not enough memory to partition: {sizes} need about {launcher / 1024:.1f} GiB in the launcher "
            f"(graph {gmib / 1024:.1f} GiB) but {avail / 1024:.1f} GiB is available ({source}); "
            f"estimate: {LAUNCHER_FORMULA}; use a smaller graph, partitioner=random, or set "
            "cluster.memory_limit_gib to override the check"
        )
    inner = math.ceil(n / max(1, nparts))
    row = feature_row_bytes(graph.num_features, graph.feature_nonzeros, n)
    shape = model_shape(plan, graph.num_features, graph.num_classes, row)
    floor = rank_memory_mib(inner, 0, round(e * inner / max(1, n)), shape)
    if plan.shares_one_part:
        floor = rank_memory_mib(n, 0, e, shape)  # every rank holds the whole graph
    if plan.cluster.checks_memory_here():
        here = plan.cluster.ranks_here([floor] * plan.ranks)
        try:
            refuse_ranks_that_do_not_fit(
                plan,
                here,
                f", with {inner:,} inner nodes and no halo node yet: {sizes}; refused before partitioning",
                gmib,
            )
        except ConfigError:
            warn_if_oversubscribed(plan, len(here))  # what the check after partitioning would have said first
            raise
    return {"launcher_mib": round(launcher, 1), "rank_floor_mib": round(floor, 1)}
