"""Faults in a running job, with the real CLI, torchrun and gloo: a rank killed by SIGKILL, a rank that hangs.

Each test starts ``gnnq`` as a user would, waits until training runs (rank 0 wrote a row of
metrics.jsonl), then breaks one rank and checks what the user gets: a prompt non-zero exit, a
record marked failed that names the rank and the cause, and no process of the run left behind.

Here: the real command-line runs and system services; the others are in `tests/unit/test_faults.py`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.cli_helpers import read_record, run_dirs, run_gnnq, start_gnnq

pytestmark = pytest.mark.machine_wide  # collective timeouts timed against the clock

SMALL = ["logger=none", "dataset.num_nodes=1500", "model.hidden=32", "cluster.nproc=2"]
LONG = [*SMALL, "trainer.epochs=100000"]


def run_pids(run_dir: Path) -> list[int]:
    """Live processes whose arguments name ``run_dir``: torchrun (it holds the workers' arguments) and the ranks."""
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            args = (proc / "cmdline").read_bytes().split(b"\0") if proc.name.isdigit() else []
        except OSError:
            continue  # exited meanwhile
        if str(run_dir).encode() in args:
            pids.append(int(proc.name))
    return pids


def rank_pid(run_dir: Path, rank: int) -> int:
    """The pid of the worker process of ``rank`` in ``run_dir`` (from its environment's RANK)."""
    for pid in run_pids(run_dir):
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue  # exited meanwhile
        if b"gnnq.rank" in cmdline and f"RANK={rank}".encode() in environ:
            return pid
    raise AssertionError(f"no worker process of rank {rank} for {run_dir}")


def wait_for_training(proc: subprocess.Popen, runs: Path, timeout_s: float = 120) -> Path:
    """The run dir, once rank 0 has written its first metrics row."""
    deadline = time.monotonic() + timeout_s
    while True:
        assert proc.poll() is None, f"gnnq exited before training started: {proc.communicate()[1]}"
        assert time.monotonic() < deadline, "training never started"
        rows = [p for p in runs.rglob("metrics.jsonl") if p.stat().st_size]
        if rows:
            return rows[0].parent
        time.sleep(0.2)


def assert_nothing_left(run_dir: Path) -> None:
    left = run_pids(run_dir)
    assert left == [], f"processes of the run outlived it: {left}"


def torchrun_pid(run_dir: Path) -> int:
    (pid,) = [p for p in run_pids(run_dir) if b"torch.distributed.run" in Path(f"/proc/{p}/cmdline").read_bytes()]
    return pid


@pytest.mark.parametrize("victim", [1, 0])
def test_a_rank_killed_by_sigkill_fails_the_job_fast(tmp_path, victim):
    runs = tmp_path / "runs"
    proc = start_gnnq(LONG, runs, tmp_path / "data")
    try:
        run_dir = wait_for_training(proc, runs)
        os.kill(rank_pid(run_dir, victim), signal.SIGKILL)
        killed = time.monotonic()
        _, err = proc.communicate(timeout=90)
        elapsed = time.monotonic() - killed
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, err
    assert elapsed < 60, f"the job took {elapsed:.0f} s to fail after the kill"
    record = read_record(run_dir)
    assert record["status"] == "failed"
    assert f"rank {victim} was killed by SIGKILL" in record["error"], record["error"]
    assert f"rank {victim} was killed by SIGKILL" in err and "Traceback" not in err
    assert_nothing_left(run_dir)


def test_torchrun_killed_by_sigkill_takes_its_ranks_along(tmp_path):
    """cluster=multinode on one host: gnnq starts torchrun there (a local job's ranks have no agent)."""
    from tests.reliability.cases.faults import one_host_torchrun

    runs = tmp_path / "runs"
    proc = start_gnnq([*LONG, *one_host_torchrun()], runs, tmp_path / "data")
    try:
        run_dir = wait_for_training(proc, runs)
        os.kill(torchrun_pid(run_dir), signal.SIGKILL)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, err
    record = read_record(run_dir)
    assert record["status"] == "failed" and "torchrun was killed by SIGKILL" in record["error"], record["error"]
    assert_nothing_left(run_dir)


def test_a_hanging_rank_fails_the_job_after_the_collective_timeout(tmp_path):
    timeout_s = 10
    runs = tmp_path / "runs"
    hang = {"GNNQ_FAULT_INJECT": "rank=1,epoch=3,mode=hang"}
    proc = start_gnnq([*LONG, f"cluster.timeout_s={timeout_s}"], runs, tmp_path / "data", env=hang)
    try:
        run_dir = wait_for_training(proc, runs)  # rank 1 stops taking part two epochs later
        started = time.monotonic()
        _, err = proc.communicate(timeout=timeout_s + 60)
        elapsed = time.monotonic() - started
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, err
    assert timeout_s - 1 < elapsed < timeout_s + 30, (
        f"the job failed {elapsed:.0f} s after the hang, with cluster.timeout_s={timeout_s}"
    )
    error = read_record(run_dir)["error"]
    assert read_record(run_dir)["status"] == "failed"
    assert error.startswith("rank 1 stopped taking part: it had been outside any collective for "), error
    assert (
        "(at gnnq/train/faults.py:" in error
        and "when rank 0's collective timed out waiting for it; rank 0 failed" in error
    )
    assert "Timed out" in error
    assert_nothing_left(run_dir)


def test_a_stopped_rank_is_named_not_the_peer_whose_collective_timed_out(tmp_path):
    """SIGSTOP freezes rank 1 (its heartbeat too); rank 0's collective times out; torchrun then needs its
    30 s grace before it SIGKILLs the stopped rank."""
    timeout_s = 10
    runs = tmp_path / "runs"
    proc = start_gnnq([*LONG, f"cluster.timeout_s={timeout_s}"], runs, tmp_path / "data")
    try:
        run_dir = wait_for_training(proc, runs)
        os.kill(rank_pid(run_dir, 1), signal.SIGSTOP)
        _, err = proc.communicate(timeout=timeout_s + 120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, err
    record = read_record(run_dir)
    assert record["status"] == "failed"
    assert record["error"].startswith("rank 1 stopped responding: its heartbeat stopped "), record["error"]
    assert (
        "s before rank 0's collective timed out (its process was stopped, e.g. by SIGSTOP, or frozen" in record["error"]
    )
    assert err.strip().splitlines()[-1] == f"gnnq: error: {record['error']}"
    assert_nothing_left(run_dir)


def test_a_multirun_goes_on_after_a_point_whose_rank_was_killed(tmp_path):
    runs = tmp_path / "runs"
    proc = start_gnnq(
        ["-m", *SMALL, "trainer.epochs=100000,3", "hydra/launcher=basic"], runs, tmp_path / "data"
    )  # the first point runs until killed; a torchrun job per point (the warm pool's case: test_warm_sweep.py)
    try:
        first = wait_for_training(proc, runs)
        os.kill(rank_pid(first, 1), signal.SIGKILL)
        _, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, err
    records = {d: read_record(d) for d in run_dirs(runs)}
    assert [r["config"]["trainer"]["epochs"] for r in records.values()] == [100000, 3]
    assert records[first]["status"] == "failed" and "rank 1 was killed by SIGKILL" in records[first]["error"]
    (second,) = [d for d in records if d != first]
    assert records[second]["status"] == "ok"
    assert f"1 of 2 runs failed: {first}" in err.splitlines()[-1], err
    assert_nothing_left(first)


def test_a_rank_that_raised_leaves_gnnqs_and_torch_elastics_error_files(tmp_path):
    fault = {"GNNQ_FAULT_INJECT": "rank=1,epoch=2"}
    res = run_gnnq([*SMALL, "trainer.epochs=3"], tmp_path / "runs", tmp_path / "data", env=fault)
    assert res.returncode == 1
    (run_dir,) = run_dirs(tmp_path / "runs")
    assert read_record(run_dir)["error"].startswith(
        "rank 1 failed: RuntimeError: injected fault at epoch 2 (traceback in"
    )
    from gnnq.launch.failure import elastic_log_dir, lost_peer

    paths = elastic_log_dir(run_dir).glob("*/attempt_0/*/error.json")
    files = {int(p.parent.name): json.loads(p.read_text())["message"] for p in paths}  # local rank -> its error
    assert files[1]["message"] == "RuntimeError: injected fault at epoch 2"
    assert "faults.py" in files[1]["extraInfo"]["py_callstack"]
    own = json.loads((run_dir / ".gnnq" / "error-rank1.json").read_text())
    assert own["message"] == files[1]["message"] and abs(own["time"] - float(files[1]["extraInfo"]["timestamp"])) < 2
    if 0 in files:  # rank 0 raised too only if its peer's exit broke its collective before torchrun stopped it
        assert lost_peer(files[0]["message"]), files[0]["message"]
