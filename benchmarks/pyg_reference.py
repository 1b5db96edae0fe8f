"""A plain single-process PyG GCN, timed per training step, as the reference for gnnq's overhead.

``python -m benchmarks.pyg_reference --dataset cora --root DIR --epochs 10 --adjacency edge_index``
(``--dataset`` is a choice of gnnq's dataset group, e.g. ``synthetic-large``, loaded as gnnq loads it)
prints one JSON line: median epoch time and peak memory. The model matches gnnq's GCN
(same layers, hidden size, LayerNorm, ReLU, dropout); normalization is cached as gnnq
caches it, so both time the same training step: forward, backward, optimizer step.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F

from gnnq.config.compose import compose_config
from gnnq.track.process_memory import peak_rss_mib


class PygGCN(torch.nn.Module):
    def __init__(self, in_dim: int, hidden: int, out_dim: int, layers: int, dropout: float):
        from torch_geometric.nn import GCNConv

        super().__init__()
        dims = [in_dim] + [hidden] * (layers - 1) + [out_dim]
        self.convs = torch.nn.ModuleList(GCNConv(a, b, cached=True) for a, b in zip(dims[:-1], dims[1:]))
        self.norms = torch.nn.ModuleList(torch.nn.LayerNorm(hidden) for _ in range(layers - 1))
        self.dropout = dropout

    def forward(self, x, adjacency):
        for i, conv in enumerate(self.convs):
            x = conv(x, adjacency)
            if i < len(self.convs) - 1:
                x = F.dropout(torch.relu(self.norms[i](x)), self.dropout, self.training)
        return x


def main(argv: list[str] | None = None) -> None:
    from gnnq.data.registry import load_dataset

    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--dataset", required=True, help="a file of conf/dataset/, e.g. cora or synthetic-large")
    p.add_argument("--root", required=True)
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--layers", type=int, default=3)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--dropout", type=float, default=0.5)
    p.add_argument("--adjacency", choices=("edge_index", "sparse_csr"), default="edge_index")
    args = p.parse_args(argv)

    cfg = compose_config(
        [f"dataset={args.dataset}", f"dataset.root={args.root}", "dataset.download=false", "logger=none"]
    )
    g = load_dataset(cfg.dataset)
    x, y = torch.from_numpy(g.x), torch.from_numpy(g.y)
    train = torch.from_numpy(g.train_mask)
    edge_index = torch.from_numpy(g.edge_index)
    if args.adjacency == "sparse_csr":
        from torch_geometric.utils import to_torch_csr_tensor

        # PyG's convention for sparse inputs: adj_t[dst, src], i.e. the transposed adjacency.
        adjacency = to_torch_csr_tensor(edge_index.flip(0), size=(g.num_nodes, g.num_nodes))
    else:
        adjacency = edge_index
    torch.manual_seed(0)
    model = PygGCN(g.num_features, args.hidden, g.num_classes, args.layers, args.dropout)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    times = []
    for _ in range(args.epochs):
        t0 = time.perf_counter()
        model.train()
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x, adjacency)[train], y[train]).backward()
        opt.step()
        times.append(time.perf_counter() - t0)
    print(
        json.dumps(
            {
                "epoch_time_s": statistics.median(times),
                "epoch_times_s": times,
                "peak_memory_mib": peak_rss_mib(),
                "threads": torch.get_num_threads(),
                "num_nodes": g.num_nodes,
                "num_edges": g.num_edges,
            }
        )
    )


if __name__ == "__main__":
    main()
