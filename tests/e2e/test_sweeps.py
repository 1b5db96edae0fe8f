"""Sweeps through the real command line: by name from any directory, resume, dry run, the end-of-sweep
summary, job directory names, the per-job cli.log, --help and --version, and a reader that goes away.

Here: the real command-line runs and system services;
the others are in `tests/integration/test_sweeps.py`, `tests/unit/test_sweeps.py`.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from gnnq.config.compose import SWEEPS_DIR
from tests.cli_helpers import gnnq_env, read_record, run_gnnq

REPO = Path(__file__).resolve().parents[2]
TINY = ["logger=none", "dataset.num_nodes=300", "model.hidden=8", "trainer.epochs=1"]
HERE = {"PYTHONPATH": str(REPO)}  # the gnnq under test, also from a directory outside the checkout


@pytest.fixture(scope="module")
def data_root(tmp_path_factory):
    return tmp_path_factory.mktemp("data")


def _records(sweep: Path) -> dict[str, dict]:
    return {p.parent.name: json.loads(p.read_text()) for p in sorted(sweep.glob("*/record.json"))}


def test_a_shipped_sweep_by_name_from_outside_the_checkout_and_its_report(tmp_path, data_root):
    elsewhere, sweep = tmp_path / "elsewhere", tmp_path / "sweep"
    elsewhere.mkdir()
    # foundation_check sweeps model x partitioner x ranks; the command line pins model and ranks: 2 points
    args = ["sweep=foundation_check", *TINY, "model=sage", "cluster.nproc=1", f"hydra.sweep.dir={sweep}"]
    res = run_gnnq(args, tmp_path / "runs", data_root, env=HERE, cwd=elsewhere)  # sweep= implies -m
    assert res.returncode == 0, res.stderr
    records = _records(sweep)
    assert sorted(records) == ["0_partitioner=metis", "1_partitioner=random"]  # named by what tells them apart
    assert all(r["status"] == "ok" and r["config"]["model"]["name"] == "sage" for r in records.values())
    assert f"[gnnq] sweep finished in {sweep}: 2 ok, 0 failed" in res.stdout
    # the per-job cli.log holds what gnnq printed for that job: the launcher's lines and the summary table
    log = (sweep / "0_partitioner=metis" / "cli.log").read_text()
    assert (
        f"[gnnq] run dir: {sweep / '0_partitioner=metis'}" in log
        and "| status" in log
        and "partitioner=random" not in log
    )
    # the summary names the report command to run next; it runs as printed, from outside the checkout
    (next_line,) = [line for line in res.stdout.splitlines() if line.startswith("[gnnq] next: ")]
    cmd = shlex.split(next_line.removeprefix("[gnnq] next: "))
    assert cmd == ["gnnq-report", str(sweep), "--out", str(sweep / "report")]
    metis = ["--where", "partitioner.name=metis"]  # the peers table compares methods at one partitioner
    report = _report([*cmd[1:], *metis, "--table", "peers"], elsewhere)  # a shipped table spec by bare name
    assert report.returncode == 0, report.stderr
    assert "| sage" in (sweep / "report" / "report.md").read_text()
    spec = REPO / "sweeps" / "peers.table.yaml"
    assert _report([str(sweep), *metis, "--table", str(spec)], elsewhere).returncode == 0  # and by path
    bad = _report([str(sweep), "--table", "nosuch"], elsewhere)
    assert bad.returncode == 2 and "nosuch" in bad.stderr and "Traceback" not in bad.stderr


def _report(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    code = "import sys; from gnnq.cli import report_main; sys.argv[0] = 'gnnq-report'; report_main()"
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=gnnq_env(cwd, cwd, HERE),
        timeout=300,
    )


def test_a_rerun_skips_finished_points_reruns_failed_ones_and_the_summary_says_so(tmp_path, data_root):
    sweep = tmp_path / "sweep"
    args = ["-m", *TINY, "cluster.nproc=1,2", f"hydra.sweep.dir={sweep}"]
    # rank 1 exists only in the 2-rank point: that point fails, the 1-rank point is ok
    first = run_gnnq(args, tmp_path / "runs", data_root, env={"GNNQ_FAULT_INJECT": "rank=1,epoch=1"})
    assert first.returncode == 1
    one, two = sweep / "0_cluster.nproc=1", sweep / "1_cluster.nproc=2"
    assert {k: r["status"] for k, r in _records(sweep).items()} == {one.name: "ok", two.name: "failed"}
    assert f"[gnnq] sweep finished in {sweep}: 1 ok, 1 failed" in first.stdout
    assert f"[gnnq]   failed: {two}" in first.stdout
    assert f"[gnnq] next: gnnq-report {sweep} --out {sweep / 'report'}" in first.stdout
    assert first.stdout.rstrip().endswith(f"the same command with hydra.sweep.dir={sweep}")
    ok_record = (one / "record.json").read_bytes()

    second = run_gnnq(args, tmp_path / "runs", data_root)  # the same command: resume
    assert second.returncode == 0, second.stderr
    lines = [line for line in second.stdout.splitlines() if line.startswith("[gnnq] point #")]
    assert lines[0] == "[gnnq] point #0 (cluster.nproc=1): done in an earlier attempt (record ok), skipped"
    assert (
        lines[1].startswith("[gnnq] point #1 (cluster.nproc=2): the earlier attempt failed (") and "rank 1" in lines[1]
    )
    assert lines[1].endswith("running it again (its files kept as *.failed-1)") and len(lines) == 2
    assert (one / "record.json").read_bytes() == ok_record  # not run again
    assert read_record(two)["status"] == "ok"
    assert json.loads((two / "record.failed-1.json").read_text())["status"] == "failed"
    assert f"[gnnq] sweep finished in {sweep}: 2 ok (1 done earlier, skipped), 0 failed" in second.stdout

    # dry run: the points, their own overrides and the time of the earlier runs of equal config; nothing runs
    before = sorted(tmp_path.rglob("record.json"))
    dry = run_gnnq([*args[:-2], "cluster.nproc=1,2,3", "--dry-run"], tmp_path, data_root)  # runs root: tmp_path
    assert dry.returncode == 0, dry.stderr
    out = dry.stdout.splitlines()
    assert out[0] == f"gnnq: dry run, nothing runs: 3 point(s), each with {' '.join(TINY)}"
    assert out[1].startswith("  #0  cluster.nproc=1  ~") and "(median of 1 earlier run(s))" in out[1]
    assert out[3] == "  #2  cluster.nproc=3  time unknown (no earlier ok run of this config)"
    assert out[4].startswith("estimated time: ") and "for 2 of 3 point(s); 1 point(s) have no earlier run" in out[4]
    assert sorted(tmp_path.rglob("record.json")) == before and not (tmp_path / "multirun").exists()


def test_dry_run_and_cfg_with_multirun_list_points_and_a_bad_point_is_named(tmp_path):
    cfg = run_gnnq(["-m", *TINY, "model=gcn,sage", "--cfg", "job"], tmp_path, tmp_path, timeout=120)
    assert cfg.returncode == 0 and "Traceback" not in cfg.stdout + cfg.stderr, cfg.stderr
    assert "  #1  model=sage  time unknown" in cfg.stdout and "--cfg job" in cfg.stdout.splitlines()[-1]
    named = run_gnnq(["sweep=peers", "--dry-run", "dataset=cora"], tmp_path, tmp_path, timeout=120)
    assert named.returncode == 0, named.stderr
    methods = OmegaConf.load(SWEEPS_DIR / "peers.yaml").hydra.sweeper.params.experiment.split(",")
    assert f"{len(methods)} point(s), each with dataset=cora" in named.stdout
    assert all(re.search(rf"^  #{i} +experiment={m}  ", named.stdout, re.M) for i, m in enumerate(methods)), (
        named.stdout
    )
    bad = run_gnnq(["-m", *TINY, "trainer.lr=0.01,-1"], tmp_path, tmp_path, timeout=120)
    assert bad.returncode == 2 and not list(tmp_path.rglob("record.json"))
    assert bad.stderr.strip().startswith("gnnq: error: sweep point #1 of 2 (") and "trainer.lr=-1" in bad.stderr
    unknown = run_gnnq(["sweep=nosuch"], tmp_path, tmp_path, timeout=120)
    assert unknown.returncode == 2 and "sweep 'nosuch'" in unknown.stderr and "peers" in unknown.stderr
    mixed = run_gnnq(
        ["-m", "--info", *TINY], tmp_path, tmp_path, timeout=120
    )  # Hydra takes one mode: one line, not its traceback
    assert mixed.returncode == 2 and mixed.stderr.strip() == (
        "gnnq: error: --info and -m cannot be given together: give one of -m, --run, --cfg, --info, "
        "--shell-completion (a sweep's points: gnnq -m ... --dry-run)"
    )


def test_a_reader_that_goes_away_does_not_stop_the_run(tmp_path, data_root):
    run_dir = tmp_path / "run"
    cmd = shlex.join([sys.executable, "-m", "gnnq.cli", *TINY, "trainer.epochs=2", f"hydra.run.dir={run_dir}"])
    res = subprocess.run(
        ["bash", "-c", f"{cmd} 2>{tmp_path / 'err'} | head -1; exit ${{PIPESTATUS[0]}}"],
        capture_output=True,
        text=True,
        env=gnnq_env(tmp_path / "runs", data_root),
        timeout=300,
    )
    err = (tmp_path / "err").read_text()
    assert res.returncode == 0, err
    assert res.stdout == f"[gnnq] run dir: {run_dir}\n"
    assert "BrokenPipe" not in err and "Traceback" not in err
    assert read_record(run_dir)["status"] == "ok"
    assert "| status" in (run_dir / "cli.log").read_text()  # what the reader missed is in the log


def test_a_rerun_point_leaves_its_failed_wandb_run_set_aside_and_tagged(tmp_path, data_root):
    """Real W&B offline runs: the failed attempt's run is moved to wandb.failed-1/, tagged ``failed`` and
    ``attempt:1`` and named ``...-failed``; the rerun's is attempt 2 under the plain name, in the same group."""
    from gnnq.track.wandb_file import read_offline_run

    sweep = tmp_path / "sweep"
    args = ["-m", *TINY[1:], "logger=wandb", "logger.mode=offline", "cluster.nproc=2", f"hydra.sweep.dir={sweep}"]
    first = run_gnnq(args, tmp_path / "runs", data_root, env={"GNNQ_FAULT_INJECT": "rank=1,epoch=1"})
    assert first.returncode == 1, first.stderr
    second = run_gnnq(args, tmp_path / "runs", data_root)
    assert second.returncode == 0, second.stderr
    (point,) = [p.parent for p in sweep.glob("*/record.json")]
    failed = read_offline_run(next((point / "wandb.failed-1").glob("offline-run-*")))
    rerun = read_offline_run(next((point / "wandb").glob("offline-run-*")))
    assert "failed" in failed.tags and "attempt:1" in failed.tags and failed.exit_code == 1
    assert "failed" not in rerun.tags and "attempt:2" in rerun.tags and rerun.exit_code == 0
    assert failed.name == rerun.name + "-failed" and failed.group == rerun.group and failed.run_id != rerun.run_id
    assert failed.summary["status"] == "failed" and rerun.summary["status"] == "ok"
