"""AdaQP through the real command line: what a run records about its assignments and time model."""

from __future__ import annotations

import pytest
import torch

from gnnq.comm.kernels.torch_codec import row_bytes
from tests.cli_helpers import read_metrics, read_record, run_dirs, run_gnnq

SMALL = [
    "logger=none",
    "dataset.num_nodes=1500",
    "model.hidden=32",
    "trainer.epochs=7",
    "cluster.nproc=3",
    "experiment=adaqp",
    "quantizer.assign_cycle=2",
    "quantizer.group_size=20",
    "quantizer.profile_repeats=1",
]


@pytest.mark.parametrize("solver", ["greedy", "milp"])
def test_adaqp_run_records_time_model_and_assignments(tmp_path, solver):
    res = run_gnnq([*SMALL, f"quantizer.solver={solver}"], tmp_path, tmp_path / "data")
    assert res.returncode == 0, res.stderr
    (run_dir,) = run_dirs(tmp_path)
    record = read_record(run_dir)
    assert record["status"] == "ok"
    adaptive = record["summary"]["adaptive"]
    channels = {(f["src"], f["dst"]) for f in adaptive["time_model"]}
    assert channels <= {(s, d) for s in range(3) for d in range(3) if s != d} and channels
    assert all(f["a_s_per_byte"] >= 0 and f["c_s"] >= 0 and f["r2"] is not None for f in adaptive["time_model"])
    # Reassigned at the start of epochs 3, 5 and 7 (cycles of 2; epoch 1 starts at 8 bits).
    rows = read_metrics(run_dir)
    assigned = [r["epoch"] for r in rows if "assignment" in r]
    assert assigned == [3, 5, 7] == [a["epoch"] for a in adaptive["assignments"]]
    for a in adaptive["assignments"]:
        assert a["solver"] == solver and a["solve_time_s"] >= 0
        assert set(a["bits_histogram"]) == {"2", "4", "8"} and sum(a["bits_histogram"].values()) > 0
    # Before the first assignment every row travels at 8 bits; afterwards each at its assigned width.
    hist = {int(b): n for b, n in adaptive["assignments"][-1]["bits_histogram"].items()}
    assert rows[0]["comm_bytes"] == sum(hist.values()) * row_bytes(32, 8, torch.float16)
    assert rows[-1]["comm_bytes"] == sum(n * row_bytes(32, b, torch.float16) for b, n in hist.items())
    assert record["comm_bytes_per_epoch"] == sum(r["comm_bytes"] for r in rows) // len(rows)
