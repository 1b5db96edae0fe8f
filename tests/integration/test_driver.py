"""The epoch driver: one row schema, best validation, cross-rank rows and resume for every trainer.

Here: the cases with real processes (gloo ranks, torchrun or gnnq); the others are in `tests/unit/test_driver.py`.
"""

from __future__ import annotations

import os
import statistics
import tempfile
from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf

from gnnq.admm.train import train_admm
from gnnq.comm import Communicator
from gnnq.config.typed import typed_config
from gnnq.data.gamlp import gamlp_graph
from gnnq.data.part import build_parts
from gnnq.data.partition import partition_nodes
from gnnq.track.overheads import OVERHEAD_KINDS
from gnnq.train.driver import ROW_KEYS, SUMMARY_KEYS
from gnnq.train.faults import FAULT_ENV
from gnnq.train.full_graph import train
from gnnq.train.minibatch import train_minibatch
from tests.cli_helpers import TIME_KEYS
from tests.helpers import random_graph, run_distributed

EPOCHS, EVAL_EVERY = 7, 2  # the last epoch is evaluated although 7 % 2 != 0
TRAINER_ROW_FIELDS = {"full": set(), "admm": {"objective", "residual", "rho"}, "minibatch": {"batches"}}
TRAINER_SUMMARY_KEYS = {  # every trainer counts its model's parameters (num_params)
    "full": {
        "num_params",
        "comm_bytes_per_epoch_by_layer",
        "quantization",
        "codec_backend",
        "nonfinite_values_zeroed",
        "grad_sync",
    },
    "admm": {"num_params", "admm"},
    "minibatch": {
        "num_params",
        "comm_bytes_per_epoch_by_layer",
        "quantization",
        "codec_backend",
        "nonfinite_values_zeroed",
        "minibatch",
    },
}


def _cfg(**overrides):
    """The typed config of the options the overrides name (``model.name`` etc.), then the overrides."""
    names = {key.split(".")[0]: {"name": value} for key, value in overrides.items() if key.endswith(".name")}
    cfg = typed_config(names)
    cfg.model.hidden, cfg.model.layers, cfg.model.dropout = 16, 3, 0.5
    cfg.trainer.epochs, cfg.trainer.eval_every, cfg.trainer.lr = EPOCHS, EVAL_EVERY, 0.01
    for key, value in overrides.items():
        OmegaConf.update(cfg, key, value)
    return cfg


def _graph():
    return random_graph(num_nodes=150, num_edges=900, seed=2)


def _whole(graph):
    return build_parts(graph, np.zeros(graph.num_nodes, dtype=np.int64), 1)[0]


def _full(run_dir=None, resume=False):
    comm = Communicator()
    graph = _graph()
    assignment = partition_nodes(graph.edge_index, graph.num_nodes, comm.world_size, "metis", seed=1)
    part = build_parts(graph, assignment, comm.world_size)[comm.rank]
    rows: list[dict] = []
    cfg = _cfg(**{"trainer.checkpoint_every": 2 if run_dir else 0})
    summary = train(cfg, part, comm, rows.append, run_dir=run_dir, resume=resume)
    return rows, summary


def _admm(run_dir=None, resume=False):
    comm = Communicator()
    part = _whole(gamlp_graph(_graph(), 2, Path(tempfile.mkdtemp())))
    cfg = _cfg(
        **{
            "model.name": "gamlp",
            "model.hops": 2,
            "model.layers": 4,
            "model.dropout": 0.0,
            "parallel.name": "admm",
            "parallel.warmup_iterations": 3,
            "parallel.rho_schedule": "grow",
            "quantizer.name": "grid",
            "trainer.checkpoint_every": 2 if run_dir else 0,
        }
    )
    rows: list[dict] = []
    summary = train_admm(cfg, part, comm, rows.append, run_dir=run_dir, resume=resume)
    return rows, summary


