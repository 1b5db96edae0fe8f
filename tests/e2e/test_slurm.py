"""cluster=slurm against a real Slurm (Debian's slurmctld + slurmd + munge, started here): sbatch, srun, torchrun.

Skips when Slurm or the slurm extra is not installed; with GNNQ_REQUIRE_SLURM=1 (.ci/run) it fails instead.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from gnnq.launch.slurm import current_job
from tests.cli_helpers import read_metrics, read_record, run_dirs, run_gnnq, without_times
from tests.conftest import missing_extra, skip_or_fail
from tests.slurm_cluster import PrivateSlurm, missing_reason, node_names

pytestmark = pytest.mark.machine_wide  # its own slurmctld, slurmd and munge

SMALL = ["logger=none", "dataset.num_nodes=1500", "model.hidden=32", "trainer.epochs=6"]
SLURM_CPU = ["cluster=slurm", "cluster.backend=gloo"]  # CPU nodes: gloo, no GPUs asked for


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    reason = missing_reason() or missing_extra("slurm")
    if reason:
        skip_or_fail("GNNQ_REQUIRE_SLURM", reason)
    # munged wants every directory above its socket open to all: not so pytest's temporary directories
    cluster = PrivateSlurm(Path(tempfile.mkdtemp(prefix="gnnq-slurm-")))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(cluster.root, ignore_errors=True)


@pytest.fixture(scope="module")
def data_root(tmp_path_factory):
    return tmp_path_factory.mktemp("data")


def _run(slurm, args, runs, data_root, env=None):
    return run_gnnq(args, runs, data_root, env={"SLURM_CONF": str(slurm.conf), **(env or {})}, timeout=300)


def test_a_run_is_one_sbatch_job_whose_ranks_srun_starts(slurm, tmp_path, data_root):
    res = _run(slurm, [*SLURM_CPU, "cluster.nproc=2", *SMALL], tmp_path, data_root)  # no -m: still submitted
    assert res.returncode == 0, res.stderr
    (run_dir,) = run_dirs(tmp_path)
    record = read_record(run_dir)
    assert record["status"] == "ok" and record["world_size"] == 2
    job = record["summary"]["slurm"]
    assert len(job["nodes"]) == 1 and job["nodes"][0] in slurm.nodes
    # gnnq returns once submitit's result file is written; the batch script exits a moment later
    _wait_for(lambda: slurm.job_info(job["job_id"])["JobState"] not in ("RUNNING", "COMPLETING"), 60, "the job to end")
    info = slurm.job_info(job["job_id"])
    assert info["BatchFlag"] == "1" and info["JobState"] == "COMPLETED" and info["NumNodes"] == "1", info
    assert info["JobName"] == "gnnq" and info["NumCPUs"] == "2"
    assert f"launch task StepId={job['job_id']}.0 " in slurm.slurmd_log(job["nodes"][0]).read_text()  # the srun step
    first = (run_dir / "logs" / "torchrun.log").read_text().splitlines()[0]
    assert first.startswith("$ srun --nodes=1 --ntasks=1 --ntasks-per-node=1 --cpus-per-task=2 ")
    assert f"--rdzv-endpoint={job['rendezvous']} --rdzv-id={job['job_id']} " in first
    assert f"Slurm job {job['job_id']}" in res.stdout and "| status " in res.stdout  # shown where gnnq was started


@pytest.mark.skipif(len(node_names()) < 2, reason="this host's name does not resolve: one Slurm node only")
def test_a_sweep_is_a_job_array_of_two_node_jobs_computing_what_a_local_run_does(slurm, tmp_path, data_root):
    one_thread = "cluster.threads_per_rank=1"  # the same float summation order on both sides
    args = [*SLURM_CPU, "cluster.hosts=2", "cluster.nproc=1", one_thread, *SMALL, "trainer.seed=0,1"]
    res = _run(slurm, ["-m", *args], tmp_path / "slurm", data_root)
    assert res.returncode == 0, res.stderr
    records = {read_record(d)["config"]["trainer"]["seed"]: (d, read_record(d)) for d in run_dirs(tmp_path / "slurm")}
    assert sorted(records) == [0, 1]
    jobs = [r["summary"]["slurm"] for _, r in records.values()]
    assert all(r["status"] == "ok" and r["world_size"] == 2 for _, r in records.values())
    assert all(sorted(j["nodes"]) == sorted(slurm.nodes) for j in jobs), jobs
    assert len({j["job_id"] for j in jobs}) == 2
    arrays = {slurm.job_info(j["job_id"]).get("ArrayJobId") for j in jobs}
    assert len(arrays) == 1 and None not in arrays, "one sweep is one job array"
    for job in jobs:  # one torchrun on each node, started as one srun step
        for node in slurm.nodes:
            assert f"launch task StepId={job['job_id']}.0 " in slurm.slurmd_log(node).read_text(), node
    # Two nodes x one rank compute exactly what one host with two ranks does.
    local = run_gnnq(["cluster.nproc=2", one_thread, *SMALL, "trainer.seed=0"], tmp_path / "local", data_root)
    assert local.returncode == 0, local.stderr
    assert without_times(read_metrics(records[0][0])) == without_times(read_metrics(run_dirs(tmp_path / "local")[0]))


def test_a_failing_rank_on_one_node_stops_the_job_and_fails_gnnq(slurm, tmp_path, data_root):
    hosts = len(slurm.nodes)  # two nodes x one rank where the host name resolves, else one x two
    args = [*SLURM_CPU, f"cluster.hosts={hosts}", f"cluster.nproc={2 // hosts}", *SMALL, "trainer.epochs=50"]
    res = _run(slurm, args, tmp_path, data_root, env={"GNNQ_FAULT_INJECT": "rank=1,epoch=3"})
    assert res.returncode == 1, res.stderr
    (run_dir,) = run_dirs(tmp_path)
    record = read_record(run_dir)
    assert record["status"] == "failed" and "rank 1" in record["error"] and "injected fault" in record["error"]
    errors = [line for line in res.stderr.splitlines() if line.startswith("gnnq: error:")]
    assert len(errors) == 1 and "rank 1" in errors[0] and str(run_dir) in errors[0], res.stderr
    ps = subprocess.run(["pgrep", "-f", f"gnnq.rank --run-dir {run_dir}"], capture_output=True, text=True)
    assert ps.stdout.strip() == "", "no rank may outlive the job"


def test_the_job_is_read_from_the_slurm_environment(slurm):
    env = {**slurm.env, "SLURM_JOB_ID": "4242", "SLURM_NNODES": "3", "SLURM_JOB_NODELIST": "gpu-a[07-08],gpu-b01"}
    job = current_job(3, env)
    assert job.nodes == ["gpu-a07", "gpu-a08", "gpu-b01"]  # expanded by scontrol show hostnames
    assert job.rendezvous == "gpu-a07:24242"


def test_ctrl_c_while_waiting_cancels_the_job_and_the_run_ends_failed(slurm, tmp_path, data_root):
    env = {
        **os.environ,
        "GNNQ_RUNS": str(tmp_path),
        "GNNQ_DATA": str(data_root),
        "SLURM_CONF": str(slurm.conf),
        "WANDB_SILENT": "true",
    }
    env.pop("GNNQ_FAULT_INJECT", None)
    args = [*SLURM_CPU, "cluster.nproc=2", *SMALL, "trainer.epochs=100000"]
    gnnq = subprocess.Popen(
        [sys.executable, "-m", "gnnq.cli", *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        _wait_for(lambda: any(p.stat().st_size for p in tmp_path.rglob("metrics.jsonl")), 180, "training to start")
        gnnq.send_signal(signal.SIGINT)
        out, err = gnnq.communicate(timeout=120)
    finally:
        if gnnq.poll() is None:
            gnnq.kill()
    assert gnnq.returncode == 130, err
    (run_dir,) = run_dirs(tmp_path)
    job_id = next(p.name for p in run_dir.parent.glob(".submitit/*") if p.is_dir())
    assert f"gnnq: cancelled Slurm job(s) {job_id}" in err
    _wait_for(lambda: slurm.job_info(job_id)["JobState"] not in ("RUNNING", "COMPLETING"), 120, "the job to end")
    assert slurm.job_info(job_id)["JobState"] == "CANCELLED"
    _wait_for(lambda: (run_dir / "record.json").exists(), 60, "the job to write the record")
    assert read_record(run_dir)["status"] == "failed"
    ps = subprocess.run(["pgrep", "-f", f"gnnq.rank --run-dir {run_dir}"], capture_output=True, text=True)
    assert ps.stdout.strip() == "", "no rank may outlive the job"


def _wait_for(ready, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)
