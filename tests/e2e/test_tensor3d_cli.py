"""Plexus's 3D grid through the real command line: `gnnq experiment=plexus dataset=cora cluster.nproc=4`, its record
and its bytes."""

from __future__ import annotations

from tests.cli_helpers import read_metrics, read_record, run_dirs, run_gnnq


def test_plexus_preset_runs_on_cora_with_4_ranks_and_counts_its_analytic_bytes(tmp_path, planetoid_root):
    res = run_gnnq(
        ["experiment=plexus", "dataset=cora", "cluster.nproc=4", "logger=none", "trainer.epochs=3"],
        tmp_path,
        planetoid_root,
        timeout=600,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    (run_dir,) = run_dirs(tmp_path)
    record, rows = read_record(run_dir), read_metrics(run_dir)
    summary = record["summary"]
    grid = summary["tensor3d"]
    assert record["status"] == "ok" and record["world_size"] == 4 and len(rows) == 3
    assert grid["grid_chosen_by"] == "model" and grid["grid"][0] * grid["grid"][1] * grid["grid"][2] == 4
    assert grid["permutation"] == "double" and grid["inputs"] == "every_epoch"
    # every epoch puts exactly the collectives' analytic bytes on the wire
    assert all(row["comm_bytes"] == grid["exact_fp32_bytes_per_epoch"] for row in rows)
    assert record["comm_bytes_per_epoch"] == grid["exact_fp32_bytes_per_epoch"] > 0
    assert 0.0 <= record["test"] <= 1.0
