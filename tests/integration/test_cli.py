"""The real command line: torchrun dispatch, run records, reproducibility, failures, sweeps.

Here: the cases with real processes (gloo ranks, torchrun or gnnq); the others are in `tests/e2e/test_cli.py`.
"""

from __future__ import annotations

import pytest

from tests.cli_helpers import read_metrics, read_record, run_dirs, run_gnnq

SMALL = ["logger=none", "dataset.num_nodes=1500", "model.hidden=32", "trainer.epochs=6"]


@pytest.fixture(scope="module")
def data_root(tmp_path_factory):
    return tmp_path_factory.mktemp("data")


def test_main_job_leaves_complete_record(tmp_path, data_root):
    res = run_gnnq(SMALL, tmp_path, data_root)
    assert res.returncode == 0, res.stderr
    (run_dir,) = run_dirs(tmp_path)
    record = read_record(run_dir)
    assert record["status"] == "ok" and record["error"] is None
    assert record["world_size"] == 2
    assert record["config"]["dataset"]["name"] == "synthetic" and record["config"]["cluster"]["nproc"] == 2
    for key in ("best_val", "test", "epoch_time_s", "comm_time_s", "comm_bytes_per_epoch", "versions"):
        assert record[key] is not None, key
    assert record["comm_bytes_per_epoch"] > 0
    assert record["versions"]["torch"].startswith("2.")
    rows = read_metrics(run_dir)
    assert [r["epoch"] for r in rows] == list(range(1, 7))
    assert all(r["comm_bytes"] == record["comm_bytes_per_epoch"] for r in rows)  # sync: same bytes every epoch
    best = max(rows, key=lambda r: r["val"])
    assert record["best_val"] == best["val"] and record["test"] == best["test"]
    assert (run_dir / "config.yaml").read_text().count("name: synthetic") == 1
    assert "| status" in res.stdout and "epoch 6/6" in res.stdout
