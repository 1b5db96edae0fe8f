"""The real command line: torchrun dispatch, run records, reproducibility, failures, sweeps.

Here: the real command-line runs and system services; the others are in `tests/integration/test_cli.py`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli_helpers import read_metrics, read_record, run_dirs, run_gnnq, without_times

SMALL = ["logger=none", "dataset.num_nodes=1500", "model.hidden=32", "trainer.epochs=6"]


@pytest.fixture(scope="module")
def data_root(tmp_path_factory):
    return tmp_path_factory.mktemp("data")


def test_one_rank_uses_the_same_path(tmp_path, data_root):
    res = run_gnnq(SMALL + ["cluster.nproc=1"], tmp_path, data_root)
    assert res.returncode == 0, res.stderr
    record = read_record(run_dirs(tmp_path)[0])
    assert record["world_size"] == 1 and record["comm_bytes_per_epoch"] == 0


def test_same_seed_same_metrics(tmp_path, data_root):
    for sub in ("a", "b"):
        assert run_gnnq(SMALL + ["model=sage"], tmp_path / sub, data_root).returncode == 0
    a, b = (read_metrics(run_dirs(tmp_path / sub)[0]) for sub in ("a", "b"))
    assert without_times(a) == without_times(b)
    c_dir = tmp_path / "c"
    assert run_gnnq(SMALL + ["model=sage", "trainer.seed=1"], c_dir, data_root).returncode == 0
    assert without_times(read_metrics(run_dirs(c_dir)[0])) != without_times(a)


def _assert_one_clear_line(res: subprocess.CompletedProcess, *needles: str) -> str:
    assert res.returncode != 0
    assert "Traceback" not in res.stderr + res.stdout
    errors = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(errors) == 1, res.stderr
    for needle in needles:
        assert needle in errors[0], errors[0]
    return errors[0]


@pytest.mark.parametrize(
    "args, needles",
    [
        (["dataset=nosuch"], ["dataset=nosuch", "cora"]),
        (["dataset.name=nosuch"], ["dataset.name", "synthetic"]),
        (["trainer.epochs=abc"], ["trainer.epochs", "Integer"]),
        (["trainer.epochs=-3"], ["trainer.epochs", ">= 1"]),
        (["cluster.nproc=0"], ["cluster.nproc", ">= 1"]),
        (["cluster.nproc=9", "dataset.num_nodes=8"], ["cluster.nproc", "8 nodes"]),
        (["trainer.epoch=3"], ["trainer.epoch", "epochs"]),
        (["+trainer.extra=1"], ["trainer.extra", "no such key"]),
        (["model.norm=batch"], ["model.norm", "layer"]),
    ],
)
def test_bad_config_rejected_before_launch(tmp_path, data_root, args, needles):
    res = run_gnnq(["logger=none", *args], tmp_path, data_root, timeout=60)
    _assert_one_clear_line(res, *needles)
    assert res.returncode == 2
    assert not list(tmp_path.rglob("record.json")), "nothing may be launched or recorded for a rejected config"


def test_bad_sweep_point_rejected_before_any_run(tmp_path, data_root):
    res = run_gnnq(["-m", *SMALL, "trainer.lr=0.01,-1"], tmp_path, data_root, timeout=60)
    _assert_one_clear_line(res, "trainer.lr")
    assert not list(tmp_path.rglob("record.json"))


def test_missing_data_files_named(tmp_path):
    res = run_gnnq(
        ["logger=none", "dataset=cora", "dataset.download=false"], tmp_path / "runs", tmp_path / "empty", timeout=60
    )
    line = _assert_one_clear_line(res, "ind.cora")
    assert str(tmp_path / "empty") in line
    (run_dir,) = run_dirs(tmp_path / "runs")
    record = read_record(run_dir)  # complete JSON, marked failed
    assert record["status"] == "failed" and "ind.cora" in record["error"]


def test_truncated_raw_file(tmp_path, planetoid_root):
    import shutil

    root = tmp_path / "data"
    shutil.copytree(planetoid_root / "Cora", root / "Cora")
    shutil.rmtree(root / "Cora" / "processed", ignore_errors=True)
    raw = root / "Cora" / "raw" / "ind.cora.x"
    raw.write_bytes(raw.read_bytes()[: raw.stat().st_size // 2])
    res = run_gnnq(["logger=none", "dataset=cora", "dataset.download=false"], tmp_path / "runs", root, timeout=60)
    _assert_one_clear_line(res, "cora")
    assert read_record(run_dirs(tmp_path / "runs")[0])["status"] == "failed"


def test_failing_rank_fails_fast_and_names_the_rank(tmp_path, data_root):
    t0 = time.monotonic()
    res = run_gnnq(
        SMALL + ["trainer.epochs=50"], tmp_path, data_root, env={"GNNQ_FAULT_INJECT": "rank=1,epoch=3"}, timeout=120
    )
    elapsed = time.monotonic() - t0
    line = _assert_one_clear_line(res, "rank 1", "injected fault")
    assert res.returncode == 1, line
    assert elapsed < 60
    record = read_record(run_dirs(tmp_path)[0])
    assert record["status"] == "failed" and "rank 1" in record["error"]
    ps = subprocess.run(["pgrep", "-f", f"gnnq.rank --run-dir {tmp_path}"], capture_output=True, text=True)
    assert ps.stdout.strip() == "", "no rank may outlive the job"


def test_multirun_dispatches_one_job_per_point(tmp_path, data_root):
    res = run_gnnq(["-m", *SMALL, "trainer.seed=0,1"], tmp_path, data_root)
    assert res.returncode == 0, res.stderr
    records = [read_record(d) for d in run_dirs(tmp_path)]
    assert sorted(r["config"]["trainer"]["seed"] for r in records) == [0, 1]
    assert all(r["status"] == "ok" for r in records)


def test_sweep_file_runs_its_points(tmp_path, data_root):
    # sweeps/foundation_check.yaml sweeps model x partitioner x ranks; the command line pins two axes.
    # `--config-dir sweeps` names the sweeps shipped with gnnq (sweeps/; gnnq/sweeps/ in a wheel), from any directory.
    args = [
        "-m",
        "--config-dir",
        "sweeps",
        "--config-name",
        "foundation_check",
        "model=sage",
        "cluster.nproc=1",
        "dataset.num_nodes=1500",
        "model.hidden=16",
        "trainer.epochs=2",
    ]
    res = run_gnnq(args, tmp_path, data_root)
    assert res.returncode == 0, res.stderr
    records = [read_record(d) for d in run_dirs(tmp_path)]
    assert sorted(r["config"]["partitioner"]["name"] for r in records) == ["metis", "random"]
    assert all(r["config"]["model"]["name"] == "sage" and r["config"]["logger"]["name"] == "none" for r in records)


def test_multirun_goes_on_after_a_failed_point(tmp_path, data_root):
    # cora has no files in this data root, so that point fails while loading; synthetic still runs.
    synthetic_keys = ("dataset.num_nodes",)  # cora has none of them
    small = [o for o in SMALL if not o.startswith(synthetic_keys)]
    res = run_gnnq(["-m", *small, "dataset=cora,synthetic", "dataset.download=false"], tmp_path, data_root)
    assert res.returncode == 1
    records = {r["config"]["dataset"]["name"]: r for r in map(read_record, run_dirs(tmp_path))}
    assert records["cora"]["status"] == "failed" and "ind.cora" in records["cora"]["error"]
    assert records["synthetic"]["status"] == "ok"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_stops_all_ranks_and_records_failure(tmp_path, data_root, sig):
    env = {**os.environ, "GNNQ_RUNS": str(tmp_path), "GNNQ_DATA": str(data_root)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "gnnq.cli", *SMALL, "trainer.epochs=100000"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while not list(tmp_path.rglob("metrics.jsonl")) or not next(tmp_path.rglob("metrics.jsonl")).read_text():
        assert time.monotonic() < deadline and proc.poll() is None, "training never started"
        time.sleep(0.2)  # wait until rank 0 has finished an epoch
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig  # 130 for SIGINT, 143 for SIGTERM
    assert "Traceback" not in err and f"interrupted ({signal.Signals(sig).name})" in err
    record = read_record(run_dirs(tmp_path)[0])
    assert record["status"] == "failed" and signal.Signals(sig).name in record["error"]
    ps = subprocess.run(["pgrep", "-f", f"gnnq.rank --run-dir {tmp_path}"], capture_output=True, text=True)
    assert ps.stdout.strip() == "", "no rank may outlive the job"


def test_report_lists_runs(tmp_path, data_root):
    assert run_gnnq(SMALL, tmp_path, data_root).returncode == 0
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "record.json").write_text("{not json")
    report = Path(sys.executable).parent / "gnnq-report"  # the installed console script
    res = subprocess.run([str(report), str(tmp_path)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert "synthetic" in res.stdout and "| ok" in res.stdout
    assert "broken" in res.stderr and "skipping" in res.stderr


def test_wandb_offline_logs_and_never_writes_the_key(tmp_path, data_root):
    secret = "gnnqtestsecret" + "0123456789abcdef0123456789"
    args = [a for a in SMALL if a != "logger=none"] + ["logger=wandb"]
    res = run_gnnq(args, tmp_path, data_root, env={"WANDB_API_KEY": secret, "WANDB_MODE": "offline"})
    assert res.returncode == 0, res.stderr
    run_dir = run_dirs(tmp_path)[0]
    offline = list((run_dir / "wandb").glob("offline-run-*"))
    assert offline, "wandb must write an offline run under the run dir"
    assert list(offline[0].glob("*.wandb")), "the offline run holds its history file"
    for path in run_dir.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), f"API key written to {path}"
    summary = (
        json.loads(next(run_dir.rglob("wandb-summary.json")).read_text())
        if list(run_dir.rglob("wandb-summary.json"))
        else None
    )
    if summary is not None:
        assert summary.get("best_val") == read_record(run_dir)["best_val"]


@pytest.mark.slow
def test_scale_run_on_200k_node_graph_with_4_ranks(tmp_path, data_root):
    """The synthetic_large preset (200k nodes, 5.2M edges) end to end on 4 ranks."""
    res = run_gnnq(
        ["experiment=synthetic_large", "cluster.nproc=4", "trainer.epochs=2", "trainer.eval_every=2"],
        tmp_path,
        data_root,
        timeout=1200,
    )
    assert res.returncode == 0, res.stderr
    record = read_record(run_dirs(tmp_path)[0])
    assert record["status"] == "ok" and record["world_size"] == 4
    assert record["partition"]["num_nodes"] == 200_000 and record["partition"]["num_edges"] > 5_000_000
    by_layer = record["summary"]["comm_bytes_per_epoch_by_layer"]
    assert sum(by_layer.values()) == record["comm_bytes_per_epoch"] > 0
    assert len(record["summary"]["peak_memory_mib_per_rank"]) == 4
