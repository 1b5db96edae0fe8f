"""What a run leaves behind tells the true numbers: record.json and metrics.jsonl are strict JSON and say
where and with what the run ran; the W&B run's summary is the record, field for field (real gnnq runs,
W&B offline, read back from its run file).

Here: the real command-line runs and system services; the others are in `tests/unit/test_records.py`.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
import torch

from gnnq.track.wandb_file import read_offline_run
from gnnq.track.wandb_logger import wandb_summary
from tests.cli_helpers import read_record, run_dirs, run_gnnq

REPO = Path(__file__).resolve().parents[2]
FEATURES, CLASSES, HIDDEN = 64, 8, 16
SMALL = [
    "logger=wandb",
    "logger.mode=offline",
    "dataset.num_nodes=600",
    f"dataset.feature_dim={FEATURES}",
    f"dataset.num_classes={CLASSES}",
    f"model.hidden={HIDDEN}",
    "model.layers=2",
    "cluster.nproc=2",
]


def _reject_constant(name: str):
    raise ValueError(f"not strict JSON: bare {name}")


def strict_load(text: str):
    return json.loads(text, parse_constant=_reject_constant)


def strict_rows(run_dir: Path) -> list[dict]:
    return [strict_load(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def wandb_env(root: Path) -> dict:
    """W&B offline with its staging, cache and settings under ``root``: artifact files can be read back."""
    return {
        "WANDB_MODE": "offline",
        "WANDB_DATA_DIR": str(root / "wandb-data"),
        "WANDB_CACHE_DIR": str(root / "wandb-cache"),
        "WANDB_CONFIG_DIR": str(root / "wandb-config"),
    }


def gnnq_run(root: Path, data: Path, args: list[str], env: dict | None = None, code: int = 0):
    """(run dir, record, metrics rows, the W&B offline run or None) of one real ``gnnq`` run."""
    res = run_gnnq(args, root, data, env={**wandb_env(root), **(env or {})})
    assert res.returncode == code, res.stderr
    (run_dir,) = run_dirs(root)
    record = strict_load((run_dir / "record.json").read_text())
    offline = sorted((run_dir / "wandb").glob("offline-run-*"))
    return run_dir, record, strict_rows(run_dir), read_offline_run(offline[-1]) if offline else None


@pytest.fixture(scope="module")
def data_root(tmp_path_factory):
    return tmp_path_factory.mktemp("data")


@pytest.fixture(scope="module")
def gcn_run(tmp_path_factory, data_root):
    # 6 epochs: the median epoch time is the mean of two, never the last epoch's
    return gnnq_run(tmp_path_factory.mktemp("gcn"), data_root, SMALL + ["trainer.epochs=6", "trainer.seed=3"])


def assert_summary_is_record(run, record: dict) -> None:
    expected = {
        **{k: v for k, v in record["summary"].items() if _scalar(v)},
        **{k: v for k, v in record.items() if _scalar(v)},
        "machine": record["machine"],
        "versions": record["versions"],
    }
    assert expected == wandb_summary(record)
    for key, value in expected.items():
        assert key in run.summary, key
        assert run.summary[key] == value, (key, run.summary[key], value)
    # nothing else: no row's last value posing as the run's (W&B's own _keys and the best val aside)
    assert {k for k in run.summary if not k.startswith("_")} == set(expected) | {"val"}


def _scalar(v) -> bool:
    return v is None or isinstance(v, (bool, int, float, str))


def assert_history_is_metrics(run, rows: list[dict]) -> None:
    assert [h["epoch"] for h in run.history] == [r["epoch"] for r in rows]
    for logged, row in zip(run.history, rows):
        assert {k: v for k, v in logged.items() if not k.startswith("_")} == {
            k: v for k, v in row.items() if v is not None
        }


def test_wandb_summary_is_the_record(gcn_run):
    run_dir, record, rows, run = gcn_run
    assert record["status"] == "ok" and run.exit_code == 0
    assert_summary_is_record(run, record)
    assert (
        record["epoch_time_s"] != rows[-1]["epoch_time_s"]
    )  # else this run could not tell a median from the last epoch
    assert run.summary["epoch_time_s"] == record["epoch_time_s"] == record["summary"]["epoch_time_s"]
    best = max(rows, key=lambda r: r["val"])
    assert run.summary["test"] == record["test"] == best["test"] and run.summary["best_val"] == best["val"]
    assert run.summary["val"] == {"max": record["best_val"]}
    assert run.summary["status"] == "ok" and run.summary["error"] is None


def test_wandb_history_has_one_row_per_epoch(gcn_run):
    _, _, rows, run = gcn_run
    assert len(rows) == 6
    assert_history_is_metrics(run, rows)


def test_wandb_run_named_by_config_with_its_files(gcn_run):
    run_dir, record, _, run = gcn_run
    assert run.name == "synthetic-gcn-sync-fp32-seed3"
    assert run.group == "synthetic-gcn-sync-fp32" and "ranks:2" in run.tags
    assert run.run_id == (run_dir / ".gnnq" / "wandb_run_id").read_text().strip()
    (artifact,) = run.artifacts
    assert artifact["type"] == "run-record"
    assert set(artifact["files"]) == {"record.json", "config.yaml", "metrics.jsonl"}
    for name, staged in artifact["files"].items():  # offline: staged copies, uploaded by `wandb sync`
        assert Path(staged).read_bytes() == (run_dir / name).read_bytes(), name


def test_record_says_where_and_with_what_it_ran(gcn_run):
    _, record, _, _ = gcn_run
    machine, versions = record["machine"], record["versions"]
    assert machine["cores"] == os.cpu_count() and machine["hostname"] == socket.gethostname()
    assert machine["cpu"] and machine["memory_gib"] > 0
    assert machine["gpu_count"] == (torch.cuda.device_count() if torch.cuda.is_available() else 0)
    assert (machine["gpu"] is None) == (machine["gpu_count"] == 0)
    assert versions["torch"] == torch.__version__ and versions["cuda"] == torch.version.cuda
    assert versions["triton"] == _version_or_none("triton") and versions["wandb"] == metadata.version("wandb")
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode != 0:  # tests of an unpacked source tree
        assert record["git_commit"] is None and record["git_dirty"] is None
        return
    status = subprocess.run(
        ["git", "-C", str(REPO), "status", "--porcelain"], capture_output=True, text=True, check=True
    )
    assert record["git_commit"] == head.stdout.strip()
    assert record["git_dirty"] == bool(status.stdout.strip())


def test_record_counts_the_models_parameters(gcn_run):
    _, record, _, _ = gcn_run
    # GCN, 2 layers: Linear(64 -> 16) + LayerNorm(16) + Linear(16 -> 8)
    expected = (FEATURES * HIDDEN + HIDDEN) + 2 * HIDDEN + (HIDDEN * CLASSES + CLASSES)
    assert record["num_params"] == record["summary"]["num_params"] == expected == 1208


def _version_or_none(name: str):
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def test_nonfinite_values_are_null_in_every_file(tmp_path, data_root):
    """lr=1e30 makes the loss NaN from epoch 2 (trainer.nonfinite_loss=warn: the run goes on): metrics.jsonl,
    record.json and W&B say null, any parser reads them."""
    args = SMALL + ["model=sage", "trainer.epochs=3", "trainer.lr=1e30", "trainer.nonfinite_loss=warn"]
    run_dir, record, rows, run = gnnq_run(tmp_path, data_root, args)
    assert rows[0]["loss"] is not None and rows[-1]["loss"] is None and "loss" in rows[-1]
    assert record["status"] == "ok" and record["summary"]["final_loss"] is None
    assert_summary_is_record(run, record)
    assert run.summary["final_loss"] is None
    assert_history_is_metrics(run, rows)
    # SAGE, 2 layers: neigh Linear(64 -> 16) + root Linear(64 -> 16, no bias) + LayerNorm(16) + neigh/root (16 -> 8)
    expected = (2 * FEATURES * HIDDEN + HIDDEN) + 2 * HIDDEN + (2 * HIDDEN * CLASSES + CLASSES)
    assert record["num_params"] == expected


def test_failed_run_wandb_summary_says_failed_and_why(tmp_path, data_root):
    run_dir, record, rows, run = gnnq_run(
        tmp_path, data_root, SMALL + ["trainer.epochs=5"], env={"GNNQ_FAULT_INJECT": "rank=1,epoch=3"}, code=1
    )
    assert record["status"] == "failed" and "rank 1" in record["error"]
    assert record["num_params"] is None and record["machine"]["cores"] == os.cpu_count()
    assert run.summary["status"] == "failed" and run.summary["error"] == record["error"]
    assert_summary_is_record(run, record)
    assert run.exit_code == 1
    assert [r["epoch"] for r in rows] == [1, 2]
    assert_history_is_metrics(run, rows)


def test_admm_record_counts_every_blocks_parameters(tmp_path, data_root):
    args = [
        "logger=none",
        "dataset.num_nodes=600",
        f"dataset.feature_dim={FEATURES}",
        f"dataset.num_classes={CLASSES}",
        "model=gamlp",
        "model.layers=4",
        "model.hidden=16",
        "model.hops=2",
        "parallel=admm",
        "parallel.warmup_iterations=0",
        "trainer.epochs=2",
        "cluster.nproc=2",
    ]
    res = run_gnnq(args, tmp_path, data_root)
    assert res.returncode == 0, res.stderr
    record = read_record(run_dirs(tmp_path)[0])
    dims = [
        FEATURES * 3,
        16,
        16,
        16,
        CLASSES,
    ]  # GA-MLP inputs [X, AX, A^2X]; W and b per layer, over both ranks' blocks
    assert record["num_params"] == sum(a * b + b for a, b in zip(dims[:-1], dims[1:]))


WRITE_BIG_RUN = """
import sys, wandb
run = wandb.init(project="t", mode="offline", dir=sys.argv[1], name="big")
run.log({"epoch": 1, "blob": "a" * 70000})
run.summary["blob"] = "b" * 100000
run.finish()
"""


def test_reader_joins_records_across_log_blocks(tmp_path):
    """Records over 32 KiB span LevelDB blocks (FIRST/MIDDLE/LAST fragments); the reader joins them."""
    res = subprocess.run(
        [sys.executable, "-c", WRITE_BIG_RUN, str(tmp_path)],
        capture_output=True,
        text=True,
        env={**os.environ, **wandb_env(tmp_path), "WANDB_SILENT": "true"},
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    run = read_offline_run(next((tmp_path / "wandb").glob("offline-run-*")))
    assert run.name == "big" and run.summary["blob"] == "b" * 100000
    assert [h["blob"] for h in run.history] == ["a" * 70000]
