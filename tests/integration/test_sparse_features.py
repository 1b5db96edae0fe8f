"""Sparse input features (features.npz, kept sparse through parts, the layer-0 halo fetch and the first layer's
product) give the logits and gradients of the same features given dense, on 2 real gloo ranks; and the layer-0
halo fetch sends only the non-zeros."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch
import torch.distributed as dist
from omegaconf import OmegaConf

from gnnq.comm import Communicator, HaloExchange
from gnnq.comm.accounting import HALO_SETUP
from gnnq.data.loaders.files import load_files
from gnnq.data.part import build_parts
from gnnq.data.partition import partition_nodes
from gnnq.models import local_graph_for
from gnnq.models.factory import build_model
from gnnq.parallel import SyncStrategy
from gnnq.train.full_graph import forward_backward
from tests.helpers import random_graph, run_distributed

F = 300  # wide and sparse: about 2% of the entries non-zero


def write_graph(d, sparse: bool) -> None:
    """A random graph as the files format, its features as features.npz (sparse) or features.npy (dense)."""
    g = random_graph(num_nodes=120, num_edges=700, num_features=1)
    x = sp.random(g.num_nodes, F, density=0.02, format="csr", dtype=np.float32, random_state=np.random.default_rng(1))
    x.data[:] = 1.0  # binary, as bag-of-words features are
    d.mkdir(parents=True, exist_ok=True)
    np.savetxt(d / "edges.txt", g.edge_index.T, fmt="%d")
    np.save(d / "labels.npy", g.y)
    if sparse:
        sp.save_npz(d / "features.npz", x)
    else:
        np.save(d / "features.npy", x.toarray())


def _forward(path: str, model_name: str):
    comm = Communicator()
    graph = load_files(path, 0.5, 0.25, 0)
    assignment = partition_nodes(graph.edge_index, graph.num_nodes, comm.world_size, "metis", seed=1)
    part = build_parts(graph, assignment, comm.world_size)[comm.rank]
    torch.manual_seed(0)
    cfg = OmegaConf.create({"model": {"name": model_name, "layers": 3, "hidden": 16, "dropout": 0.0, "norm": "layer"}})
    model = build_model(cfg, part)
    exchange = HaloExchange(comm, part.send_idx, part.send_counts, part.halo_counts)
    strategy = SyncStrategy(exchange, local_graph_for(model_name, part), part.x)
    logits, _ = forward_backward(model, part, strategy, float(graph.train_mask.sum()), comm)
    full = torch.zeros(graph.num_nodes, graph.num_classes)
    full[part.inner_ids] = logits.detach()
    dist.all_reduce(full)
    x = part.x.to_dense() if part.x.layout == torch.sparse_csr else part.x
    sent_rows = x.index_select(0, part.send_idx)
    return {
        "sparse": part.x.layout == torch.sparse_csr,
        "logits": full,
        "grads": {k: p.grad.clone() for k, p in model.named_parameters()},
        "setup_bytes": comm.stats.total_bytes(HALO_SETUP),
        "sent_nnz": int((sent_rows != 0).sum()),
        "sent_rows": int(part.send_idx.numel()),
    }


@pytest.mark.parametrize("model_name", ["gcn", "sage"])
def test_sparse_and_dense_features_give_the_same_logits(tmp_path, model_name):
    write_graph(tmp_path / "sparse", sparse=True)
    write_graph(tmp_path / "dense", sparse=False)
    sparse = run_distributed(2, _forward, str(tmp_path / "sparse"), model_name)
    dense = run_distributed(2, _forward, str(tmp_path / "dense"), model_name)
    assert all(r["sparse"] for r in sparse) and not any(r["sparse"] for r in dense)
    scale = dense[0]["logits"].abs().max()
    assert (sparse[0]["logits"] - dense[0]["logits"]).abs().max() <= 1e-5 * scale
    for name, g in dense[0]["grads"].items():
        assert torch.allclose(sparse[0]["grads"][name], g, rtol=1e-5, atol=1e-5 * g.abs().max()), name
    for s, d in zip(sparse, dense):
        # dense: 4 bytes per feature of every row sent; sparse: 4 per row (its count), 2 + 4 per non-zero
        assert d["setup_bytes"] == 4 * F * d["sent_rows"]
        assert s["setup_bytes"] == 4 * s["sent_rows"] + 6 * s["sent_nnz"]
        assert s["setup_bytes"] < d["setup_bytes"] / 5