def _minibatch():
    cfg = _cfg(
        **{
            "model.name": "sage",
            "parallel.name": "minibatch",
            "parallel.fanouts": [5],
            "parallel.batch_size": 16,
            "cluster.nproc": 1,
        }
    )
    rows: list[dict] = []
    summary = train_minibatch(cfg, _whole(_graph()), Communicator(), rows.append)
    return rows, summary


def _two_rank_trainers():
    return {"full": _full(), "admm": _admm()}


@pytest.fixture(scope="module")
def runs():
    """{trainer: [(rows, summary) per rank]}: full-graph and ADMM on 2 ranks, mini-batch on 1."""
    per_rank = run_distributed(2, _two_rank_trainers)
    out = {name: [r[name] for r in per_rank] for name in ("full", "admm")}
    out["minibatch"] = run_distributed(1, _minibatch)
    return out


@pytest.mark.parametrize("name", ["full", "admm", "minibatch"])
def test_rows_and_summary_have_one_schema(runs, name):
    rows, summary = runs[name][0]
    assert [r["epoch"] for r in rows] == list(range(1, EPOCHS + 1))
    for row in rows:
        assert tuple(row)[: len(ROW_KEYS)] == ROW_KEYS, "the shared keys come first, in order"
        assert set(row) - set(ROW_KEYS) == TRAINER_ROW_FIELDS[name]
        assert (row["val"] is None) == (row["epoch"] % EVAL_EVERY != 0 and row["epoch"] != EPOCHS)
    assert set(summary) == set(SUMMARY_KEYS) | TRAINER_SUMMARY_KEYS[name]
    world_size = len(runs[name])
    assert summary["world_size"] == world_size and summary["epochs"] == EPOCHS
    assert len(summary["peak_memory_mib_per_rank"]) == world_size and min(summary["peak_memory_mib_per_rank"]) > 0
    assert summary["epoch_time_s"] == statistics.median(r["epoch_time_s"] for r in rows)
    assert summary["comm_bytes_per_epoch"] == sum(r["comm_bytes"] for r in rows) // EPOCHS
    assert summary["final_loss"] == rows[-1]["loss"] and summary["checkpoints"]["written"] == 0
    assert summary["final_test"] == rows[-1]["test"] is not None and summary["final_val"] == rows[-1]["val"]
    # Overheads: the rows' by kind, summed (no checkpoints here, so nothing after the last row).
    assert summary["overhead_by_kind"] == {k: sum(r["overhead_by_kind"][k] for r in rows) for k in OVERHEAD_KINDS}
    assert summary["overhead_time_s"] == pytest.approx(sum(r["overhead_time_s"] for r in rows), rel=1e-12)
    assert summary["training_time_s"] == pytest.approx(
        sum(r["epoch_time_s"] + r["overhead_time_s"] for r in rows), rel=1e-12
    )
    assert summary["throughput_epochs_per_s"] == pytest.approx(EPOCHS / summary["training_time_s"], rel=1e-12)
    for row in rows:
        assert row["overhead_time_s"] >= max(row["overhead_by_kind"].values()) >= 0


@pytest.mark.parametrize("name", ["full", "admm", "minibatch"])
def test_best_validation_is_the_first_epoch_with_the_highest_val(runs, name):
    rows, summary = runs[name][0]
    scored = [r for r in rows if r["val"] is not None]
    top = max(r["val"] for r in scored)
    first = next(r for r in scored if r["val"] == top)
    assert (summary["best_val"], summary["test"], summary["best_epoch"]) == (top, first["test"], first["epoch"])


@pytest.mark.parametrize("name", ["full", "admm"])
def test_every_rank_gets_the_same_rows_and_summary(runs, name):
    """Sums and maxes are reduced over ranks: loss, scores, bytes and even the times agree."""
    (rows0, summary0), (rows1, summary1) = runs[name]
    assert rows0 == rows1
    for summary in (summary0, summary1):
        summary.get("admm", {}).pop("warmup_time_s", None)  # each rank times its own warm start
    assert summary0 == summary1
    assert all(r["comm_bytes"] > 0 for r in rows0), "two ranks must send something, or the test proves nothing"


