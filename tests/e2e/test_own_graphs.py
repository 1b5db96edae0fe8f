"""Two different ``dataset=files`` graphs of the same folder name: their run dirs say the graph and the method, and
``gnnq-report`` never ranks them on one leaderboard (each ``files`` graph is keyed by its content fingerprint)."""

from __future__ import annotations

import subprocess
import sys

from tests.cli_helpers import read_record, run_dirs, run_gnnq
from tests.reliability.files_graph import write_files_graph

FAST = ["logger=none", "trainer.epochs=2", "model.hidden=16", "dataset=files"]


def test_two_graphs_of_one_name_never_share_a_leaderboard(tmp_path):
    first, second = tmp_path / "a" / "road", tmp_path / "b" / "road"
    write_files_graph(first, seed=0)
    write_files_graph(second, seed=1)
    runs, data = tmp_path / "runs", tmp_path / "data"
    for graph, extra in ((first, []), (second, ["experiment=pipegcn"])):
        res = run_gnnq([*FAST, f"dataset.path={graph}", *extra], runs, data)
        assert res.returncode == 0, res.stdout + res.stderr
        assert "dataset road: 40 nodes" in res.stdout
    dirs = run_dirs(runs)
    assert sorted(d.name.split("_", 1)[1] for d in dirs) == ["road_gcn", "road_pipegcn"]
    fingerprints = {read_record(d)["dataset_fingerprint"] for d in dirs}
    assert len(fingerprints) == 2
    out = tmp_path / "report"
    report = [sys.executable, "-c", "from gnnq.cli import report_main; report_main()"]
    res = subprocess.run([*report, str(runs), "--out", str(out)], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    boards = [line for line in res.stdout.splitlines() if line.startswith("## Leaderboard: ")]
    assert len(boards) == 2, res.stdout
    assert {b.split()[2].rstrip(",") for b in boards} == {f"road@{f[:8]}" for f in fingerprints}
    assert sorted(p.name for p in out.glob("leaderboard-*.csv")) == sorted(
        f"leaderboard-road@{f[:8]}.csv" for f in fingerprints
    )
