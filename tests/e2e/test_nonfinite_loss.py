"""A training loss that becomes NaN or inf stops the run (trainer.nonfinite_loss=error), naming the epoch."""

from __future__ import annotations

from tests.cli_helpers import read_metrics, read_record, run_dirs, run_gnnq

# Adam steps of 1e30 without normalization overflow the logits in the second epoch.
DIVERGING = [
    "logger=none",
    "dataset.num_nodes=600",
    "model.hidden=16",
    "model.norm=none",
    "trainer.lr=1e30",
    "trainer.epochs=4",
]


def test_a_nonfinite_loss_fails_the_run_naming_the_epoch(tmp_path):
    res = run_gnnq(DIVERGING, tmp_path / "runs", tmp_path / "data")
    assert res.returncode != 0
    lines = [line for line in res.stderr.splitlines() if line.startswith("gnnq: error:")]
    assert len(lines) == 1 and "the training loss is nan at epoch 2" in lines[0], res.stderr[-2000:]
    (run_dir,) = run_dirs(tmp_path / "runs")
    record = read_record(run_dir)
    assert record["status"] == "failed" and "at epoch 2" in record["error"]
    assert [r["epoch"] for r in read_metrics(run_dir)] == [1, 2], "the rows up to the failure are kept"


def test_warn_goes_on_and_says_so_every_epoch(tmp_path):
    res = run_gnnq([*DIVERGING, "trainer.nonfinite_loss=warn"], tmp_path / "runs", tmp_path / "data")
    assert res.returncode == 0, res.stderr[-2000:]
    warnings = [line for line in res.stderr.splitlines() if "warning: the training loss is nan" in line]
    assert [w.split(" at epoch ")[1].split()[0] for w in warnings] == ["2", "3", "4"]
    (run_dir,) = run_dirs(tmp_path / "runs")
    assert read_record(run_dir)["status"] == "ok"
