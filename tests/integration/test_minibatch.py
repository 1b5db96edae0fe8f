"""Mini-batch reference trainer: neighbour-sampled blocks and the single-process training loop.

Here: the cases with real processes (gloo ranks, torchrun or gnnq); the others are in `tests/unit/test_minibatch.py`.
"""

from __future__ import annotations

import numpy as np
import pytest

from gnnq.comm import Communicator
from gnnq.config.typed import typed_config
from gnnq.data.part import build_parts
from gnnq.train.full_graph import train
from gnnq.train.minibatch import train_minibatch
from tests.helpers import random_graph, run_distributed

HIDDEN, LAYERS = 16, 3


def _whole(graph):
    return build_parts(graph, np.zeros(graph.num_nodes, dtype=np.int64), 1)[0]


def _cfg(model: str, **parallel):
    cfg = typed_config({"parallel": {"name": "minibatch"}})
    cfg.model.name, cfg.model.hidden, cfg.model.layers, cfg.model.dropout = model, HIDDEN, LAYERS, 0.0
    cfg.parallel.name = "minibatch"
    for k, v in parallel.items():
        cfg.parallel[k] = v
    cfg.trainer.epochs, cfg.trainer.lr, cfg.trainer.eval_every = 8, 0.01, 2
    cfg.cluster.nproc = 1
    return cfg


def _train_both(model_name: str):
    """On a 1-rank gloo group: mini-batch rows and summary, and the full-graph trainer's for the keys."""
    graph = random_graph(num_nodes=150, num_edges=900, seed=2)
    part = _whole(graph)
    comm = Communicator()
    cfg = _cfg(model_name, fanouts=[5, 5, 5], batch_size=16)
    rows: list[dict] = []
    summary = train_minibatch(cfg, part, comm, on_epoch=rows.append)
    again: list[dict] = []
    train_minibatch(cfg, part, comm, on_epoch=again.append)
    full_cfg = _cfg(model_name)
    full_cfg.parallel.name, full_cfg.trainer.epochs = "sync", 2
    full_rows: list[dict] = []
    full_summary = train(full_cfg, part, comm, on_epoch=full_rows.append)
    return {
        "rows": rows,
        "summary": summary,
        "again": again,
        "full_rows": full_rows,
        "full_summary": full_summary,
        "num_train": int(graph.train_mask.sum()),
    }


@pytest.mark.parametrize("model_name", ["gcn", "sage"])
def test_train_minibatch_rows_and_summary(model_name):
    res = run_distributed(1, _train_both, model_name)[0]
    rows, summary = res["rows"], res["summary"]
    assert [set(r) for r in rows] == [set(res["full_rows"][0]) | {"batches"}] * len(rows)
    # no gradient sync in a single process: the full-graph trainer's grad_sync description has no counterpart
    assert set(summary) == (set(res["full_summary"]) - {"grad_sync"}) | {"minibatch"}
    assert [r["epoch"] for r in rows] == list(range(1, 9))
    assert all(r["batches"] == -(-res["num_train"] // 16) for r in rows)
    assert all((r["val"] is None) == (r["epoch"] % 2 == 1) for r in rows)
    assert all(r["comm_bytes"] == 0 and r["comm_time_s"] == 0.0 for r in rows)
    losses = [r["loss"] for r in rows]
    assert losses[-1] < 0.9 * losses[0] and losses[-1] < min(losses[:4]), losses
    mb = summary["minibatch"]
    assert mb["fanouts"] == [5, 5, 5] and mb["batch_size"] == 16 and mb["sampled_edges_per_epoch"] > 0
    assert summary["quantization"] is None and summary["world_size"] == 1 and summary["epochs"] == 8
    # Reproducible: the same seed gives the same losses and scores.
    keys = ("loss", "train", "val", "test", "batches")
    assert [[r[k] for k in keys] for r in res["again"]] == [[r[k] for k in keys] for r in rows]
