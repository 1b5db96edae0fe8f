"""gnnq-report on real runs: grouping by config minus the seed, mean ± std, leaderboards, bad records.

Here: the real command-line runs and system services; the others are in `tests/unit/test_report.py`.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from gnnq.config.compose import SWEEPS_DIR, compose_config
from gnnq.report.aggregate import group_runs, leaderboards
from gnnq.report.summary import find_records

# a fixture: skip (or fail with GNNQ_REQUIRE_NETNS=1) without namespaces
from tests.e2e.test_emulated import netns_host  # noqa: F401


def _computed(config: dict) -> dict:
    """The parts of a config that change what a run computes."""
    return {k: v for k, v in config.items() if k not in ("logger", "runs_root")} | {
        "dataset": {k: v for k, v in config["dataset"].items() if k not in ("root", "download")}
    }


def test_groups_leaderboard_and_bad_records(tmp_path, report_runs):
    shutil.copytree(report_runs, tmp_path / "runs")
    records, warnings = find_records([tmp_path / "runs"])
    assert len(records) == 4 and not warnings
    # A failed run, a corrupt record and a partial one beside the real runs.
    failed = tmp_path / "runs" / "failed"
    shutil.copytree(records[0][0], failed)
    rec = json.loads((failed / "record.json").read_text())
    (failed / "record.json").write_text(json.dumps({**rec, "status": "failed", "error": "RuntimeError: boom"}))
    (tmp_path / "runs" / "corrupt").mkdir()
    (tmp_path / "runs" / "corrupt" / "record.json").write_text('{"status": "ok", "conf')
    (tmp_path / "runs" / "partial").mkdir()
    (tmp_path / "runs" / "partial" / "record.json").write_text('{"status": "ok"}')
    records, warnings = find_records([tmp_path / "runs"])
    assert len(records) == 5 and len(warnings) == 2
    assert any("corrupt" in w for w in warnings) and any("partial" in w for w in warnings)

    groups = group_runs(records)
    assert len(groups) == 2 and all(sorted(g.seeds) == [0, 1] for g in groups), [g.config for g in groups]
    assert sorted("model=sage" in g.overrides for g in groups) == [False, True]
    for g in groups:
        name = "sage" if "model=sage" in g.overrides else "gcn"
        mine = [r for d, r in records if r["status"] == "ok" and r["config"]["model"]["name"] == name]
        assert len(mine) == 2 and all(r["status"] == "ok" for _, r in g.runs)
        for metric in ("test", "best_val", "epoch_time_s", "comm_bytes_per_epoch"):
            values = [r[metric] for r in mine]
            assert g.stats[metric].mean == pytest.approx(statistics.mean(values))
            assert g.stats[metric].std == pytest.approx(statistics.stdev(values))
        # the overrides plus a seed rebuild every run of the group
        for _, r in g.runs:
            rebuilt = compose_config([*g.overrides, f"trainer.seed={r['config']['trainer']['seed']}"])
            assert _computed(OmegaConf.to_container(rebuilt, resolve=True)) == _computed(r["config"])

    (board,) = leaderboards(groups, "throughput", tolerance=1.0)  # everything eligible
    # ranked by wall-clock throughput (overheads included), fastest first
    assert [g.stats["throughput"].mean for g in board.ranked] == sorted(
        (g.stats["throughput"].mean for g in groups), reverse=True
    )
    (board,) = leaderboards(groups, "throughput", tolerance=0.0)
    assert board.ranked[0].stats["test"].mean == max(g.stats["test"].mean for g in groups)
    assert all(g.stats["test"].mean < board.best_test for g in board.others)
    (board,) = leaderboards(groups, "time", tolerance=1.0)  # target below anything: reached at the first evaluation
    assert all(g.time_to_target.mean is not None for g in board.ranked) and not board.others

    report = Path(sys.executable).parent / "gnnq-report"
    out = tmp_path / "report"
    res = subprocess.run(
        [str(report), str(tmp_path / "runs"), "--out", str(out), "--plots"], capture_output=True, text=True
    )
    assert res.returncode == 0, res.stderr
    assert "corrupt" in res.stderr and "partial" in res.stderr and "RuntimeError: boom" in res.stdout
    assert "Leaderboard: synthetic" in res.stdout and "± " in res.stdout
    assert (out / "report.md").read_text().strip() == res.stdout.strip()
    _check_csvs_against_records(out, [r for _, r in records if r["status"] == "ok"])
    tex = (out / "leaderboard-synthetic.tex").read_text()
    assert "\\toprule" in tex and "\\midrule" in tex and "\\bottomrule" in tex
    # bold only where the report does not call the lead noise: at most one cell per column, each checked in
    # tests/unit/test_report_frictions.py; the wide columns go to the details table
    details = (out / "leaderboard-synthetic-details.tex").read_text()
    assert (
        "\\toprule" in details and "epochs/s" in details and "epochs/s" not in tex.split("\\toprule")[1].splitlines()[1]
    )
    for stem in ("accuracy_vs_throughput", "bytes_per_epoch", "curves"):
        assert (out / f"{stem}-synthetic.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert (out / f"{stem}-synthetic.svg").read_text().lstrip().startswith("<?xml")
    no_out = subprocess.run([str(report), str(tmp_path / "runs"), "--plots"], capture_output=True, text=True)
    assert no_out.returncode == 2 and "need --out" in no_out.stderr
    none = subprocess.run(
        [str(report), str(tmp_path / "runs"), "--where", "dataset=cora"], capture_output=True, text=True
    )
    assert (
        none.returncode == 2
        and "'dataset=cora' matched none of the 5 runs; dataset is one of: synthetic" in none.stderr
    )
    bad = subprocess.run(
        [str(report), str(tmp_path / "runs"), "--criterion", "fastest"], capture_output=True, text=True
    )
    assert bad.returncode == 2 and "fastest" in bad.stderr and "throughput" in bad.stderr


def _csv(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _by_model(records: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for r in records:
        out.setdefault(r["config"]["model"]["name"], []).append(r)
    return out


def _model_of(config: str) -> str:
    return "sage" if "model=sage" in config else "gcn"


def _check_csvs_against_records(out: Path, records: list[dict]) -> None:
    """Every statistic in groups.csv and the leaderboard CSV is a plain number equal to the one computed from the
    records."""
    runs = _by_model(records)
    groups = _csv(out / "groups.csv")
    assert len(groups) == 2 and list(groups[0])[:5] == ["dataset", "method", "config", "seeds", "runs"]
    for row in groups:
        mine = runs[_model_of(row["config"])]
        assert row["dataset"] == "synthetic" and int(row["runs"]) == len(mine) == 2
        assert sorted(int(s) for s in row["seeds"].split(",")) == sorted(r["config"]["trainer"]["seed"] for r in mine)
        for metric in ("test", "best_val", "epoch_time_s", "comm_time_s", "comm_bytes_per_epoch"):
            values = [r[metric] for r in mine]
            assert float(row[f"{metric}_mean"]) == pytest.approx(statistics.mean(values), rel=1e-12), metric
            assert float(row[f"{metric}_std"]) == pytest.approx(statistics.stdev(values), rel=1e-12, abs=1e-15), metric
        overheads = [r["summary"]["overhead_time_s"] for r in mine]
        assert float(row["overhead_time_s_mean"]) == pytest.approx(statistics.mean(overheads), rel=1e-12, abs=1e-15)
        assert row["throughput_measured"] == "True" and row["hardware"] and row["date"] == mine[0]["finished_at"][:10]
    board = _csv(out / "leaderboard-synthetic.csv")
    assert [list(board[0])[:5], len(board)] == [["rank", "method", "config", "runs", "seeds"], 2]
    for row in board:
        mine = runs[_model_of(row["config"])]
        epoch = statistics.mean(r["epoch_time_s"] for r in mine)
        assert float(row["test_mean"]) == pytest.approx(statistics.mean(r["test"] for r in mine), rel=1e-12)
        assert float(row["best_val_mean"]) == pytest.approx(statistics.mean(r["best_val"] for r in mine), rel=1e-12)
        assert float(row["epoch_time_s_mean"]) == pytest.approx(epoch, rel=1e-12)
        # wall-clock throughput: epochs over epoch times plus overheads, as each record's summary has it
        wall = [r["summary"]["throughput_epochs_per_s"] for r in mine]
        assert float(row["epochs_per_s"]) == pytest.approx(statistics.mean(wall), rel=1e-12)
        assert int(row["runs"]) == 2 and sorted(row["seeds"].split(",")) == ["0", "1"]
        assert row["command"].startswith("gnnq ") and row["method"] in (
            "Vanilla model=sage",
            "Vanilla",
            "Vanilla model=gcn",
        )
        # time to target is shown under every criterion: blank only where a seed never reached the target
        assert row["time_to_target_s_mean"] == "" or float(row["time_to_target_s_mean"]) > 0
    ranked = [row for row in board if row["rank"]]
    assert [int(row["rank"]) for row in ranked] == list(range(1, len(ranked) + 1))


def test_report_tables_logged_to_wandb_offline(tmp_path, report_runs):
    report = Path(sys.executable).parent / "gnnq-report"
    spec = SWEEPS_DIR / "adaqp_ablation.table.yaml"
    res = subprocess.run(
        [
            str(report),
            str(report_runs),
            "--out",
            str(tmp_path),
            "--wandb",
            "offline",
            "--table",
            str(spec),
            "--where",
            "model.name=gcn",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "WANDB_SILENT": "true"},
    )
    assert res.returncode == 0, res.stderr
    (run,) = (tmp_path / "wandb").glob("offline-run-*")
    tables = {p.parent.name + "/" + p.name.split("_")[0]: json.loads(p.read_text()) for p in run.rglob("*.table.json")}
    gcn = [r for _, r in find_records([report_runs])[0] if r["config"]["model"]["name"] == "gcn"]
    board = tables["leaderboard/synthetic"]
    assert (
        board["columns"][:4] == ["rank", "method", "config", "runs"] and len(board["data"]) == 1
    )  # GCN only (--where)
    (row,) = [dict(zip(board["columns"], line)) for line in board["data"]]
    assert row["rank"] == 1 and row["runs"] == 2 and row["seeds"] == "0,1"  # numbers, not their text; seeds: the list
    assert row["test_mean"] == pytest.approx(statistics.mean(r["test"] for r in gcn), rel=1e-12)
    assert row["test_std"] == pytest.approx(statistics.stdev(r["test"] for r in gcn), rel=1e-12, abs=1e-15)
    ttt = row["time_to_target_s_mean"]
    assert ttt is None or (isinstance(ttt, float) and ttt > 0)  # a number, or missing as null, never "-"
    (groups,) = tables["table/configurations"]["data"]
    groups = dict(zip(tables["table/configurations"]["columns"], groups))
    assert groups["comm_bytes_per_epoch_mean"] == pytest.approx(statistics.mean(r["comm_bytes_per_epoch"] for r in gcn))
    adaqp = tables["table/adaqp"]
    assert [row[0] for row in adaqp["data"]] == ["Vanilla", "AdaQP-q", "AdaQP-p", "AdaQP"]
    assert adaqp["columns"][1:4] == ["epoch ms mean", "epoch ms std", "epoch ms n"]
    vanilla = adaqp["data"][0]
    assert (
        vanilla[1] == pytest.approx(1e3 * statistics.mean(r["epoch_time_s"] for r in gcn), rel=1e-12)
        and vanilla[3] == 2
    )
    assert all(row[1] is None and row[3] == 0 for row in adaqp["data"][1:])  # no adaptive or overlap runs here
    # The report's own run: in the sweep's W&B group, its settings as config, the runs it was built from linked.
    sources = tables["table/sources"]
    gcn_dirs = [str(d) for d, r in find_records([report_runs])[0] if r["config"]["model"]["name"] == "gcn"]
    assert [dict(zip(sources["columns"], r))["run_dir"] for r in sources["data"]] == gcn_dirs
    (group,) = {r["config"]["logger"]["group"] for r in gcn}
    stored = next(run.glob("run-*.wandb")).read_bytes()  # offline: the run's group and config are records in this file
    assert (
        group.encode() in stored and b"source_runs" in stored and b"model.name=gcn" in stored and b"criterion" in stored
    )
    assert all(d.encode() in stored for d in gcn_dirs)


def test_multirun_points_share_a_wandb_group(report_runs):
    from gnnq.track.wandb_logger import wandb_group

    records = [r for _, r in find_records([report_runs])[0]]
    groups = {r["config"]["logger"]["group"] for r in records}
    assert len(records) == 4 and len(groups) == 1 and next(iter(groups)).startswith("sweep-")
    cfg = OmegaConf.create(records[0]["config"])
    assert wandb_group(cfg) == next(iter(groups))
    cfg.logger.group = None
    assert wandb_group(cfg) == "synthetic-gcn-sync-fp32" or wandb_group(cfg) == "synthetic-sage-sync-fp32"


@pytest.mark.machine_wide
@pytest.mark.usefixtures("netns_host")
def test_speedup_plots_vs_bandwidth_and_hosts(tmp_path):
    """Real runs on emulated hosts: Vanilla and uniform 2-bit at 1 and 10 Gbit/s on 2 hosts, and at 1 Gbit/s on 3."""
    from gnnq.report.labels import method_labels
    from gnnq.report.plots import SPEEDUP_AXES, speedup_lines
    from tests.cli_helpers import run_gnnq

    small = [
        "-m",
        "logger=none",
        "dataset.num_nodes=400",
        "model.hidden=16",
        "trainer.epochs=2",
        "trainer.eval_every=1",
        "cluster=emulated",
        "cluster.nproc=1",
        "experiment=adaqp_vanilla,adaqp_uniform2",
    ]
    for name, extra in (
        ("bandwidth", ["cluster.hosts=2", "cluster.link=1gbit,10gbit"]),
        ("hosts", ["cluster.hosts=3"]),
    ):
        res = run_gnnq([*small, *extra], tmp_path / "runs" / name, tmp_path / "data", timeout=600)
        assert res.returncode == 0, res.stderr[-2000:]
    records, _ = find_records([tmp_path / "runs"])
    assert len(records) == 6 and all(r["status"] == "ok" for _, r in records)

    def epoch(quantizer: str, link: str, hosts: int) -> float:
        (t,) = [
            r["epoch_time_s"]
            for _, r in records
            if r["config"]["quantizer"]["name"] == quantizer
            and r["config"]["cluster"]["link"] == link
            and r["config"]["cluster"]["hosts"] == hosts
        ]
        return t

    def speedup(link: str, hosts: int) -> float:
        return epoch("fp32", link, hosts) / epoch("uniform", link, hosts)

    bandwidth, hosts = SPEEDUP_AXES
    groups = group_runs(records)
    for g, label in zip(groups, method_labels(groups)):
        g.label = label
    # one line per configuration, named by its method (a fixed width with its bits); the axis's own setting is not
    # part of the name
    u2 = "AdaQP-p + uniform 2-bit"
    # The 3-host runs (1 Gbit/s only) make no line against bandwidth, nor the 10 Gbit/s runs (2 hosts only) against
    # hosts.
    assert speedup_lines(groups, bandwidth) == {
        u2: [(1.0, pytest.approx(speedup("1gbit", 2))), (10.0, pytest.approx(speedup("10gbit", 2)))]
    }
    assert speedup_lines(groups, hosts) == {
        u2: [(2.0, pytest.approx(speedup("1gbit", 2))), (3.0, pytest.approx(speedup("1gbit", 3)))]
    }
    # Without Vanilla at 10 Gbit/s there is no speedup there: one bandwidth left, no bandwidth line.
    cfg = [g.runs[0][1]["config"] for g in groups]
    no_base = [
        g for g, c in zip(groups, cfg) if not (c["cluster"]["link"] == "10gbit" and c["quantizer"]["name"] == "fp32")
    ]
    assert speedup_lines(no_base, bandwidth) == {} and list(speedup_lines(no_base, hosts)) == [u2]

    report = Path(sys.executable).parent / "gnnq-report"
    out = tmp_path / "report"
    res = subprocess.run(
        [str(report), str(tmp_path / "runs"), "--out", str(out), "--plots"], capture_output=True, text=True
    )
    assert res.returncode == 0, res.stderr
    for stem in ("speedup_vs_bandwidth-synthetic", "speedup_vs_hosts-synthetic"):
        assert (out / f"{stem}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert (out / f"{stem}.svg").read_text().lstrip().startswith("<?xml")
        assert f"{stem}.png" in res.stdout
    # Runs at one setting only: no speedup plots.
    one = tmp_path / "one"
    res = subprocess.run(
        [str(report), str(tmp_path / "runs" / "hosts"), "--out", str(one), "--plots"], capture_output=True, text=True
    )
    assert res.returncode == 0, res.stderr
    assert (one / "bytes_per_epoch-synthetic.png").is_file() and not list(one.glob("speedup_vs_*"))
