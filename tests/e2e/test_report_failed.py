"""gnnq-report never ranks a failed run, whatever numbers its record holds; it lists it under failed runs."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_helpers import read_record, run_dirs, run_gnnq

SMALL = ["logger=none", "trainer.epochs=3", "dataset.num_nodes=1500", "cluster.nproc=2"]


@pytest.fixture(scope="module")
def ok_and_failed_runs(tmp_path_factory) -> Path:
    """A real ok run, and a real run of another configuration that failed at epoch 2 (an injected fault) whose
    record then got the best-looking numbers a late failure could carry: test 1.0 and the fastest epochs."""
    root = tmp_path_factory.mktemp("report_failed")
    runs, data = root / "runs", root / "data"
    ok = run_gnnq([*SMALL, "model.hidden=16"], runs / "ok", data)
    assert ok.returncode == 0, ok.stderr
    failed = run_gnnq([*SMALL, "model.hidden=32"], runs / "failed", data, env={"GNNQ_FAULT_INJECT": "rank=1,epoch=2"})
    assert failed.returncode == 1, failed.stderr
    (failed_dir,) = run_dirs(runs / "failed")
    record = read_record(failed_dir)
    assert record["status"] == "failed" and "rank 1" in record["error"]
    record.update(best_val=1.0, test=1.0, epoch_time_s=1e-6, comm_bytes_per_epoch=1)
    (failed_dir / "record.json").write_text(json.dumps(record))
    return runs


@pytest.mark.parametrize("criterion", ["throughput", "bytes", "time"])
def test_a_failed_run_is_listed_never_ranked(tmp_path, ok_and_failed_runs, criterion):
    runs = ok_and_failed_runs
    (ok_dir,), (failed_dir,) = run_dirs(runs / "ok"), run_dirs(runs / "failed")
    out = tmp_path / "report"
    report = Path(sys.executable).parent / "gnnq-report"
    res = subprocess.run(
        [str(report), str(runs), "--criterion", criterion, "--out", str(out)], capture_output=True, text=True
    )
    assert res.returncode == 0, res.stderr
    ranked, _, failed_section = res.stdout.partition("## Failed runs (not ranked)")
    leaderboard = ranked.split("## Leaderboard: synthetic")[1]
    assert "model.hidden=16" in leaderboard and "model.hidden=32" not in leaderboard
    assert "1.0000" not in leaderboard
    assert f"- {failed_dir}: {read_record(failed_dir)['error']}" in failed_section
    assert str(ok_dir) not in failed_section
    with open(out / "leaderboard-synthetic.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 1 and "model.hidden=16" in rows[0]["config"], rows
    with open(out / "groups.csv", newline="") as f:
        assert ["model.hidden=32" not in row["config"] for row in csv.DictReader(f)] == [True]
