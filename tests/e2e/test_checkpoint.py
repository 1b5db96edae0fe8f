"""Checkpoint and resume through the real command line: a resumed run ends exactly as an uninterrupted one.

Here: the real command-line runs and system services; the others are in `tests/unit/test_checkpoint.py`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gnnq.config.compose import compose_config
from gnnq.track.wandb_file import read_offline_run
from gnnq.train.checkpoint import CHECKPOINT_DIR, LATEST_FILE
from tests.cli_helpers import TIME_KEYS, read_metrics, read_record, run_dirs, run_gnnq

BASE = [
    "logger=none",
    "dataset.num_nodes=1500",
    "model.hidden=32",
    "model.dropout=0.5",
    "trainer.epochs=8",
    "trainer.checkpoint_every=2",
]
FAULT = {"GNNQ_FAULT_INJECT": "rank=1,epoch=5"}  # fails after the checkpoint of epoch 4


@pytest.fixture(scope="module")
def data_root(tmp_path_factory):
    return tmp_path_factory.mktemp("data")


# A resumed attempt sets its trainer up again (AdaQP: the α exchange), so its first row carries that setup's
# overhead bytes, which the uninterrupted run paid before epoch 1 only.
ATTEMPT_KEYS = {*TIME_KEYS, "overhead_bytes"}


def _comparable_rows(run_dir: Path) -> list[dict]:
    """Metric rows without times and setup overheads (an adaptive reassignment keeps its widths histogram)."""
    rows = [{k: v for k, v in row.items() if k not in ATTEMPT_KEYS} for row in read_metrics(run_dir)]
    for row in rows:
        if "assignment" in row:
            row["assignment"] = row["assignment"]["bits_histogram"]
    return rows


UNSTABLE_SUMMARY_KEYS = {*ATTEMPT_KEYS, "peak_memory_mib_per_rank", "checkpoints", "adaptive"}


def _comparable_summary(record: dict) -> dict:
    summary = {k: v for k, v in record["summary"].items() if k not in UNSTABLE_SUMMARY_KEYS}
    if "admm" in summary:
        summary["admm"] = {k: v for k, v in summary["admm"].items() if k != "warmup_time_s"}
    return summary


def _interrupted_run(tmp_path: Path, data_root: Path, args: list[str]) -> Path:
    res = run_gnnq(args, tmp_path, data_root, env=FAULT)
    assert res.returncode == 1, res.stderr
    (run_dir,) = run_dirs(tmp_path)
    assert read_record(run_dir)["status"] == "failed"
    assert json.loads((run_dir / CHECKPOINT_DIR / LATEST_FILE).read_text())["epoch"] == 4
    return run_dir


CASES = {
    "sync-uniform-sage": ["model=sage", "quantizer=uniform", "quantizer.bits=4"],
    # Stale buffers, adaptive layouts, traced ranges and the time model all cross the checkpoint.
    "stale-adaptive": [
        "parallel=stale",
        "parallel.momentum=0.5",
        "quantizer=adaptive",
        "quantizer.time_model=fixed",
        "quantizer.assign_cycle=3",
    ],
    "sampling": ["parallel=sampling", "parallel.sampling_rate=0.5", "quantizer=uniform"],
    # SANCUS: both ends' caches and the epoch of each owner's last send (a resend is due after the resume).
    "sancus": ["parallel=sancus", "parallel.threshold=1e9", "parallel.max_staleness=2"],
    # pdADMM-G-Q: every layer's p, W, b, z, q, u, the ghosts of the neighbour blocks and the rho schedule; blocks
    # by cost and q left in flight across the (evaluated) epochs between checkpoints, settled at each checkpoint.
    "admm-grid": [
        "model=gamlp",
        "model.layers=4",
        "model.hidden=16",
        "parallel=admm",
        "parallel.warmup_iterations=5",
        "parallel.rho_schedule=grow",
        "quantizer=grid",
        "model.dropout=0.0",
    ],
}
SLOW_CASES = {
    "sampling",
    "sync-uniform-sage",
    "sancus",
}  # no state beyond model/optimizer/RNG, which the others carry too


@pytest.mark.parametrize(
    "case", [pytest.param(c, marks=pytest.mark.slow) if c in SLOW_CASES else c for c in sorted(CASES)]
)
def test_resumed_run_equals_uninterrupted_run(tmp_path, data_root, case):
    args = BASE + CASES[case]
    run_dir = _interrupted_run(tmp_path / "resumed", data_root, args)
    assert [r["epoch"] for r in read_metrics(run_dir)] == [1, 2, 3, 4]
    res = run_gnnq([f"resume={run_dir}"], tmp_path / "resumed", data_root)
    assert res.returncode == 0, res.stderr
    assert "resuming from the checkpoint of epoch 4" in res.stdout
    assert run_gnnq(args, tmp_path / "straight", data_root).returncode == 0
    (straight,) = run_dirs(tmp_path / "straight")

    resumed_rows, straight_rows = _comparable_rows(run_dir), _comparable_rows(straight)
    assert [r["epoch"] for r in resumed_rows] == list(range(1, 9))
    assert resumed_rows == straight_rows  # losses and accuracies bit for bit, bytes alike
    resumed, uninterrupted = read_record(run_dir), read_record(straight)
    assert resumed["status"] == "ok" and resumed["resumed_from_epoch"] == 4
    for key in ("best_val", "test", "comm_bytes_per_epoch"):
        assert resumed[key] == uninterrupted[key], key
    assert _comparable_summary(resumed) == _comparable_summary(uninterrupted)
    if "admm" in resumed["summary"]:  # blocks by cost, not equal layer counts ([1, 2], [3, 4]), q overlapped
        admm = resumed["summary"]["admm"]
        assert admm["layer_blocks"] == [[1, 1], [2, 4]] and admm["overlap_q"] is True
    checkpoints = resumed["summary"]["checkpoints"]
    assert [e["epoch"] for e in checkpoints["log"]] == [2, 4, 6, 8] and checkpoints["resumed_from_epoch"] == 4
    assert list((run_dir / CHECKPOINT_DIR).glob("epoch-*")) == [run_dir / CHECKPOINT_DIR / "epoch-000008"]
    assert (run_dir / "logs" / "torchrun-until-epoch-4.log").is_file(), "the interrupted attempt's log is kept"


def test_resume_keeps_the_wandb_run(tmp_path, data_root):
    args = [a for a in BASE if not a.startswith("logger=")] + [
        "logger=wandb",
        "logger.mode=offline",
        "trainer.epochs=6",
    ]
    run_dir = _interrupted_run(tmp_path, data_root, args)
    assert run_gnnq([f"resume={run_dir}"], tmp_path, data_root).returncode == 0
    offline = sorted((run_dir / "wandb").glob("offline-run-*"))
    assert len(offline) == 2, offline
    ids = {p.name.rsplit("-", 1)[1] for p in offline}
    assert len(ids) == 1, f"the resumed run must log to the same W&B run id, got {ids}"
    assert (run_dir / ".gnnq" / "wandb_run_id").read_text().strip() in ids
    first, resumed = (read_offline_run(p) for p in offline)  # offline-run-<time>-<id>: in order of start
    record = read_record(run_dir)
    assert first.summary["status"] == "failed" and resumed.summary["status"] == "ok"
    assert [h["epoch"] for h in first.history] == [1, 2, 3, 4] and [h["epoch"] for h in resumed.history] == [5, 6]
    for key in ("best_val", "test", "epoch_time_s", "num_params", "resumed_from_epoch"):
        assert resumed.summary[key] == record[key], key
    assert resumed.summary["val"] == {"max": record["best_val"]}  # over all 6 epochs, not only the resumed ones


def test_corrupted_checkpoint_is_named_and_not_loaded(tmp_path, data_root):
    run_dir = _interrupted_run(tmp_path, data_root, BASE)
    rank_file = next((run_dir / CHECKPOINT_DIR).glob("epoch-*/rank1.pt"))
    data = bytearray(rank_file.read_bytes())
    data[len(data) // 2] ^= 0xFF
    rank_file.write_bytes(bytes(data))
    res = run_gnnq([f"resume={run_dir}"], tmp_path, data_root)
    assert res.returncode == 2
    assert "rank1.pt is corrupted" in res.stderr and "sha256" in res.stderr
    assert read_record(run_dir)["status"] == "failed", "the failed attempt's record stays"


def test_resume_refuses_what_it_cannot_continue(tmp_path, data_root):
    no_checkpoints = ["logger=none", "dataset.num_nodes=1500", "model.hidden=16", "trainer.epochs=2"]
    assert run_gnnq(no_checkpoints, tmp_path / "plain", data_root).returncode == 0
    (finished,) = run_dirs(tmp_path / "plain")
    res = run_gnnq([f"resume={finished}"], tmp_path, data_root)
    assert (
        res.returncode == 2
        and "no checkpoint to resume from" in res.stderr
        and "trainer.checkpoint_every=0" in res.stderr
    )

    assert run_gnnq(no_checkpoints + ["trainer.checkpoint_every=1"], tmp_path / "done", data_root).returncode == 0
    (done,) = run_dirs(tmp_path / "done")
    res = run_gnnq([f"resume={done}"], tmp_path, data_root)
    assert res.returncode == 2 and "nothing to resume" in res.stderr

    res = run_gnnq([f"resume={done}", "trainer.epochs=9"], tmp_path, data_root)
    assert res.returncode == 2 and "takes nothing else" in res.stderr and "trainer.epochs=9" in res.stderr
    res = run_gnnq([f"resume={tmp_path / 'nowhere'}"], tmp_path, data_root)
    assert res.returncode == 2 and "no config.yaml there" in res.stderr


def test_checkpoints_rejected_where_not_supported(tmp_path, data_root):
    minibatch = ["logger=none", "parallel=minibatch", "cluster.nproc=1"]
    res = run_gnnq([*minibatch, "trainer.checkpoint_every=5"], tmp_path / "runs", data_root)
    assert res.returncode == 2, res.stderr
    assert res.stderr.splitlines() == [
        "gnnq: error: trainer.checkpoint_every=5 is not supported with parallel=minibatch "
        "(a single-process reference); set trainer.checkpoint_every=0 here"
    ]
    assert not (tmp_path / "runs").exists(), "rejected before anything ran: no run dir, no checkpoint"
    compose_config([*minibatch, "trainer.checkpoint_every=0"])  # the same run without checkpoints is accepted
    compose_config(["logger=none", "trainer.checkpoint_every=5"])  # and checkpoints where they are supported
