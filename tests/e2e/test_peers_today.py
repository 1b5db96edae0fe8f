"""PipeQS and Sylvie as published run from the command line on a graph of your own (``dataset=files``), and each
epoch's row says what the strategy chose."""

from __future__ import annotations

import numpy as np
import pytest

from tests.cli_helpers import read_metrics, read_record, run_dirs, run_gnnq


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    rng = np.random.default_rng(0)
    n, classes = 200, 3
    y = rng.integers(0, classes, n)
    src = rng.integers(0, n, 1200)
    dst = np.array([rng.choice(np.flatnonzero(y == y[s])) if rng.random() < 0.8 else rng.integers(0, n) for s in src])
    d = tmp_path_factory.mktemp("mygraph")
    np.savetxt(d / "edges.txt", np.stack([src, dst], 1), fmt="%d")
    np.save(d / "features.npy", (rng.standard_normal((n, 8)) + np.eye(classes)[y].repeat(3, 1)[:, :8]).astype("f4"))
    np.save(d / "labels.npy", y)
    return d


@pytest.mark.parametrize("preset, field", [("pipeqs_published", "messages"), ("sylvie", "base_bits")])
def test_published_preset_runs_on_your_own_graph(graph, tmp_path, preset, field):
    args = [f"experiment={preset}", "dataset=files", f"dataset.path={graph}", "model.hidden=16", "trainer.epochs=4"]
    res = run_gnnq([*args, "logger=none"], tmp_path / "runs", tmp_path / "data")
    assert res.returncode == 0, res.stderr[-3000:]
    (run_dir,) = run_dirs(tmp_path / "runs")
    record, rows = read_record(run_dir), read_metrics(run_dir)
    assert record["status"] == "ok" and record["config"]["parallel"]["name"] == preset.split("_")[0]
    assert len(rows) == 4 and all(field in r for r in rows) and record["comm_bytes_per_epoch"] > 0
    assert record["summary"]["strategy"]
