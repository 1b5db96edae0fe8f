"""Peer strategies through the real command line (torchrun, gloo): records, bytes and what each run reports."""

from __future__ import annotations

import pytest

from tests.cli_helpers import read_metrics, read_record, run_dirs, run_gnnq

SMALL = [
    "logger=none",
    "dataset.num_nodes=1500",
    "model.hidden=32",
    "model.layers=3",
    "trainer.epochs=4",
    "cluster.nproc=3",
]


def test_stale_sampling_and_sancus_runs_next_to_sync(tmp_path):
    res = run_gnnq(["-m", *SMALL, "parallel=sync,stale,sampling,sancus"], tmp_path, tmp_path / "data")
    assert res.returncode == 0, res.stderr
    records = {}
    for run_dir in run_dirs(tmp_path):
        rec = read_record(run_dir)
        assert rec["status"] == "ok", rec.get("error")
        records[rec["config"]["parallel"]["name"]] = (rec, read_metrics(run_dir))
    assert set(records) == {"sync", "stale", "sampling", "sancus"}
    sync, stale, sampling, sancus = (records[k][0] for k in ("sync", "stale", "sampling", "sancus"))
    # Same rows move in stale as in sync, one epoch later; the same evaluation messages.
    assert stale["comm_bytes_per_epoch"] == sync["comm_bytes_per_epoch"] > 0
    assert all(r["eval_comm_bytes"] == records["sync"][1][0]["eval_comm_bytes"] for r in records["stale"][1])
    # parallel=sampling's 10% of every peer's boundary rows per epoch (rounded per channel); evaluation on the full
    # graph.
    assert sampling["comm_bytes_per_epoch"] / sync["comm_bytes_per_epoch"] == pytest.approx(0.1, abs=0.03)
    assert records["sampling"][1][-1]["eval_comm_bytes"] == records["sync"][1][-1]["eval_comm_bytes"]
    # parallel=sancus: at most sync's rows, plus one flag byte per peer, hidden layer and rank (3 ranks, 2 hidden
    # layers).
    assert 0 < sancus["comm_bytes_per_epoch"] <= sync["comm_bytes_per_epoch"] + 3 * 2 * 2
    for rec in (stale, sampling, sancus):
        assert rec["test"] is not None and rec["config"]["partitioner"] == sync["config"]["partitioner"]


def test_minibatch_reference_run(tmp_path):
    res = run_gnnq(
        [
            *SMALL,
            "experiment=minibatch",
            "cluster.nproc=1",
            "model.hidden=32",
            "trainer.epochs=3",
            "parallel.batch_size=256",
            "parallel.fanouts=[5,5,-1]",
        ],
        tmp_path,
        tmp_path / "data",
    )
    assert res.returncode == 0, res.stderr
    (run_dir,) = run_dirs(tmp_path)
    rec = read_record(run_dir)
    assert rec["status"] == "ok" and rec["world_size"] == 1 and rec["comm_bytes_per_epoch"] == 0
    assert (
        rec["summary"]["minibatch"]["fanouts"] == [5, 5, -1]
        and rec["summary"]["minibatch"]["sampled_edges_per_epoch"] > 0
    )
    rows = read_metrics(run_dir)
    assert [r["epoch"] for r in rows] == [1, 2, 3] and all(r["batches"] == rows[0]["batches"] > 1 for r in rows)
    assert rows[-1]["test"] is not None


def test_stale_with_adaptive_bit_widths(tmp_path):
    """PipeGCN's stale messages with AdaQP's assignments: reassignments while last epoch's messages are in flight."""
    res = run_gnnq(
        [
            *SMALL,
            "trainer.epochs=5",
            "parallel=stale",
            "quantizer=adaptive",
            "quantizer.assign_cycle=2",
            "quantizer.group_size=20",
            "quantizer.profile_repeats=1",
        ],
        tmp_path,
        tmp_path / "data",
    )
    assert res.returncode == 0, res.stderr
    (run_dir,) = run_dirs(tmp_path)
    rec = read_record(run_dir)
    assert rec["status"] == "ok" and [a["epoch"] for a in rec["summary"]["adaptive"]["assignments"]] == [3, 5]
    rows = read_metrics(run_dir)
    assert rows[-1]["comm_bytes"] < rows[0]["comm_bytes"]  # assigned widths average below the first cycle's 8 bits
    assert rec["summary"]["nonfinite_values_zeroed"] == 0 and rec["test"] is not None
