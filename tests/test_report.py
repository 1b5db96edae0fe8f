"""gnnq-report on real runs: grouping by config minus the seed, mean ± std, leaderboards, bad records."""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from gnnq.config.compose import SWEEPS_DIR, compose_config
from gnnq.report.aggregate import group_runs, leaderboards
from gnnq.report.overrides import config_overrides
from gnnq.report.summary import find_records
from tests.test_emulated import netns_host  # noqa: F401 - a fixture: skip (or fail with GNNQ_REQUIRE_NETNS=1) without namespaces


def _computed(config: dict) -> dict:
    """The parts of a config that change what a run computes."""
    return {k: v for k, v in config.items() if k not in ("logger", "runs_root")} | {
        "dataset": {k: v for k, v in config["dataset"].items() if k not in ("root", "download")}}


@pytest.mark.parametrize("overrides", [
    [], ["dataset=cora", "model=sage"], ["experiment=adaqp", "dataset=citeseer", "quantizer.assign_cycle=7"],
    ["experiment=cora_gcn", "quantizer=uniform", "quantizer.bits=4", "cluster.nproc=4"],
    ["experiment=pipegcn_smoothed", "dataset=cora", "model.hidden=32"], ["experiment=minibatch", "model=sage"],
    ["experiment=minibatch", "parallel.fanouts=[5,-1,3]"], ["experiment=bnsgcn_q", "quantizer.param_dtype=fp32"],
    ["dataset=files", "dataset.path=/tmp/my graph", "trainer.seed=4", "logger.tags=[a,b]"],
])  # fmt: skip
def test_overrides_rebuild_the_config(overrides):
    config = OmegaConf.to_container(compose_config(overrides), resolve=True)
    rebuilt = OmegaConf.to_container(compose_config(config_overrides(config)), resolve=True)
    assert _computed(rebuilt) == _computed(config)
    assert not any(o.startswith(("logger", "runs_root")) for o in config_overrides(config))
    preset = next((o for o in overrides if o.startswith("experiment=")), None)
    if preset in ("experiment=cora_gcn", "experiment=pipegcn_smoothed"):  # shown as the preset, not its expansion
        assert config_overrides(config)[0] == preset and len(config_overrides(config)) == len(overrides), config_overrides(config)


