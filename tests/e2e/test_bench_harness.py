"""gnnq-bench: real small runs side by side, interleaved and repeated; its table from their records.

Here: the real command-line runs and system services; the others are in `tests/unit/test_bench_harness.py`.
"""

from __future__ import annotations

import csv
import json
import re
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from gnnq.bench.compare import speedup_bounds
from tests.cli_helpers import gnnq_env

# adaptive's keys cannot be given for the sweep's adaptive points alone on the command line: the sweep file's
# sweeps/adaqp_ablation/quantizer/adaptive.yaml sets assign_cycle=5, so 6 epochs give one reassignment
TINY = ["dataset=synthetic", "dataset.num_nodes=400", "cluster.nproc=2", "trainer.epochs=6", "trainer.eval_every=1"]
AXES = ["experiment=adaqp_vanilla,adaqp_q", "model.hidden=8,16"]


def bench(args: list[str], tmp_path: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "gnnq.bench.harness", *args]
    return subprocess.run(
        cmd, capture_output=True, text=True, env=gnnq_env(tmp_path / "unused-runs", tmp_path / "data", env), timeout=600
    )


@pytest.fixture(scope="module")
def small_bench(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bench")
    out = tmp / "out"
    res = bench(["adaqp_ablation", *AXES, *TINY, "--repeats", "2", "--out", str(out), "--plot-x", "model.hidden"], tmp)
    return tmp, out, res


def test_table_from_real_runs(small_bench):
    tmp, out, res = small_bench
    assert res.returncode == 0, res.stderr[-3000:]
    result = json.loads((out / "results.json").read_text())
    rows = result["rows"]
    assert [(r["method"], r["setting"]["model.hidden"]) for r in rows] == [
        ("adaqp_vanilla", "8"),
        ("adaqp_q", "8"),
        ("adaqp_vanilla", "16"),
        ("adaqp_q", "16"),
    ]
    # Every (point, repeat) ran once, as a real gnnq run with its own record, seeded by repeat.
    records = {}
    for rec_path in (out / "runs").rglob("record.json"):
        rep, point = rec_path.relative_to(out / "runs").parts[:2]
        rec = json.loads(rec_path.read_text())
        assert rec["status"] == "ok"
        assert rec["config"]["trainer"]["seed"] == int(rep.removeprefix("rep"))
        records[(int(point.removeprefix("point")), int(rep.removeprefix("rep")))] = rec
    assert sorted(records) == [(p, r) for p in range(4) for r in range(2)]
    for row in rows:
        mine = [records[(row["point"], r)] for r in range(2)]
        base_point = next(r["point"] for r in rows if r["method"] == "adaqp_vanilla" and r["setting"] == row["setting"])
        base = [records[(base_point, r)] for r in range(2)]
        assert row["runs"] == 2 and row["failed"] == []
        assert row["epoch_time_s"] == pytest.approx(statistics.median(r["epoch_time_s"] for r in mine))
        assert row["epoch_time_min_s"] == pytest.approx(min(r["epoch_time_s"] for r in mine))
        assert row["comm_bytes_per_epoch"] == pytest.approx(statistics.median(r["comm_bytes_per_epoch"] for r in mine))
        assert row["test_mean"] == pytest.approx(statistics.fmean(r["test"] for r in mine))
        paired = [b["epoch_time_s"] / m["epoch_time_s"] for b, m in zip(base, mine)]
        assert row["speedup"] == pytest.approx(statistics.median(paired))
        assert row["target_val"] == pytest.approx(statistics.median(b["best_val"] for b in base) - 0.01)
        assert row["comm_share"] == pytest.approx(statistics.median(r["comm_time_s"] / r["epoch_time_s"] for r in mine))
        if row["method"] == "adaqp_vanilla":
            assert row["speedup"] == pytest.approx(1.0) and row["bytes_vs_baseline"] == pytest.approx(1.0)
            assert row["overhead_time_s"] == 0 and row["codec_time_s"] == 0
        else:
            assert row["bytes_vs_baseline"] < 0.5  # adaptive widths of at most 8 bits
            assert (
                row["overhead_time_s"] > 0 and row["codec_time_s"] > 0
            )  # AdaQP's profile, α exchange, reassignment; its codec
        # Overheads and wall-clock throughput, from the records' summaries.
        assert row["overhead_time_s"] == pytest.approx(statistics.median(r["summary"]["overhead_time_s"] for r in mine))
        wall = [
            m["summary"]["throughput_epochs_per_s"] / b["summary"]["throughput_epochs_per_s"]
            for b, m in zip(base, mine)
        ]
        assert row["wall_speedup"] == pytest.approx(statistics.median(wall))
        # The bounds, from the baseline's medians and this point's byte ratio and codec time.
        t = statistics.median(b["epoch_time_s"] for b in base)
        m_halo = statistics.median(b["summary"]["halo_comm_time_s"] for b in base)
        assert 0 < m_halo < statistics.median(b["comm_time_s"] for b in base), (
            "the all-reduce is exposed too, but not halo"
        )
        k = statistics.median(r["summary"]["codec_time_s"] for r in mine)
        rest, ratio = t - m_halo, row["bytes_vs_baseline"]
        assert row["bound_no_overlap"] == pytest.approx(t / (rest + k + ratio * m_halo))
        assert row["bound_overlap"] == pytest.approx(t / max(rest + k, ratio * m_halo))
        assert row["bound_overlap"] >= row["bound_no_overlap"]
        assert row["bound_fraction"] == pytest.approx(row["speedup"] / row["bound_overlap"])
    # results.json alone recomputes the bounds (its runs keep the summary values they need)
    runs = {}
    for run in result["runs"]:
        if run["status"] == "ok":
            runs.setdefault(run["point"], {})[run["repeat"]] = run
    for row in rows:
        base_point = next(r["point"] for r in rows if r["method"] == row["baseline"] and r["setting"] == row["setting"])
        recomputed = speedup_bounds(runs[base_point], runs[row["point"]], row["bytes_vs_baseline"])
        assert recomputed == pytest.approx((row["bound_no_overlap"], row["bound_overlap"]))
    md = (out / "README.md").read_text()
    assert "gnnq-bench adaqp_ablation" in md and md.count("| adaqp_q ") == 2
    with open(out / "results.csv") as f:
        table = list(csv.DictReader(f))
    assert len(table) == 4
    for line, row in zip(
        table, rows
    ):  # the CSV's cells are the numbers of results.json, which the records checked above
        mine = [records[(row["point"], r)] for r in range(2)]
        assert int(line["point"]) == row["point"] and int(line["runs"]) == 2
        assert line["setting"] == f"model.hidden={row['setting']['model.hidden']}"
        assert float(line["epoch_time_s"]) == row["epoch_time_s"] == statistics.median(r["epoch_time_s"] for r in mine)
        assert float(line["test_mean"]) == row["test_mean"] and float(line["test_std"]) == row["test_std"]
        assert float(line["comm_bytes_per_epoch"]) == statistics.median(r["comm_bytes_per_epoch"] for r in mine)
    assert (out / "speedup_vs_model_hidden.png").stat().st_size > 0 and (out / "speedup_vs_model_hidden.svg").is_file()
    assert (out / "speedup_vs_bound.png").stat().st_size > 0
    assert "Evaluation every 1 epoch(s)" in md
    # per point: ranks, hosts, evaluation interval, and overrides that include the sweep file's own settings
    assert md.count("2 ranks on 1 host(s), evaluation every 1 epoch(s)") == 4
    adaptive = [line for line in md.splitlines() if line.startswith("- adaqp_q ")]
    assert len(adaptive) == 2 and all("quantizer.assign_cycle=5" in line for line in adaptive)  # from the sweep file
    assert "8 runs" in res.stdout and "run 8/8" in res.stdout


def test_rerun_skips_finished_runs_and_reruns_failed_ones(small_bench):
    tmp, out, res = small_bench
    assert res.returncode == 0
    # Mark one run failed, as a crashed run leaves it: the next invocation reruns only that one.
    rec_path = next((out / "runs" / "rep1" / "point02").rglob("record.json"))
    rec = json.loads(rec_path.read_text())
    rec_path.write_text(json.dumps({**rec, "status": "failed", "error": "killed"}))
    again = bench(["adaqp_ablation", *AXES, *TINY, "--repeats", "2", "--out", str(out)], tmp)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "7 of 8 runs already done" in again.stdout and "run 1/1 " in again.stdout
    assert (out / "runs" / "rep1" / "point02.failed-1").is_dir()
    assert json.loads(next((out / "runs" / "rep1" / "point02").rglob("record.json")).read_text())["status"] == "ok"


def test_failed_runs_are_listed_and_fail_the_command(tmp_path):
    out = tmp_path / "out"
    env = {"GNNQ_FAULT_INJECT": "rank=1,epoch=2"}
    res = bench(
        ["adaqp_ablation", "experiment=adaqp_vanilla,adaqp_q", *TINY, "--repeats", "1", "--out", str(out)],
        tmp_path,
        env,
    )
    assert res.returncode == 1
    assert "run(s) failed" in res.stderr
    md = (out / "README.md").read_text()
    assert "Failed runs" in md and "rank 1" in md


@pytest.mark.parametrize(
    "args, message",
    [
        (["no_such_sweep"], r"sweep 'no_such_sweep': no such file .*known: .*adaqp_ablation"),
        (
            ["adaqp_ablation", "--baseline", "parallel=sync"],
            r"'parallel' is not an axis of this sweep \(axes: experiment\)",
        ),
        (
            ["adaqp_ablation", "--baseline", "experiment=adaqp_fast"],
            r"experiment takes adaqp_vanilla, adaqp_q, adaqp_p, adaqp",
        ),
        (["adaqp_ablation", "--plot-x", "cluster.link"], r"--plot-x cluster.link: not a setting axis"),
        (
            ["adaqp_ablation", "--pair", "adaqp=pipegcn"],
            r"--pair adaqp=pipegcn: 'pipegcn' is not a value of experiment",
        ),
        (["adaqp_ablation", "model.hiden=3"], r"model.hiden"),
    ],
)
def test_bad_input_is_named(args, message, tmp_path):
    res = bench([*args, "--out", str(tmp_path / "out")], tmp_path)
    assert res.returncode == 2, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert re.search(message, res.stderr), res.stderr
    assert not (tmp_path / "out").exists()