def _interrupted_then_resumed(trainer_name: str, root: Path):
    """Straight run; a run every rank of which fails at epoch 5; its resume from the checkpoint of epoch 4."""
    run = {"full": _full, "admm": _admm}[trainer_name]
    straight = run(root / "straight")
    run_dir = root / "resumed"
    os.environ[FAULT_ENV] = f"rank={Communicator().rank},epoch=5"
    try:
        run(run_dir)
    except RuntimeError as exc:
        assert "injected fault at epoch 5" in str(exc)
    else:
        raise AssertionError("the injected fault did not stop the run")
    finally:
        del os.environ[FAULT_ENV]
    return straight, run(run_dir, resume=True)


def _without_times(rows):
    return [
        {k: v for k, v in r.items() if not k.endswith("_time_s") and k not in ("assignment", "overhead_by_kind")}
        for r in rows
    ]


@pytest.mark.parametrize("name", ["full", "admm"])
def test_resumed_run_ends_as_the_uninterrupted_one(tmp_path, name):
    (straight_rows, straight), (resumed_rows, resumed) = run_distributed(2, _interrupted_then_resumed, name, tmp_path)[
        0
    ]
    assert [r["epoch"] for r in resumed_rows] == [5, 6, 7]
    assert _without_times(resumed_rows) == _without_times(straight_rows[4:])
    unstable = {*TIME_KEYS, "peak_memory_mib_per_rank", "checkpoints", "admm"}
    assert {k: v for k, v in resumed.items() if k not in unstable} == {
        k: v for k, v in straight.items() if k not in unstable
    }
    assert resumed["checkpoints"]["resumed_from_epoch"] == 4
    assert (
        [e["epoch"] for e in resumed["checkpoints"]["log"]]
        == [e["epoch"] for e in straight["checkpoints"]["log"]]
        == [2, 4, 6]
    )
    if name == "admm":
        assert resumed["admm"]["final_objective"] == straight["admm"]["final_objective"]
        assert resumed["admm"]["final_rho"] == straight["admm"]["final_rho"]


def _full_stopping(target: float) -> dict:
    """The full-graph run stopped at ``target`` and stopped after (nearly) no training time."""
    comm, graph = Communicator(), _graph()
    assignment = partition_nodes(graph.edge_index, graph.num_nodes, comm.world_size, "metis", seed=1)
    part = build_parts(graph, assignment, comm.world_size)[comm.rank]
    out = {}
    for name, key, value in (("val", "trainer.stop_at_val", target), ("time", "trainer.stop_after_s", 1e-9)):
        rows: list[dict] = []
        summary = train(_cfg(**{key: value}), part, comm, rows.append)
        out[name] = (rows, summary)
    return out


def test_a_run_stops_early_after_the_same_epoch_on_every_rank(runs):
    """trainer.stop_at_val: after the first epoch whose val reaches it, with the rows of the run that went on;
    trainer.stop_after_s: after the first epoch whose training time (epochs and overheads) passes it."""
    straight, _ = runs["full"][0]
    target = max(r["val"] for r in straight[:-1] if r["val"] is not None)
    first = next(r["epoch"] for r in straight if r["val"] is not None and r["val"] >= target)
    assert first < EPOCHS, "the target must be reached before the last epoch, or the test proves nothing"
    by_rank = run_distributed(2, _full_stopping, target)
    assert by_rank[0]["val"][0] == by_rank[1]["val"][0] and by_rank[0]["time"][0] == by_rank[1]["time"][0]
    rows, summary = by_rank[0]["val"]
    assert _without_times(rows) == _without_times(straight[:first])
    assert summary["epochs"] == first and summary["stopped_early"]["epoch"] == first
    assert "reached trainer.stop_at_val" in summary["stopped_early"]["reason"]
    rows, summary = by_rank[0]["time"]
    assert [r["epoch"] for r in rows] == [1] and summary["stopped_early"]["epoch"] == 1
    assert "passed trainer.stop_after_s=1e-09" in summary["stopped_early"]["reason"]
    assert runs["full"][0][1]["stopped_early"] is None
