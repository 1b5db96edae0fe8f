"""A real peer as reference: gnnq's distributed GCN against a plain single-process PyG GCNConv model."""

from __future__ import annotations

import statistics

import pytest
import torch
import torch.nn.functional as F

from tests.cli_helpers import read_record, run_dirs, run_gnnq

SEEDS = (0, 1, 2)
EPOCHS, HIDDEN, LR, WEIGHT_DECAY, DROPOUT = 200, 64, 0.01, 5e-4, 0.5


def _pyg_test_accuracy(root, seed: int) -> float:
    from torch_geometric.datasets import Planetoid
    from torch_geometric.nn import GCNConv

    data = Planetoid(str(root), "Cora")[0]

    class GCN(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = GCNConv(data.num_features, HIDDEN)
            self.conv2 = GCNConv(HIDDEN, int(data.y.max()) + 1)

        def forward(self, x, edge_index):
            h = F.dropout(torch.relu(self.conv1(x, edge_index)), DROPOUT, self.training)
            return self.conv2(h, edge_index)

    torch.manual_seed(seed)
    model = GCN()
    opt = torch.optim.Adam(model.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)
    best_val, test_at_best = -1.0, 0.0
    for _ in range(EPOCHS):
        model.train()
        opt.zero_grad()
        F.cross_entropy(model(data.x, data.edge_index)[data.train_mask], data.y[data.train_mask]).backward()
        opt.step()
        model.eval()
        with torch.no_grad():
            pred = model(data.x, data.edge_index).argmax(1)
        val = (pred[data.val_mask] == data.y[data.val_mask]).float().mean().item()
        if val > best_val:
            best_val, test_at_best = val, (pred[data.test_mask] == data.y[data.test_mask]).float().mean().item()
    return test_at_best


@pytest.mark.slow
@pytest.mark.accuracy  # 84 s on 2 cores (3 runs of 200 epochs, and PyG's)
def test_gnnq_gcn_on_cora_matches_pyg_gcnconv(tmp_path, planetoid_root):
    seeds = ",".join(str(s) for s in SEEDS)
    args = [
        "-m",
        "experiment=cora_gcn",
        "logger=none",
        "cluster.nproc=2",
        f"trainer.seed={seeds}",
        f"trainer.epochs={EPOCHS}",
        f"model.hidden={HIDDEN}",
        f"trainer.lr={LR}",
        f"trainer.weight_decay={WEIGHT_DECAY}",
        f"model.dropout={DROPOUT}",
        "model.layers=2",
        "model.norm=none",
    ]
    res = run_gnnq(args, tmp_path / "runs", planetoid_root, timeout=600)
    assert res.returncode == 0, res.stderr
    records = [read_record(d) for d in run_dirs(tmp_path / "runs")]
    assert len(records) == len(SEEDS) and all(r["status"] == "ok" and r["world_size"] == 2 for r in records)
    gnnq_acc = statistics.mean(r["test"] for r in records)
    pyg_acc = statistics.mean(_pyg_test_accuracy(planetoid_root, s) for s in SEEDS)
    print(
        f"Cora GCN test accuracy (mean of {len(SEEDS)} seeds): gnnq 2 ranks {gnnq_acc:.4f}, PyG GCNConv {pyg_acc:.4f}"
    )
    assert gnnq_acc > 0.75
    assert abs(gnnq_acc - pyg_acc) <= 0.015, f"gnnq {gnnq_acc:.4f} vs PyG {pyg_acc:.4f}"