def test_keys_of_another_choice_are_not_shown():
    """An fp32 record carrying an adaptive quantizer's key (older records, sweep-wide overrides) shows none of it."""
    config = OmegaConf.to_container(compose_config(["dataset=cora"]), resolve=True)
    config["quantizer"]["assign_cycle"] = 5
    assert config_overrides(config) == ["dataset=cora"]


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
    assert [g.stats["throughput"].mean for g in board.ranked] == sorted((g.stats["throughput"].mean for g in groups), reverse=True)
    (board,) = leaderboards(groups, "throughput", tolerance=0.0)
    assert board.ranked[0].stats["test"].mean == max(g.stats["test"].mean for g in groups)
    assert all(g.stats["test"].mean < board.best_test for g in board.others)
    (board,) = leaderboards(groups, "time", tolerance=1.0)  # target below anything: reached at the first evaluation
    assert all(g.time_to_target.mean is not None for g in board.ranked) and not board.others

    report = Path(sys.executable).parent / "gnnq-report"
    out = tmp_path / "report"
    res = subprocess.run([str(report), str(tmp_path / "runs"), "--out", str(out), "--plots"], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert "corrupt" in res.stderr and "partial" in res.stderr and "RuntimeError: boom" in res.stdout
    assert "Leaderboard: synthetic" in res.stdout and "± " in res.stdout
    assert (out / "report.md").read_text().strip() == res.stdout.strip()
    _check_csvs_against_records(out, [r for _, r in records if r["status"] == "ok"])
    tex = (out / "leaderboard-synthetic.tex").read_text()
    assert "\\toprule" in tex and "\\midrule" in tex and "\\bottomrule" in tex and tex.count("\\textbf{") >= 2
    for stem in ("accuracy_vs_throughput", "bytes_per_epoch", "curves"):
        assert (out / f"{stem}-synthetic.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert (out / f"{stem}-synthetic.svg").read_text().lstrip().startswith("<?xml")
    no_out = subprocess.run([str(report), str(tmp_path / "runs"), "--plots"], capture_output=True, text=True)
    assert no_out.returncode == 2 and "need --out" in no_out.stderr
    none = subprocess.run([str(report), str(tmp_path / "runs"), "--where", "dataset=cora"], capture_output=True, text=True)
    assert none.returncode == 2 and "'dataset=cora' matched none of the 5 runs; dataset is one of: synthetic" in none.stderr
    bad = subprocess.run([str(report), str(tmp_path / "runs"), "--criterion", "fastest"], capture_output=True, text=True)
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
    """Every statistic in groups.csv and the leaderboard CSV is a plain number equal to the one computed from the records."""
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
        assert row["command"].startswith("gnnq ") and row["method"] in ("Vanilla model=sage", "Vanilla", "Vanilla model=gcn")
        assert row["time_to_target_s_mean"] == row["time_to_target_s_std"] == ""  # ranked by throughput: no target
    ranked = [row for row in board if row["rank"]]
    assert [int(row["rank"]) for row in ranked] == list(range(1, len(ranked) + 1))


def test_pareto_front():
    from gnnq.report.plots import pareto_front

    points = [(1.0, 0.80), (2.0, 0.79), (0.5, 0.81), (1.5, 0.78), (2.0, 0.70), (0.4, 0.81)]
    assert pareto_front(points) == [2, 0, 1]  # (1.5, .78) and (2.0, .70) are beaten; (0.4, .81) by (0.5, .81)


def _group(overrides: list[str], parallel: str, quantizer: str, **quantizer_keys):
    from gnnq.report.aggregate import Group

    config = {"parallel": {"name": parallel, "momentum": 0.95 if "parallel.momentum=0.95" in overrides else 0.0,
                           "warmup": "zeros" if "parallel.warmup=zeros" in overrides else "sync"},
              "quantizer": {"name": quantizer, **quantizer_keys}, "trainer": {"seed": 0}}  # fmt: skip
    return Group("cora", overrides, [(Path("run"), {"status": "ok", "config": config})])


def test_labels_name_methods_by_spec_preset_or_strategy():
    from gnnq.report.labels import method_labels
    from gnnq.report.tables import load_spec

    stale = _group(["dataset=cora", "parallel=stale"], "stale", "fp32")
    smoothed = _group(["dataset=cora", "parallel=stale", "parallel.momentum=0.95"], "stale", "fp32")
    vanilla = _group(["dataset=cora"], "sync", "fp32")
    u4 = _group(["experiment=cora_gcn", "quantizer=uniform", "quantizer.bits=4"], "sync", "uniform", bits=4)
    u2 = _group(["experiment=cora_gcn", "quantizer=uniform", "quantizer.bits=2"], "sync", "uniform", bits=2)
    pipeqs = _group(["experiment=pipeqs", "dataset=cora"], "stale", "uniform", bits=8)
    # without a spec: the method its strategy and quantizer make, or its method preset; only what sets same-named rows apart
    assert method_labels([stale, smoothed, vanilla, u4, u2, pipeqs]) == [
        "PipeGCN", "PipeGCN parallel.momentum=0.95", "Vanilla", "uniform quantizer.bits=4", "uniform quantizer.bits=2", "pipeqs"]
    # with the peers table spec: its row labels
    spec = load_spec(SWEEPS_DIR / "peers.table.yaml")
    published = _group(["dataset=cora", "parallel=stale", "parallel.warmup=zeros"], "stale", "fp32")
    assert method_labels([published, stale, smoothed, vanilla, pipeqs], [spec]) == [
        "PipeGCN", "PipeGCN, sync warm-up (gnnq)", "PipeGCN, smoothed", "Vanilla", "PipeQS (stale + 8-bit)"]
    bits = load_spec(SWEEPS_DIR / "bitwidths.table.yaml")
    assert method_labels([u4, u2, vanilla], [bits]) == ["uniform 4-bit", "uniform 2-bit", "fp32"]


def test_report_tables_logged_to_wandb_offline(tmp_path, report_runs):
    report = Path(sys.executable).parent / "gnnq-report"
    spec = SWEEPS_DIR / "adaqp_ablation.table.yaml"
    res = subprocess.run([str(report), str(report_runs), "--out", str(tmp_path), "--wandb", "offline", "--table", str(spec),
                          "--where", "model.name=gcn"],
                         capture_output=True, text=True, env={**os.environ, "WANDB_SILENT": "true"})  # fmt: skip
    assert res.returncode == 0, res.stderr
    (run,) = (tmp_path / "wandb").glob("offline-run-*")
    tables = {p.parent.name + "/" + p.name.split("_")[0]: json.loads(p.read_text()) for p in run.rglob("*.table.json")}
    gcn = [r for _, r in find_records([report_runs])[0] if r["config"]["model"]["name"] == "gcn"]
    board = tables["leaderboard/synthetic"]
    assert board["columns"][:4] == ["rank", "method", "config", "runs"] and len(board["data"]) == 1  # GCN only (--where)
    (row,) = [dict(zip(board["columns"], line)) for line in board["data"]]
    assert row["rank"] == 1 and row["runs"] == 2 and row["seeds"] == "0,1"  # numbers, not their text; seeds: the list
    assert row["test_mean"] == pytest.approx(statistics.mean(r["test"] for r in gcn), rel=1e-12)
    assert row["test_std"] == pytest.approx(statistics.stdev(r["test"] for r in gcn), rel=1e-12, abs=1e-15)
    assert row["time_to_target_s_mean"] is None  # missing: null, not "-"
    (groups,) = tables["table/configurations"]["data"]
    groups = dict(zip(tables["table/configurations"]["columns"], groups))
    assert groups["comm_bytes_per_epoch_mean"] == pytest.approx(statistics.mean(r["comm_bytes_per_epoch"] for r in gcn))
    adaqp = tables["table/adaqp"]
    assert [row[0] for row in adaqp["data"]] == ["Vanilla", "AdaQP-q", "AdaQP-p", "AdaQP"]
    assert adaqp["columns"][1:4] == ["epoch ms mean", "epoch ms std", "epoch ms n"]
    vanilla = adaqp["data"][0]
    assert vanilla[1] == pytest.approx(1e3 * statistics.mean(r["epoch_time_s"] for r in gcn), rel=1e-12) and vanilla[3] == 2
    assert all(row[1] is None and row[3] == 0 for row in adaqp["data"][1:])  # no adaptive or overlap runs here
    # The report's own run: in the sweep's W&B group, its settings as config, the runs it was built from linked.
    sources = tables["table/sources"]
    gcn_dirs = [str(d) for d, r in find_records([report_runs])[0] if r["config"]["model"]["name"] == "gcn"]
    assert [dict(zip(sources["columns"], r))["run_dir"] for r in sources["data"]] == gcn_dirs
    (group,) = {r["config"]["logger"]["group"] for r in gcn}
    stored = next(run.glob("run-*.wandb")).read_bytes()  # offline: the run's group and config are records in this file
    assert group.encode() in stored and b"source_runs" in stored and b"model.name=gcn" in stored and b"criterion" in stored
    assert all(d.encode() in stored for d in gcn_dirs)


def test_strings_that_look_like_other_types_are_quoted():
    from gnnq.report.overrides import format_value

    assert [format_value(v) for v in ["cora", "8", "true", "null", "1e-3", "/a,b"]] == \
        ["cora", "'8'", "'true'", "'null'", "'1e-3'", "'/a,b'"]  # fmt: skip
    config = OmegaConf.to_container(compose_config(["dataset=files", "dataset.path='8'", "logger.project='true'"]), resolve=True)
    rebuilt = OmegaConf.to_container(compose_config(config_overrides(config)), resolve=True)
    assert rebuilt["dataset"]["path"] == "8"


def test_where_reads_values_as_hydra_does():
    from gnnq.report.summary import select

    recs = [(Path("a"), {"config": {"trainer": {"lr": 0.001, "seed": 0}, "dataset": {"name": "cora"}}}),
            (Path("b"), {"config": {"trainer": {"lr": 0.01, "seed": 1}, "dataset": {"name": "citeseer"}}})]  # fmt: skip
    assert [d.name for d, _ in select(recs, "trainer.lr=1e-3")] == ["a"]
    assert [d.name for d, _ in select(recs, "trainer.seed=1")] == ["b"]
    assert [d.name for d, _ in select(recs, "dataset.name=cora")] == ["a"]
    assert [d.name for d, _ in select(recs, "dataset=citeseer")] == ["b"]  # a group stands for its choice's name
    with pytest.raises(ValueError, match=re.escape("--where 'dataset=pubmed' matched none of the 2 runs; dataset is one of: citeseer, cora")):
        select(recs, "dataset=pubmed")
    with pytest.raises(ValueError, match=re.escape("trainer.lr is one of: 0.001, 0.01")):
        select(recs, "trainer.lr=0.5")
    for bad, needle in [("trainer.lrr=1", "no run's config has the key"), ("x=[1,2", "not readable"), ("novalue", "KEY=VALUE")]:
        with pytest.raises(ValueError, match=re.escape(needle)):
            select(recs, bad)


def test_time_to_target_needs_every_seed(tmp_path):
    """A configuration whose second seed never reaches the target is not ranked by time."""
    from gnnq.report.aggregate import METRICS, Group, Stat, leaderboards

    def run(name, vals):
        d = tmp_path / name
        d.mkdir()
        (d / "metrics.jsonl").write_text("".join(json.dumps({"epoch": i + 1, "epoch_time_s": 1.0, "val": v}) + "\n" for i, v in enumerate(vals)))
        return d, {"config": {"trainer": {"seed": 0}}}

    fast = Group("d", ["parallel=stale"], [run("f0", [0.5, 0.8]), run("f1", [0.8, 0.8])])
    flaky = Group("d", ["parallel=sampling"], [run("s0", [0.8, 0.8]), run("s1", [0.5, 0.6])])
    slow = Group("d", ["parallel=overlap"], [run("o0", [0.5, 0.55]), run("o1", [0.5, 0.6])])
    for g, best, tput in ((fast, 0.8, 2.0), (flaky, 0.7, 3.0), (slow, 0.575, 1.0)):
        g.stats = {m: Stat(1.0, None, 2) for m in METRICS} | {"test": Stat(best, None, 2), "best_val": Stat(best, None, 2),
                                                               "throughput": Stat(tput, None, 2)}  # fmt: skip
    (board,) = leaderboards([slow, fast, flaky], "time", tolerance=0.0)
    assert board.target == 0.8 and board.ranked == [fast] and board.others == [flaky, slow]  # unranked: closest first
    assert fast.time_to_target.mean == 1.5  # seeds reached it after 2 s and 1 s
    assert board.reasons == ["1 of 2 seeds reached val 0.8000 (best val 0.7000)", "0 of 2 seeds reached val 0.8000 (best val 0.5750)"]
    (board,) = leaderboards([slow, fast, flaky], "throughput", tolerance=0.0)
    assert fast.time_to_target is None  # no stale values from the time board
    assert board.ranked == [fast] and board.others == [flaky, slow]  # unranked sorted by throughput too
    assert board.reasons[0] == "test 0.7000 below the cut 0.8000"
    (board,) = leaderboards([slow, fast, flaky], "throughput", tolerance=1.0)
    assert board.ranked == [flaky, fast, slow] and not board.others
    for criterion in ("test", "val"):  # OGB-style: every configuration ranked by mean accuracy
        (board,) = leaderboards([slow, flaky, fast], criterion)
        assert board.ranked == [fast, flaky, slow] and not board.others
    # Nobody reaches a target the runs' curves never touch: the title says so.
    from gnnq.report.summary import leaderboard_title

    for g in (fast, flaky, slow):
        g.stats["best_val"] = Stat(0.9, None, 2)
    (board,) = leaderboards([fast, flaky, slow], "time", tolerance=0.0)
    assert not board.ranked and "no configuration reached it in every seed (3 not ranked" in leaderboard_title(board)


def test_multirun_points_share_a_wandb_group(report_runs):
    from gnnq.track.wandb_logger import wandb_group

    records = [r for _, r in find_records([report_runs])[0]]
    groups = {r["config"]["logger"]["group"] for r in records}
    assert len(records) == 4 and len(groups) == 1 and next(iter(groups)).startswith("sweep-")
    cfg = OmegaConf.create(records[0]["config"])
    assert wandb_group(cfg) == next(iter(groups))
    cfg.logger.group = None
    assert wandb_group(cfg) == "synthetic-gcn-sync-fp32" or wandb_group(cfg) == "synthetic-sage-sync-fp32"


@pytest.mark.usefixtures("netns_host")
def test_speedup_plots_vs_bandwidth_and_hosts(tmp_path):
    """Real runs on emulated hosts: Vanilla and uniform 2-bit at 1 and 10 Gbit/s on 2 hosts, and at 1 Gbit/s on 3."""
    from gnnq.report.labels import method_labels
    from gnnq.report.plots import SPEEDUP_AXES, speedup_lines
    from tests.cli_helpers import run_gnnq

    small = ["-m", "logger=none", "dataset.num_nodes=400", "model.hidden=16", "trainer.epochs=2", "trainer.eval_every=1",
             "cluster=emulated", "cluster.nproc=1", "experiment=adaqp_vanilla,adaqp_uniform2"]  # fmt: skip
    for name, extra in (("bandwidth", ["cluster.hosts=2", "cluster.link=1gbit,10gbit"]), ("hosts", ["cluster.hosts=3"])):
        res = run_gnnq([*small, *extra], tmp_path / "runs" / name, tmp_path / "data", timeout=600)
        assert res.returncode == 0, res.stderr[-2000:]
    records, _ = find_records([tmp_path / "runs"])
    assert len(records) == 6 and all(r["status"] == "ok" for _, r in records)

    def epoch(quantizer: str, link: str, hosts: int) -> float:
        (t,) = [r["epoch_time_s"] for _, r in records if r["config"]["quantizer"]["name"] == quantizer
                and r["config"]["cluster"]["link"] == link and r["config"]["cluster"]["hosts"] == hosts]  # fmt: skip
        return t

    def speedup(link: str, hosts: int) -> float:
        return epoch("fp32", link, hosts) / epoch("uniform", link, hosts)

    bandwidth, hosts = SPEEDUP_AXES
    groups = group_runs(records)
    for g, label in zip(groups, method_labels(groups)):
        g.label = label
    # one line per configuration, named by its method preset; the axis's own setting is not part of the name
    u2 = "adaqp_uniform2"
    # The 3-host runs (1 Gbit/s only) make no line against bandwidth, nor the 10 Gbit/s runs (2 hosts only) against hosts.
    assert speedup_lines(groups, bandwidth) == {
        u2: [(1.0, pytest.approx(speedup("1gbit", 2))), (10.0, pytest.approx(speedup("10gbit", 2)))]}
    assert speedup_lines(groups, hosts) == {
        u2: [(2.0, pytest.approx(speedup("1gbit", 2))), (3.0, pytest.approx(speedup("1gbit", 3)))]}
    # Without Vanilla at 10 Gbit/s there is no speedup there: one bandwidth left, no bandwidth line.
    cfg = [g.runs[0][1]["config"] for g in groups]
    no_base = [g for g, c in zip(groups, cfg) if not (c["cluster"]["link"] == "10gbit" and c["quantizer"]["name"] == "fp32")]
    assert speedup_lines(no_base, bandwidth) == {} and list(speedup_lines(no_base, hosts)) == [u2]

    report = Path(sys.executable).parent / "gnnq-report"
    out = tmp_path / "report"
    res = subprocess.run([str(report), str(tmp_path / "runs"), "--out", str(out), "--plots"], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    for stem in ("speedup_vs_bandwidth-synthetic", "speedup_vs_hosts-synthetic"):
        assert (out / f"{stem}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert (out / f"{stem}.svg").read_text().lstrip().startswith("<?xml")
        assert f"{stem}.png" in res.stdout
    # Runs at one setting only: no speedup plots.
    one = tmp_path / "one"
    res = subprocess.run([str(report), str(tmp_path / "runs" / "hosts"), "--out", str(one), "--plots"], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert (one / "bytes_per_epoch-synthetic.png").is_file() and not list(one.glob("speedup_vs_*"))
