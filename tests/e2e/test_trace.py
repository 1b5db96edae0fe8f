"""A real traced ``gnnq`` run (trainer.trace=true): trace/meta.json and trace/rank<r>.jsonl in its run dir,
as docs/runs.md#traces says, agreeing with its record (real command line, 2 local ranks, PipeGCN's stale
exchange and AdaQP's quantized overlap).

The cases on gloo groups without the command line are in `tests/integration/test_trace.py`.
"""

from __future__ import annotations

import pytest

from gnnq.track.trace_files import read_trace
from tests.cli_helpers import read_metrics, read_record, run_dirs, run_gnnq

EPOCHS = 4
SMALL = [
    "logger=none",
    "dataset=synthetic",
    "dataset.num_nodes=600",
    "dataset.feature_dim=32",
    "model.hidden=16",
    "cluster.nproc=2",
    f"trainer.epochs={EPOCHS}",
    f"trainer.eval_every={EPOCHS}",
    "trainer.trace=true",
]


@pytest.mark.parametrize("experiment", ["pipegcn", "adaqp"])
def test_a_traced_run_writes_its_timeline(tmp_path, experiment):
    res = run_gnnq([f"experiment={experiment}", *SMALL], tmp_path / "runs", tmp_path / "data")
    assert res.returncode == 0, res.stderr
    (run_dir,) = run_dirs(tmp_path / "runs")
    record, rows = read_record(run_dir), read_metrics(run_dir)
    meta, ranks = read_trace(run_dir)
    assert meta["method"]["experiment"] == experiment and meta["world_size"] == record["world_size"] == 2
    assert meta["graph"]["num_nodes"] == 600 and meta["graph"]["features"] == 32
    assert "trace: true" in (run_dir / "config.yaml").read_text()
    for r, lines in ranks.items():
        assert [line["epoch"] for line in lines] == list(range(1, EPOCHS + 1))
        for line, row in zip(lines, rows):
            assert line["epoch_s"] <= row["epoch_time_s"] + 1e-9, "the row holds the slowest rank's epoch"
            assert all(0 <= e["t0"] <= e["t1"] <= line["epoch_s"] + 1e-9 for e in line["events"])
    for i, row in enumerate(rows):
        sent = sum(
            sum(e["send_bytes"])
            for lines in ranks.values()
            for e in lines[i]["events"]
            if e["op"] == "post" and e["category"] == "halo_train"
        )
        assert sent == row["comm_bytes"]
    if experiment == "pipegcn":
        waits = [(line["epoch"], e["msg"]) for line in ranks[0] for e in line["events"] if e["op"] == "wait"]
        assert any(int(msg.split(":")[0]) == epoch - 1 for epoch, msg in waits), "stale: last epoch's messages"
